// SPDX-License-Identifier: Apache-2.0
// matmul against scalar dequantization + a float dot product, for every weight type, SIMD
// target, thread count and token count. The tolerance is derived from the int8 activation
// quantization (half a step per element, plus ggml's fp16 rounding of the scales).
#include "hal/cpu/quant/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <random>
#include <utility>
#include <vector>

#include "hal/cpu/quant/act_quant.h"
#include "hal/weight_blocks.h"
#include "hal/host/dequantize.h"
#include "hal/host/fp16.h"
#include "tests/common/simd_targets.h"
#include "tests/kernels/random_weights.h"

namespace llmsvc::hal::cpu {
namespace {

bool is_legacy(WeightType t) { return block_elems(t) == 32; }
bool is_kquant(WeightType t) { return block_elems(t) == 256; }

// Reference y and per-output error bound.
void reference(WeightType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols, const std::vector<float>& x,
               int n_tokens, std::vector<double>& y, std::vector<double>& tol) {
  const size_t rb = row_bytes(t, cols);
  std::vector<float> wr(cols);
  y.assign(n_tokens * rows, 0.0);
  tol.assign(n_tokens * rows, 0.0);
  const int64_t qk = is_kquant(t) ? 256 : 32;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t, w.data() + r * rb, wr.data(), cols);
    for (int tk = 0; tk < n_tokens; ++tk) {
      const float* xt = x.data() + tk * cols;
      double acc = 0, mag = 0, qerr = 0;
      for (int64_t c = 0; c < cols; ++c) {
        // Float weight types see activations rounded to their own precision, as in ggml.
        const float xv = t == WeightType::F16    ? fp16_to_fp32(fp32_to_fp16(xt[c]))
                         : t == WeightType::BF16 ? bf16_to_fp32(fp32_to_bf16(xt[c]))
                                                 : xt[c];
        acc += static_cast<double>(wr[c]) * xv;
        mag += std::fabs(static_cast<double>(wr[c]) * xv);
      }
      if (is_legacy(t) || is_kquant(t)) {
        for (int64_t b = 0; b < cols / qk; ++b) {
          double amax = 0, wabs = 0;
          for (int64_t k = b * qk; k < (b + 1) * qk; ++k) {
            amax = std::max(amax, std::fabs(static_cast<double>(xt[k])));
            wabs += std::fabs(wr[k]);
          }
          const double step = amax / 127.0;
          // Half a step per element; legacy types also carry ggml's fp16-rounded d and s.
          qerr += step * (is_legacy(t) ? 0.5 + 127.0 / 2048 : 0.5) * wabs;
          if (t == WeightType::Q4_1 || t == WeightType::Q5_1) {
            uint16_t mh;
            std::memcpy(&mh, w.data() + r * rb + b * block_bytes(t) + 2, 2);
            qerr += std::fabs(fp16_to_fp32(mh)) * 32 * amax / 2048;
          }
        }
      }
      y[tk * rows + r] = acc;
      tol[tk * rows + r] = qerr + 5e-5 * mag + 1e-6;
    }
  }
}

struct Case {
  WeightType type;
  int64_t rows, cols;
};

// check(y) for the matmul of w with x computed on every SIMD target (all, or those with a
// fused FMA), on 1 and 3 threads.
template <class Check>
void for_each_config(const CpuWeight& w, const std::vector<float>& x, int n_tokens, const Check& check,
                     bool fma_only = false) {
  const int64_t rows = w.ref().rows;
  test::for_each_simd_target([&](int64_t target) {
    if (fma_only && !test::has_fma(target)) return;
    for (int threads : {1, 3}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + " tokens " + std::to_string(n_tokens));
      ThreadPool pool(threads);
      MatmulScratch scratch;
      std::vector<float> y(n_tokens * rows, std::nanf(""));
      matmul(w, x.data(), n_tokens, y.data(), pool, scratch);
      check(y);
    }
  });
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (WeightType t : {WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::Q8_0}) {
    v.push_back({t, 37, 64});   // partial last panel
    v.push_back({t, 16, 96});
    v.push_back({t, 50, 576});
  }
  for (WeightType t : {WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K}) {
    v.push_back({t, 19, 256});
    v.push_back({t, 8, 512});
  }
  for (WeightType t : {WeightType::F32, WeightType::F16, WeightType::BF16}) {
    v.push_back({t, 21, 37});
    v.push_back({t, 9, 128});
  }
  return v;
}

TEST(Matmul, EveryTypeTargetThreadsAndTokenCount) {
  uint32_t seed = 1;
  for (const Case& c : cases()) {
    SCOPED_TRACE("type " + std::to_string(static_cast<int>(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.cols));
    const auto w = random_weight(c.type, c.rows, c.cols, seed++);
    const WeightRef ref{c.type, w.data(), c.rows, c.cols, row_bytes(c.type, c.cols)};
    auto pw = prepare_cpu_weight(ref);
    ASSERT_TRUE(pw.ok()) << pw.status().message();
    for (int n_tokens : {1, 3, 8, 13, 37}) {  // 37: two full token groups and a tail
      const auto x = random_acts(n_tokens * c.cols, seed++);
      std::vector<double> yref, tol;
      reference(c.type, w, c.rows, c.cols, x, n_tokens, yref, tol);
      for_each_config(**pw, x, n_tokens, [&](const std::vector<float>& y) {
        for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], yref[i], tol[i]) << "output " << i;
      });
    }
  }
}

// ggml's x86 dot product of one weight row with one token (ggml_vec_dot_q4_0_q8_0 and its
// siblings, the order llamafile's GEMM keeps too), from the GGUF bytes: per block, the signed
// integer sum of each group of 4 products is one of 8 lanes, lane += d_w d_x * sum by FMA;
// then hsum_float_8: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), plus, for the types
// with a min, sum over blocks of m_w s_x (an FMA chain).
float ggml_dot(WeightType t, const uint8_t* row, const float* x, int64_t cols) {
  const int64_t nb = cols / 32;
  std::vector<int8_t> q(cols);
  std::vector<float> d(nb), s(nb);
  std::vector<int32_t> bias(8 * nb);
  quantize_q8_ref(x, q.data(), d.data(), s.data(), bias.data(), cols, 0);
  float lane[8] = {}, mins = 0.f;
  const size_t bs = block_bytes(t);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * bs;
    uint16_t dh, mh = 0;
    std::memcpy(&dh, blk, 2);
    int w[32];
    const uint8_t* qs = blk + (t == WeightType::Q4_1 || t == WeightType::Q5_1 ? 4 : 2);
    if (t == WeightType::Q4_1 || t == WeightType::Q5_1) std::memcpy(&mh, blk + 2, 2);
    uint32_t qh = 0;
    if (t == WeightType::Q5_0 || t == WeightType::Q5_1) {
      std::memcpy(&qh, qs, 4);
      qs += 4;
    }
    for (int k = 0; k < 32; ++k) {
      switch (t) {
        case WeightType::Q8_0: w[k] = static_cast<int8_t>(qs[k]); break;
        default: {
          int u = k < 16 ? qs[k] & 0x0F : qs[k - 16] >> 4;
          u |= static_cast<int>((qh >> k) & 1u) << 4;
          w[k] = u - (t == WeightType::Q4_0 ? 8 : t == WeightType::Q5_0 ? 16 : 0);
        }
      }
    }
    const float dd = fp16_to_fp32(dh) * d[b];
    for (int g = 0; g < 8; ++g) {
      int32_t sum = 0;
      for (int k = 4 * g; k < 4 * g + 4; ++k) sum += w[k] * q[b * 32 + k];
      lane[g] = std::fma(dd, static_cast<float>(sum), lane[g]);
    }
    if (t == WeightType::Q4_1 || t == WeightType::Q5_1) mins = std::fma(fp16_to_fp32(mh), s[b], mins);
  }
  const float h = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  return t == WeightType::Q4_1 || t == WeightType::Q5_1 ? h + mins : h;
}

using DotFn = float (*)(WeightType, const uint8_t*, const float*, int64_t);

// matmul gives dot(type, weight row, token) bit for bit: every type and shape, target, thread
// count, token count (decode, prefill tiles and tails, several token groups).
void expect_ggml_bits(std::initializer_list<WeightType> types, std::initializer_list<std::pair<int64_t, int64_t>> shapes,
                      uint32_t seed, DotFn dot) {
  for (WeightType t : types) {
    for (const auto& [rows, cols] : shapes) {
      const auto w = random_weight(t, rows, cols, seed++);
      auto pw = prepare_cpu_weight({t, w.data(), rows, cols, row_bytes(t, cols)});
      ASSERT_TRUE(pw.ok());
      for (int n_tokens : {1, 2, 3, 33, 37}) {
        const auto x = random_acts(n_tokens * cols, seed++);
        std::vector<float> want(n_tokens * rows);
        for (int tk = 0; tk < n_tokens; ++tk)
          for (int64_t r = 0; r < rows; ++r)
            want[tk * rows + r] = dot(t, w.data() + r * row_bytes(t, cols), x.data() + tk * cols, cols);
        SCOPED_TRACE("type " + std::to_string(static_cast<int>(t)) + " tokens " + std::to_string(n_tokens));
        for_each_config(**pw, x, n_tokens, [&](const std::vector<float>& y) {
          for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want[i]) << "output " << i;
        });
      }
    }
  }
}

// The 32-element block types give llama.cpp's results bit for bit.
TEST(Matmul, LegacyTypesMatchGgmlBitForBit) {
  expect_ggml_bits({WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::Q8_0},
                   {{37, 64}, {50, 576}}, 500, ggml_dot);
}

// ggml's x86 K-quant dot products (ggml_vec_dot_q4_K_q8_K / q5_K / q6_K, the AVX2 code its
// AVX-512 build runs too), from the GGUF bytes. Activations: quantize_row_q8_K_ref (per 256,
// iscale = -127 / the first value of largest magnitude, q = min(127, round-half-even(iscale x)),
// d = 1 / iscale). Per superblock 8 integer lanes, lane g = sum over the 32-column sub-blocks
// of scale * (products k = 4g..4g+3); lane_g = fma(d_x d_w, lane, lane_g); hsum_float_8.
// Mins with dmin' = -d_x dmin_w and p_i = mn_2i bsum_2i + mn_2i+1 bsum_2i+1 (bsum: the sum of
// a sub-block's q): Q4_K 4 lanes m_i = fma(dmin', p_i, m_i), added as (m0 + m2) + (m1 + m3);
// Q5_K one chain m = fma(dmin', p_0 + .. + p_3, m). Q6_K multiplies (q - 32) by its 16-column scales.
float ggml_kdot(WeightType t, const uint8_t* row, const float* x, int64_t cols) {
  const int64_t nsb = cols / 256;
  float lane[8] = {}, m4[4] = {}, m1 = 0.f;
  for (int64_t s = 0; s < nsb; ++s) {
    const float* xs = x + 256 * s;
    float amax = 0.f, vmax = 0.f;
    for (int i = 0; i < 256; ++i) {
      if (std::fabs(xs[i]) > amax) {
        amax = std::fabs(xs[i]);
        vmax = xs[i];
      }
    }
    int8_t q[256] = {};
    float dx = 0.f;
    if (amax != 0.f) {
      const float iscale = -127.f / vmax;
      for (int i = 0; i < 256; ++i) {
        const float v = iscale * xs[i];
        q[i] = static_cast<int8_t>(std::min(127, static_cast<int>(std::nearbyint(v))));
      }
      dx = 1.f / iscale;
    }
    const uint8_t* blk = row + s * block_bytes(t);
    int u[256], sc[256];  // per element: the integer weight and its scale
    uint8_t mn[8] = {};
    uint16_t dh, dminh = 0;
    if (t == WeightType::Q6_K) {
      const auto* b = reinterpret_cast<const BlockQ6_K*>(blk);
      for (int e = 0; e < 256; ++e) {
        const int n = e / 128, l = e % 32, part = (e % 128) / 32;
        const uint8_t ql = b->ql[64 * n + 32 * (part % 2) + l];
        const int lo = part < 2 ? ql & 0xF : ql >> 4;
        u[e] = (lo | (((b->qh[32 * n + l] >> (2 * part)) & 3) << 4)) - 32;
        sc[e] = b->scales[e / 16];
      }
      dh = b->d;
    } else {
      const uint8_t* qs;
      const uint8_t* scales;
      const uint8_t* qh = nullptr;
      if (t == WeightType::Q4_K) {
        const auto* b = reinterpret_cast<const BlockQ4_K*>(blk);
        qs = b->qs, scales = b->scales, dh = b->d, dminh = b->dmin;
      } else {
        const auto* b = reinterpret_cast<const BlockQ5_K*>(blk);
        qs = b->qs, scales = b->scales, qh = b->qh, dh = b->d, dminh = b->dmin;
      }
      uint8_t scj[8];
      for (int j = 0; j < 8; ++j) k_scale_min(j, scales, &scj[j], &mn[j]);
      for (int e = 0; e < 256; ++e) {
        const int j = e / 32, l = e % 32;
        const uint8_t byte = qs[32 * (j / 2) + l];
        u[e] = j % 2 == 0 ? byte & 0xF : byte >> 4;
        if (qh) u[e] |= ((qh[l] >> j) & 1) << 4;
        sc[e] = scj[j];
      }
    }
    int32_t isum[8] = {};
    for (int e = 0; e < 256; ++e) isum[(e % 32) / 4] += sc[e] * u[e] * q[e];
    const float d = dx * fp16_to_fp32(dh);
    for (int g = 0; g < 8; ++g) lane[g] = std::fma(d, static_cast<float>(isum[g]), lane[g]);
    if (t != WeightType::Q6_K) {
      const float dmin = -dx * fp16_to_fp32(dminh);
      int32_t bsum[8] = {}, p[4] = {};
      for (int e = 0; e < 256; ++e) bsum[e / 32] += q[e];
      for (int j = 0; j < 8; ++j) p[j / 2] += mn[j] * bsum[j];
      if (t == WeightType::Q4_K) {
        for (int i = 0; i < 4; ++i) m4[i] = std::fma(dmin, static_cast<float>(p[i]), m4[i]);
      } else {
        m1 = std::fma(dmin, static_cast<float>(p[0] + p[1] + p[2] + p[3]), m1);
      }
    }
  }
  const float h = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  if (t == WeightType::Q4_K) return h + ((m4[0] + m4[2]) + (m4[1] + m4[3]));
  if (t == WeightType::Q5_K) return h + m1;
  return h;
}

// The K-quants give llama.cpp's results bit for bit.
TEST(Matmul, KQuantsMatchGgmlBitForBit) {
  expect_ggml_bits({WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K}, {{19, 256}, {40, 768}}, 900, ggml_kdot);
}

// llama.cpp's float-weight products, written plainly (its AVX-512 build). Activations are first
// rounded to the weight's type. Several tokens on shapes llamafile's GEMM takes (cols % 16, or
// 32 for BF16, rows % 4): 16 lanes over the columns, each an FMA chain, folded as
// _mm512_reduce_add_ps; BF16 lanes take element pairs (vdpbf16ps: the odd one first). Else
// ggml_vec_dot_f32 / _f16 / _bf16: 64 chains per step of 64 columns (BF16: two registers of
// pairs), combined and folded, then the last columns one by one.
float fold16(float* a) {
  for (int c = 8; c >= 1; c /= 2)
    for (int i = 0; i < c; ++i) a[i] = a[i + c] + a[i];
  return a[0];
}
float ggml_float_dot(WeightType t, const float* w, const float* xin, int64_t cols, bool gemm) {
  std::vector<float> x(xin, xin + cols);
  for (float& v : x) {
    v = t == WeightType::F16 ? fp16_to_fp32(fp32_to_fp16(v)) : t == WeightType::BF16 ? bf16_to_fp32(fp32_to_bf16(v)) : v;
  }
  if (t == WeightType::BF16) {
    const int64_t step = gemm ? 32 : 64;
    float c[2][16] = {};
    const int64_t np = cols / step * step;
    for (int64_t i = 0; i < np; i += 2) {
      float& lane = c[gemm ? 0 : (i % 64) / 32][(i % 32) / 2];
      lane = std::fma(w[i], x[i], std::fma(w[i + 1], x[i + 1], lane));
    }
    if (gemm) return fold16(c[0]);
    double sum = fold16(c[0]);
    sum += fold16(c[1]);
    for (int64_t i = np; i < cols; ++i) sum += static_cast<double>(w[i] * x[i]);
    return static_cast<float>(sum);
  }
  if (gemm) {
    float c[16] = {};
    for (int64_t i = 0; i < cols; ++i) c[i % 16] = std::fma(w[i], x[i], c[i % 16]);
    return fold16(c);
  }
  const int64_t np = cols / 64 * 64;
  float c[64] = {}, l[16];
  for (int64_t i = 0; i < np; ++i) c[i % 64] = std::fma(w[i], x[i], c[i % 64]);
  for (int i = 0; i < 16; ++i) l[i] = (c[i] + c[32 + i]) + (c[16 + i] + c[48 + i]);
  float s = fold16(l);
  if (t == WeightType::F32) {
    for (int64_t i = np; i < cols; ++i) s = std::fma(w[i], x[i], s);
    return s;
  }
  double sum = s;
  for (int64_t i = np; i < cols; ++i) sum += static_cast<double>(w[i] * x[i]);
  return static_cast<float>(sum);
}

TEST(Matmul, FloatTypesMatchGgmlBitForBit) {
  uint32_t seed = 700;
  for (WeightType t : {WeightType::F32, WeightType::F16, WeightType::BF16}) {
    // GEMM shape; rows not a multiple of 4; cols not a multiple of the GEMM's step (a tail).
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{20, 128}, {21, 128}, {8, 100}}) {
      const auto w = random_weight(t, rows, cols, seed++);
      auto pw = prepare_cpu_weight({t, w.data(), rows, cols, row_bytes(t, cols)});
      ASSERT_TRUE(pw.ok());
      std::vector<float> wf(rows * cols);
      for (int64_t r = 0; r < rows; ++r) dequantize_row(t, w.data() + r * row_bytes(t, cols), wf.data() + r * cols, cols);
      for (int n_tokens : {1, 2, 5}) {
        const auto x = random_acts(n_tokens * cols, seed++);
        const bool gemm = n_tokens > 1 && cols % (t == WeightType::BF16 ? 32 : 16) == 0 && rows % 4 == 0;
        std::vector<float> want(n_tokens * rows);
        for (int tk = 0; tk < n_tokens; ++tk)
          for (int64_t r = 0; r < rows; ++r)
            want[tk * rows + r] = ggml_float_dot(t, wf.data() + r * cols, x.data() + tk * cols, cols, gemm);
        SCOPED_TRACE("type " + std::to_string(static_cast<int>(t)) + " " + std::to_string(rows) + "x" +
                     std::to_string(cols));
        for_each_config(
            **pw, x, n_tokens,
            [&](const std::vector<float>& y) {
              for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want[i]) << "output " << i;
            },
            /*fma_only=*/true);
      }
    }
  }
}

// All SIMD paths compute the same integer sums: they must agree with the portable one to
// float rounding, far tighter than the quantization tolerance above.
TEST(Matmul, SimdTargetsAgreeWithPortable) {
  for (WeightType t : {WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::Q8_0,
                       WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K}) {
    const int64_t rows = 40, cols = is_kquant(t) ? 512 : 320;
    const int n_tokens = 35;
    const auto w = random_weight(t, rows, cols, 77);
    const auto x = random_acts(n_tokens * cols, 78);
    auto pw = prepare_cpu_weight({t, w.data(), rows, cols, row_bytes(t, cols)});
    ASSERT_TRUE(pw.ok());
    std::vector<std::vector<float>> results;
    std::vector<std::string> names;
    test::for_each_simd_target([&](int64_t target) {
      ThreadPool pool(2);
      MatmulScratch scratch;
      std::vector<float> y(n_tokens * rows);
      matmul(**pw, x.data(), n_tokens, y.data(), pool, scratch);
      results.push_back(y);
      names.push_back(hwy::TargetName(target));
    });
    for (size_t k = 0; k + 1 < results.size(); ++k) {
      for (size_t i = 0; i < results[k].size(); ++i) {
        // K-quants add and subtract large per-superblock terms (scale and min), so FMA vs
        // separate rounding shows more there.
        const float rel = is_kquant(t) ? 1e-4f : 1e-5f;
        ASSERT_NEAR(results[k][i], results.back()[i], rel * (1.f + std::fabs(results.back()[i])))
            << names[k] << " vs " << names.back() << " type " << static_cast<int>(t) << " output " << i;
      }
    }
  }
}

TEST(Matmul, MultiEqualsSeparateCalls) {
  const int64_t cols = 256;
  const int n_tokens = 5;
  const WeightType types[3] = {WeightType::Q4_1, WeightType::Q8_0, WeightType::Q6_K};
  const int64_t rows[3] = {48, 20, 33};
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<std::unique_ptr<CpuWeight>> ws;
  for (int i = 0; i < 3; ++i) {
    bytes.push_back(random_weight(types[i], rows[i], cols, 100 + i));
    auto pw = prepare_cpu_weight({types[i], bytes.back().data(), rows[i], cols, row_bytes(types[i], cols)});
    ASSERT_TRUE(pw.ok());
    ws.push_back(std::move(pw).value());
  }
  const auto x = random_acts(20 * cols, 9);
  for (int n : {1, n_tokens, 20}) {
    ThreadPool pool(2);
    MatmulScratch scratch;
    std::vector<std::vector<float>> multi(3), single(3);
    float* ys[3];
    const CpuWeight* wp[3];
    for (int i = 0; i < 3; ++i) {
      multi[i].assign(n * rows[i], 0.f);
      single[i].assign(n * rows[i], 0.f);
      ys[i] = multi[i].data();
      wp[i] = ws[i].get();
      matmul(*ws[i], x.data(), n, single[i].data(), pool, scratch);
    }
    matmul_multi(wp, ys, 3, x.data(), n, pool, scratch);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(multi[i], single[i]) << i;
  }
}

TEST(GetRows, MatchesDequantizeRowForEveryType) {
  for (WeightType t : {WeightType::F32, WeightType::F16, WeightType::BF16, WeightType::Q4_0, WeightType::Q4_1,
                       WeightType::Q5_0, WeightType::Q5_1, WeightType::Q8_0, WeightType::Q4_K, WeightType::Q5_K,
                       WeightType::Q6_K}) {
    const int64_t rows = 35, cols = 512;
    const auto w = random_weight(t, rows, cols, 5);
    const WeightRef ref{t, w.data(), rows, cols, row_bytes(t, cols)};
    auto pw = prepare_cpu_weight(ref);
    ASSERT_TRUE(pw.ok());
    const int32_t ids[4] = {34, 0, 17, 34};
    std::vector<float> a(4 * cols), b(4 * cols), expect(cols);
    get_rows(ref, ids, 4, a.data());
    get_rows(**pw, ids, 4, b.data());
    for (int i = 0; i < 4; ++i) {
      dequantize_row(t, w.data() + ids[i] * ref.row_bytes, expect.data(), cols);
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(a[i * cols + c], expect[c]) << static_cast<int>(t);
        ASSERT_EQ(b[i * cols + c], expect[c]) << static_cast<int>(t);
      }
    }
  }
}

TEST(PrepareCpuWeight, RejectsBadWeights) {
  std::vector<uint8_t> w(1024);
  EXPECT_EQ(prepare_cpu_weight({static_cast<WeightType>(10), w.data(), 2, 32, 64}).status().code(), Code::unsupported);
  EXPECT_EQ(prepare_cpu_weight({WeightType::Q4_0, w.data(), 2, 48, 36}).status().code(), Code::invalid_argument);
  EXPECT_EQ(prepare_cpu_weight({WeightType::Q4_0, nullptr, 2, 32, 18}).status().code(), Code::invalid_argument);
  EXPECT_EQ(prepare_cpu_weight({WeightType::Q4_0, w.data(), 2, 32, 10}).status().code(), Code::invalid_argument);
  EXPECT_EQ(prepare_cpu_weight({WeightType::Q4_0, w.data() + 1, 2, 32, 18}).status().code(), Code::invalid_argument);
  EXPECT_EQ(prepare_cpu_weight({WeightType::Q4_K, w.data(), 1, 128, 72}).status().code(), Code::invalid_argument);
  EXPECT_TRUE(prepare_cpu_weight({WeightType::Q4_0, w.data(), 2, 32, 18}).ok());
}

}  // namespace
}  // namespace llmsvc::hal::cpu
