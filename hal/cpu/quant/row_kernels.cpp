// SPDX-License-Identifier: Apache-2.0
// Row-major GEMM for float weights (Highway FMAs) in llama.cpp's summation orders. Tokens are
// processed in groups of 4 so each weight row is read once per group.
#include "hal/cpu/quant/row_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "hal/host/fp16.h"

#include "hal/host/hwy_targets.h"  // before any Highway header
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hal/cpu/quant/row_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include "hal/cpu/ggml_sum-inl.h"

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- float weights --------------------------------------------------------------------

// Each loader also rounds the activations the way llama.cpp's CPU backend does before it
// multiplies with that weight type (ggml converts them to the weight's vec_dot type), so
// float-weight models give llama.cpp's logits, not merely close ones.
struct LoadF32 {
  static constexpr int kBits = 32;       // per element
  static constexpr int kColsPerLane = 1;  // columns one lane of llama.cpp's GEMM takes per step
  template <class D>
  HWY_INLINE hn::Vec<D> round_x(D, hn::Vec<D> x) const { return x; }
  float round_x(float x) const { return x; }
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D df, const uint8_t* row, int64_t c) const {
    return hn::LoadU(df, reinterpret_cast<const float*>(row) + c);
  }
  float scalar(const uint8_t* row, int64_t c) const {
    float v;
    std::memcpy(&v, row + c * 4, 4);
    return v;
  }
  // ggml_vec_dot_f32's last columns: FMAs into the float sum.
  float tail(float s, const uint8_t* row, const float* x, int64_t c0, int64_t cols) const {
    for (int64_t c = c0; c < cols; ++c) s = std::fma(scalar(row, c), x[c], s);
    return s;
  }
};
struct LoadF16 {
  static constexpr int kBits = 16;
  static constexpr int kColsPerLane = 1;
  template <class D>
  HWY_INLINE hn::Vec<D> round_x(D df, hn::Vec<D> x) const {
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_SSE4
    // Without F16C the f16 demotion truncates; round lane by lane instead.
    HWY_ALIGN float lanes[hn::MaxLanes(df)];
    hn::Store(x, df, lanes);
    for (size_t i = 0; i < hn::Lanes(df); ++i) lanes[i] = fp16_to_fp32(fp32_to_fp16(lanes[i]));
    return hn::Load(df, lanes);
#else
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(df, hn::DemoteTo(dh, x));
#endif
  }
  float round_x(float x) const { return fp16_to_fp32(fp32_to_fp16(x)); }
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D df, const uint8_t* row, int64_t c) const {
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(row) + c));
  }
  float scalar(const uint8_t* row, int64_t c) const {
    uint16_t h;
    std::memcpy(&h, row + c * 2, 2);
    return fp16_to_fp32(h);
  }
  // ggml_vec_dot_f16's last columns: products in float, added in double.
  float tail(float s, const uint8_t* row, const float* x, int64_t c0, int64_t cols) const {
    double sum = s;
    for (int64_t c = c0; c < cols; ++c) sum += static_cast<double>(scalar(row, c) * round_x(x[c]));
    return static_cast<float>(sum);
  }
};
struct LoadBF16 {
  static constexpr int kBits = 16;
  static constexpr int kColsPerLane = 2;
  // Round to nearest even in the upper 16 bits, as ggml's fp32 -> bf16.
  template <class D>
  HWY_INLINE hn::Vec<D> round_x(D df, hn::Vec<D> x) const {
    const hn::RebindToUnsigned<D> du;
    auto u = hn::BitCast(du, x);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
    u = hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), lsb));
    return hn::BitCast(df, hn::And(u, hn::Set(du, 0xffff0000u)));
  }
  float round_x(float x) const { return bf16_to_fp32(fp32_to_bf16(x)); }
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D df, const uint8_t* row, int64_t c) const {
    const hn::RebindToUnsigned<D> du;
    const hn::Rebind<uint16_t, D> dh;
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(dh, reinterpret_cast<const uint16_t*>(row) + c))));
  }
  float scalar(const uint8_t* row, int64_t c) const {
    uint16_t h;
    std::memcpy(&h, row + c * 2, 2);
    return bf16_to_fp32(h);
  }
  // llama.cpp (vdpbf16ps) pairs elements: lane j of 32 elements takes 2j + 1, then 2j, each
  // product fused into the lane. acc += the 2 n elements from column c.
  template <class D>
  HWY_INLINE void pair_fma(D df, const uint8_t* row, const float* x, int64_t c, hn::Vec<D>& acc) const {
    const hn::RebindToUnsigned<D> du;
    const auto w = hn::LoadU(du, reinterpret_cast<const uint32_t*>(row + c * 2));
    const auto w_even = hn::BitCast(df, hn::ShiftLeft<16>(w));
    const auto w_odd = hn::BitCast(df, hn::And(w, hn::Set(du, 0xffff0000u)));
    hn::Vec<D> x_even, x_odd;
    hn::LoadInterleaved2(df, x + c, x_even, x_odd);
    acc = hn::MulAdd(w_even, round_x(df, x_even), hn::MulAdd(w_odd, round_x(df, x_odd), acc));
  }
  // ggml_vec_dot_bf16's last columns: products in float, added in double.
  float tail(double s, const uint8_t* row, const float* x, int64_t c0, int64_t cols) const {
    for (int64_t c = c0; c < cols; ++c) s += static_cast<double>(scalar(row, c) * round_x(x[c]));
    return static_cast<float>(s);
  }
};

// Several tokens, as llamafile's GEMM (llama.cpp's prompt path; cols % 16 == 0, BF16 % 32):
// per (row, token) 16 lanes over the columns, lane l an FMA chain over the columns l, l + 16,
// ... (BF16: the pairs 2l, 2l + 1 of every 32, see pair_fma), reduced as
// _mm512_reduce_add_ps. T tokens share each float weight vector.
template <int T, class Load>
HWY_INLINE void FloatTileGemm(const RowGemmArgs& a, int64_t r, int t0, const Load& load) {
  const hn::ScalableTag<float> df;
  constexpr int kN = static_cast<int>(hn::MaxLanes(decltype(df)()));
  constexpr int kP = PiecesPer16<decltype(df)>();
  constexpr int kW = Load::kColsPerLane;
  const int64_t cols = a.cols;
  const uint8_t* row = a.w + static_cast<size_t>(r) * a.row_bytes;
  const float* x = a.x + t0 * cols;
  hn::Vec<decltype(df)> acc[T][kP];
  for (int t = 0; t < T; ++t)
    for (int p = 0; p < kP; ++p) acc[t][p] = hn::Zero(df);
  for (int64_t c = 0; c < cols; c += kW * kN * kP) {
    for (int p = 0; p < kP; ++p) {
      if constexpr (kW == 2) {
        for (int t = 0; t < T; ++t) load.pair_fma(df, row, x + t * cols, c + 2 * kN * p, acc[t][p]);
      } else {
        const auto wv = load(df, row, c + p * kN);
        for (int t = 0; t < T; ++t) {
          acc[t][p] = hn::MulAdd(wv, load.round_x(df, hn::LoadU(df, x + t * cols + c + p * kN)), acc[t][p]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t) a.y[(t0 + t) * a.ldy + r] = Reduce16(df, acc[t]);
}

// One token (or shapes llamafile does not take), as ggml_vec_dot_f32 / ggml_vec_dot_f16: 4
// registers of 16 lanes over steps of 64 columns, combined and reduced (VecDotSum), then the
// last columns one by one (F32: FMAs in float; F16: in double).
template <class Load>
HWY_INLINE void FloatDot(const RowGemmArgs& a, int64_t r, int t, const Load& load) {
  const hn::ScalableTag<float> df;
  constexpr int kN = static_cast<int>(hn::MaxLanes(decltype(df)()));
  constexpr int kPer = kGgmlStep / kN;
  const int64_t cols = a.cols, np = cols / kGgmlStep * kGgmlStep;
  const uint8_t* row = a.w + static_cast<size_t>(r) * a.row_bytes;
  const float* x = a.x + t * cols;
  hn::Vec<decltype(df)> acc[kPer];
  for (int v = 0; v < kPer; ++v) acc[v] = hn::Zero(df);
  for (int64_t c = 0; c < np; c += kGgmlStep) {
    for (int v = 0; v < kPer; ++v) {
      acc[v] = hn::MulAdd(load(df, row, c + v * kN), load.round_x(df, hn::LoadU(df, x + c + v * kN)), acc[v]);
    }
  }
  const float s = VecDotSum(df, acc);
  a.y[t * a.ldy + r] = load.tail(s, row, x, np, cols);
}

// BF16, one token, as ggml_vec_dot_bf16 (AVX512-BF16): two 16-lane registers of pairs over
// steps of 64 columns (32 each), each reduced and added in double, then the rest in double.
HWY_INLINE void Bf16Dot(const RowGemmArgs& a, int64_t r, int t, const LoadBF16& load) {
  const hn::ScalableTag<float> df;
  constexpr int kN = static_cast<int>(hn::MaxLanes(decltype(df)()));
  constexpr int kP = PiecesPer16<decltype(df)>();
  const int64_t cols = a.cols, np = cols / kGgmlStep * kGgmlStep;
  const uint8_t* row = a.w + static_cast<size_t>(r) * a.row_bytes;
  const float* x = a.x + t * cols;
  hn::Vec<decltype(df)> c1[kP], c2[kP];
  for (int p = 0; p < kP; ++p) c1[p] = c2[p] = hn::Zero(df);
  for (int64_t c = 0; c < np; c += kGgmlStep) {
    for (int p = 0; p < kP; ++p) {
      load.pair_fma(df, row, x, c + 2 * kN * p, c1[p]);
      load.pair_fma(df, row, x, c + kGgmlStep / 2 + 2 * kN * p, c2[p]);
    }
  }
  double sum = Reduce16(df, c1);
  sum += Reduce16(df, c2);
  a.y[t * a.ldy + r] = load.tail(sum, row, x, np, cols);
}

// Scalable vectors: one lane order of their own (not llama.cpp's).
template <class Load>
HWY_INLINE void FloatRowScalable(const RowGemmArgs& a, int64_t r, const Load& load) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), cols = a.cols;
  const uint8_t* row = a.w + static_cast<size_t>(r) * a.row_bytes;
  for (int t = 0; t < a.n_tokens; ++t) {
    const float* x = a.x + t * cols;
    auto acc = hn::Zero(df);
    int64_t c = 0;
    for (; c + N <= cols; c += N) acc = hn::MulAdd(load(df, row, c), load.round_x(df, hn::LoadU(df, x + c)), acc);
    float s = hn::GetLane(hn::SumOfLanes(df, acc));
    for (; c < cols; ++c) s += load.scalar(row, c) * load.round_x(x[c]);
    a.y[t * a.ldy + r] = s;
  }
}

// Few columns (a LoRA adapter's B: K = its rank): a dot product per (row, token) would be all
// reduction and tail. Instead a block of rows is converted once into k-major floats and every
// token takes one multiply-add per column across the block's rows, in the arithmetic of
// llama.cpp's tail for such shapes, so the bits are the same: F32 fused in float, F16 and BF16
// products in float added in double, the columns in order.
#if HWY_TARGET != HWY_SCALAR
constexpr int64_t kSmallK = kSmallKCols;
static_assert(kSmallK == kGgmlStep, "below one of ggml's steps, a dot product is all tail");

template <class Load>
void SmallKRows(const RowGemmArgs& a, const Load& load) {
  const hn::ScalableTag<float> df;
  constexpr int64_t N = static_cast<int64_t>(hn::MaxLanes(df));
  constexpr int kTokens = 16;  // activations rounded once per group of this many tokens
  const int64_t K = a.cols;
  HWY_ALIGN float wt[kSmallK * N];  // [k][lane]
  HWY_ALIGN float block[kSmallK * N];  // [lane][k]
  HWY_ALIGN float xs[kTokens * kSmallK];
  // Rows packed back to back (a whole weight, not a view): the block converts as one vector run
  // (a decode step has one token to spread the conversion over).
  constexpr bool kVectorLoad = !std::is_same_v<Load, LoadBF16>;
  const bool packed = static_cast<int64_t>(a.row_bytes) * 8 == K * Load::kBits;
  const int64_t r_vec = a.r_begin + (a.r_end - a.r_begin) / N * N;  // rows in whole vectors
  for (int t0 = 0; t0 < a.n_tokens; t0 += kTokens) {
    const int nt = std::min(kTokens, a.n_tokens - t0);
    for (int t = 0; t < nt; ++t)
      for (int64_t k = 0; k < K; ++k) xs[t * K + k] = load.round_x(a.x[(t0 + t) * K + k]);
    for (int64_t r = a.r_begin; r < r_vec; r += N) {
      const uint8_t* first = a.w + static_cast<size_t>(r) * a.row_bytes;
      const int64_t in_panel = r % kKMajorRows;
      const float* wk = wt;  // [k][lane], k at wk + k * wstride
      int64_t wstride = N;
      if (a.kmajor != nullptr && in_panel + N <= kKMajorRows && (r / kKMajorRows + 1) * kKMajorRows <= a.rows) {
        // Packed at load: the block is already [k][lane].
        wk = a.kmajor + r / kKMajorRows * kKMajorRows * K + in_panel;
        wstride = kKMajorRows;
      } else if (kVectorLoad && packed) {
        if constexpr (kVectorLoad)
          for (int64_t c = 0; c < N * K; c += N) hn::Store(load(df, first, c), df, block + c);
        for (int64_t i = 0; i < N; ++i)
          for (int64_t k = 0; k < K; ++k) wt[k * N + i] = block[i * K + k];
      } else {
        for (int64_t i = 0; i < N; ++i) {
          const uint8_t* row = first + static_cast<size_t>(i) * a.row_bytes;
          for (int64_t k = 0; k < K; ++k) wt[k * N + i] = load.scalar(row, k);
        }
      }
      for (int t = 0; t < nt; ++t) {
        const float* x = xs + t * K;
        float* y = a.y + (t0 + t) * a.ldy + r;
        if constexpr (std::is_same_v<Load, LoadF32>) {
          auto acc = hn::Zero(df);
          for (int64_t k = 0; k < K; ++k) acc = hn::MulAdd(hn::LoadU(df, wk + k * wstride), hn::Set(df, x[k]), acc);
          hn::StoreU(acc, df, y);
        } else {
          const hn::Half<decltype(df)> dh;
          const hn::Rebind<double, decltype(dh)> dd;
          auto lo = hn::Zero(dd), hi = hn::Zero(dd);
          for (int64_t k = 0; k < K; ++k) {
            const auto p = hn::Mul(hn::LoadU(df, wk + k * wstride), hn::Set(df, x[k]));
            lo = hn::Add(lo, hn::PromoteTo(dd, hn::LowerHalf(dh, p)));
            hi = hn::Add(hi, hn::PromoteTo(dd, hn::UpperHalf(dh, p)));
          }
          hn::StoreU(hn::DemoteTo(dh, lo), dh, y);
          hn::StoreU(hn::DemoteTo(dh, hi), dh, y + N / 2);
        }
      }
    }
  }
  // The last rows, as FloatDot's tail computes them.
  for (int64_t r = r_vec; r < a.r_end; ++r) {
    const uint8_t* row = a.w + static_cast<size_t>(r) * a.row_bytes;
    for (int t = 0; t < a.n_tokens; ++t) a.y[t * a.ldy + r] = load.tail(0.0f, row, a.x + t * K, 0, K);
  }
}
#endif  // HWY_TARGET != HWY_SCALAR

template <class Load>
void FloatRows(const RowGemmArgs& a, const Load& load) {
#if HWY_HAVE_SCALABLE
  for (int64_t r = a.r_begin; r < a.r_end; ++r) FloatRowScalable(a, r, load);
#else
  constexpr bool kBf16 = std::is_same_v<Load, LoadBF16>;
  // llamafile takes k % KN == 0 (KN: 16 floats, 32 bf16) and m % 4 == 0 (m: the weight's rows).
  const bool gemm = a.n_tokens > 1 && a.cols % (Load::kColsPerLane * kGgmlLanes) == 0 && a.rows % 4 == 0;
#if HWY_TARGET != HWY_SCALAR
  if (!gemm && a.cols < kSmallK) return SmallKRows(a, load);  // FloatDot would be all tail
#endif
  for (int64_t r = a.r_begin; r < a.r_end; ++r) {
    if (!gemm) {
      for (int t = 0; t < a.n_tokens; ++t) {
        if constexpr (kBf16) {
          Bf16Dot(a, r, t, load);
        } else {
          FloatDot(a, r, t, load);
        }
      }
      continue;
    }
    int t = 0;
    for (; t + 4 <= a.n_tokens; t += 4) FloatTileGemm<4>(a, r, t, load);
    for (; t < a.n_tokens; ++t) FloatTileGemm<1>(a, r, t, load);
  }
#endif
}

void RowGemm(const RowGemmArgs& a) {
  switch (a.type) {
    case WeightType::F32: FloatRows(a, LoadF32{}); break;
    case WeightType::F16: FloatRows(a, LoadF16{}); break;
    case WeightType::BF16: FloatRows(a, LoadBF16{}); break;
    default: break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace llmsvc::hal::cpu {
HWY_EXPORT(RowGemm);

bool wants_kmajor(WeightType t, int64_t rows, int64_t cols) {
  return (t == WeightType::F32 || t == WeightType::F16 || t == WeightType::BF16) && cols < kSmallKCols &&
         rows >= kKMajorRows;
}

size_t kmajor_floats(int64_t rows, int64_t cols) { return static_cast<size_t>(rows / kKMajorRows * kKMajorRows * cols); }

void pack_kmajor(WeightType t, const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols, float* out) {
  for (int64_t r = 0; r < rows / kKMajorRows * kKMajorRows; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
    float* panel = out + r / kKMajorRows * kKMajorRows * cols + r % kKMajorRows;
    for (int64_t k = 0; k < cols; ++k) {
      float v;
      if (t == WeightType::F32) {
        std::memcpy(&v, row + k * 4, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, row + k * 2, 2);
        v = t == WeightType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
      }
      panel[k * kKMajorRows] = v;  // exact: every f16 and bf16 value is a float
    }
  }
}

void row_gemm(const RowGemmArgs& a) { HWY_DYNAMIC_DISPATCH(RowGemm)(a); }
}  // namespace llmsvc::hal::cpu
#endif
