// SPDX-License-Identifier: Apache-2.0
// The repacking of GGUF weights for the OpenCL kernels.
//
// Layouts (kernels/matmul.cl decodes them; every row is contiguous, so the items of a work-group
// read consecutive bytes of a row):
//   F32  -> f32 rows;  F16 -> f16 rows (vload_half);  BF16 -> bf16 rows, widened by a 16-bit
//           shift in the kernel (exact, half the bytes of f32). Rows are zero-padded to a
//           multiple of 8 elements (kp) so every kernel reads whole groups of 8.
//   Q4_0 -> 4-bit codes, 16 bytes per 32 elements, + an f16 d per 32 (4.5 bits a weight, as the
//           file: decode reads no more bytes than llama.cpp does).
//   Q4_1 -> the same codes + an f16 (d, m) pair per 32 (5 bits).
//   Q4_K -> the same codes, its nibbles reordered into Q4_0's order (byte j: elements j and
//           j + 16 of a 32-element sub-block), + the 6-bit (sc, mn) pair as two bytes per 32
//           + the f16 (d, dmin) pair per 256 (4.625 bits). The kernel forms d * sc and
//           dmin * mn in f32 exactly as the CPU does (both products are exact).
//   Q5_0, Q5_1, Q8_0, Q5_K, Q6_K -> int8 codes in element order + an f32 scale per group
//           (and an f32 min for Q5_1 / Q5_K): Q5_0 q - 16 with d; Q5_1 q with d, m; Q8_0 q with d;
//           Q5_K q with d * sc and -(dmin * mn) per 32; Q6_K q - 32 with d * sc per 16 (computed
//           here in f32 as the CPU computes it). Their 5- and 6-bit codes split over two arrays
//           would save bytes but cost a bit-gather per element; these types are not the
//           decode-critical ones, so the simpler byte codes win (8.5-10 bits a weight).
//   E0M4 (an option, LLMSVC_CL_E0M4=1 or ClMatmul::create's e0m4): Q4_0 / Q4_1 / Q4_K
//           requantized into Transformer-Lite's E0M4: a group of 128 weights takes the 16 levels
//           of one binade's 4-bit mantissa, d * q + m, so a weight dequantizes by two bit
//           operations (the nibble shifted into the mantissa of 1.0f, GEMV_MAGIC) and one FMA;
//           the same codes as Q4_0's layout + an f16 (d, m) pair per 128 (4.25 bits). A lossy
//           repack of the file's 4-bit weights (fit_e0m4): its perplexity change is measured.
#include "hal/opencl/cl_weight_pack.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hal/host/dequantize.h"
#include "hal/host/fp16.h"
#include "hal/weight_blocks.h"

namespace llmsvc::hal::opencl {
namespace {

using Packed = PackedWeight;

template <class T>
void put(std::vector<uint8_t>& v, size_t index, T value) {
  std::memcpy(v.data() + index * sizeof(T), &value, sizeof(T));
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Rows copied with a stride of kp elements (the padding stays zero).
Packed pack_float(const WeightRef& w, const uint8_t* src, size_t src_stride, Layout layout, size_t elem) {
  Packed p;
  p.layout = layout;
  p.kp = static_cast<uint32_t>((w.cols + 7) / 8 * 8);
  p.part[0].assign(static_cast<size_t>(w.rows) * p.kp * elem, 0);
  for (int64_t r = 0; r < w.rows; ++r)
    std::memcpy(p.part[0].data() + static_cast<size_t>(r) * p.kp * elem, src + r * src_stride,
                static_cast<size_t>(w.cols) * elem);
  return p;
}

// Q4_0 / Q4_1: the file's nibble order is the layout's; scales move to their own array.
template <class Block>
Packed pack_q4(const WeightRef& w, const uint8_t* src, size_t src_stride, Layout layout) {
  const size_t nb = static_cast<size_t>(w.cols) / kQK, n = static_cast<size_t>(w.rows) * nb;
  constexpr bool has_min = sizeof(Block) == sizeof(BlockQ4_1);
  Packed p;
  p.layout = layout;
  p.part[0].resize(n * 16);
  p.part[1].resize(n * (has_min ? 4 : 2));
  for (int64_t r = 0; r < w.rows; ++r) {
    const auto* b = reinterpret_cast<const Block*>(src + r * src_stride);
    for (size_t i = 0; i < nb; ++i) {
      const size_t k = static_cast<size_t>(r) * nb + i;
      std::memcpy(p.part[0].data() + k * 16, b[i].qs, 16);
      if constexpr (has_min) {
        put<uint32_t>(p.part[1], k, static_cast<uint32_t>(b[i].d) | static_cast<uint32_t>(b[i].m) << 16);
      } else {
        put<uint16_t>(p.part[1], k, b[i].d);
      }
    }
  }
  return p;
}

Packed pack_q4_k(const WeightRef& w, const uint8_t* src, size_t src_stride) {
  const size_t nsb = static_cast<size_t>(w.cols) / kQK_K, nb = nsb * 8;
  Packed p;
  p.layout = kQ4_K;
  p.part[0].resize(static_cast<size_t>(w.rows) * nb * 16);
  p.part[1].resize(static_cast<size_t>(w.rows) * nb * 2);
  p.part[2].resize(static_cast<size_t>(w.rows) * nsb * 4);
  for (int64_t r = 0; r < w.rows; ++r) {
    const auto* b = reinterpret_cast<const BlockQ4_K*>(src + r * src_stride);
    for (size_t s = 0; s < nsb; ++s) {
      put<uint32_t>(p.part[2], static_cast<size_t>(r) * nsb + s,
                    static_cast<uint32_t>(b[s].d) | static_cast<uint32_t>(b[s].dmin) << 16);
      for (int j = 0; j < 8; ++j) {
        // Sub-block j is the low (j even) or high nibbles of the file's bytes 32 (j / 2) ...
        const uint8_t* q = b[s].qs + 32 * (j / 2);
        const int shift = (j & 1) * 4;
        const size_t k = static_cast<size_t>(r) * nb + s * 8 + j;
        uint8_t* out = p.part[0].data() + k * 16;
        for (int l = 0; l < 16; ++l)
          out[l] = static_cast<uint8_t>(((q[l] >> shift) & 0xF) | (((q[l + 16] >> shift) & 0xF) << 4));
        uint8_t sc, mn;
        k_scale_min(j, b[s].scales, &sc, &mn);
        p.part[1][k * 2] = sc;
        p.part[1][k * 2 + 1] = mn;
      }
    }
  }
  return p;
}

// The int8 layouts: `row` fills one row's codes, scales and mins (the latter unused for kI8).
struct I8Row {
  int8_t* q;
  float* scale;
  float* min;
};

template <class Fill>
Packed pack_i8(const WeightRef& w, const uint8_t* src, size_t src_stride, bool has_min, uint32_t gs, Fill fill) {
  const size_t cols = static_cast<size_t>(w.cols), groups = cols >> gs;
  Packed p;
  p.layout = has_min ? kI8M : kI8;
  p.gs = gs;
  p.part[0].resize(static_cast<size_t>(w.rows) * cols);
  p.part[1].resize(static_cast<size_t>(w.rows) * groups * 4);
  if (has_min) p.part[2].resize(p.part[1].size());
  std::vector<float> scale(groups), min(groups);
  for (int64_t r = 0; r < w.rows; ++r) {
    const size_t rr = static_cast<size_t>(r);
    fill(src + r * src_stride, I8Row{reinterpret_cast<int8_t*>(p.part[0].data() + rr * cols), scale.data(), min.data()});
    std::memcpy(p.part[1].data() + rr * groups * 4, scale.data(), groups * 4);
    if (has_min) std::memcpy(p.part[2].data() + rr * groups * 4, min.data(), groups * 4);
  }
  return p;
}

// One E0M4 group: the 16 levels d * q + m span the group's range (its extremes kept, as f16
// rounds them), each weight to the nearest. A fit of least squared error (the range clipped a
// few steps at either end, (d, m) refitted to the codes) lost more perplexity on SmolLM2
// (+38.7 % against +27.3 %, PoCL, one window): the outliers it clips matter more.
struct E0M4Group {
  uint16_t d = 0, m = 0;
  uint8_t q[128] = {};
};

E0M4Group fit_e0m4(const float* x) {
  const auto [lo, hi] = std::minmax_element(x, x + 128);
  E0M4Group g;
  g.d = fp32_to_fp16((*hi - *lo) / 15.0f);
  g.m = fp32_to_fp16(*lo);
  const float d = fp16_to_fp32(g.d), m = fp16_to_fp32(g.m);
  for (int e = 0; e < 128; ++e)
    g.q[e] = static_cast<uint8_t>(d > 0 ? std::clamp(std::nearbyint((x[e] - m) / d), 0.0f, 15.0f) : 0.0f);
  return g;
}

// E0M4 (see the top): each group of 128 by fit_e0m4; codes in Q4_0's nibble order.
Packed pack_e0m4(const WeightRef& w, const uint8_t* src, size_t src_stride) {
  const size_t cols = static_cast<size_t>(w.cols), nb = cols / kQK, ng = cols / 128;
  Packed p;
  p.layout = kE0M4;
  p.part[0].assign(static_cast<size_t>(w.rows) * nb * 16, 0);
  p.part[1].resize(static_cast<size_t>(w.rows) * ng * 4);
  std::vector<float> f(cols);
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.type, src + r * src_stride, f.data(), w.cols);
    for (size_t g = 0; g < ng; ++g) {
      const E0M4Group fit = fit_e0m4(f.data() + g * 128);
      put<uint32_t>(p.part[1], static_cast<size_t>(r) * ng + g, static_cast<uint32_t>(fit.d) | static_cast<uint32_t>(fit.m) << 16);
      for (size_t e = 0; e < 128; ++e) {
        const size_t c = g * 128 + e, blk = static_cast<size_t>(r) * nb + c / kQK, j = c % kQK;
        p.part[0][blk * 16 + j % 16] |= static_cast<uint8_t>(fit.q[e] << (j < 16 ? 0 : 4));
      }
    }
  }
  return p;
}

// The 5-bit code j of a Q5_0 / Q5_1 block (as the CPU's dequantization assembles it).
uint8_t q5_code(const uint8_t* qs, uint32_t qh, int j) {
  if (j < kQK / 2) return static_cast<uint8_t>((qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10));
  const int i = j - kQK / 2;
  return static_cast<uint8_t>((qs[i] >> 4) | ((qh >> (i + 12)) & 0x10));
}

Packed pack(const WeightRef& w) {
  const auto* src = static_cast<const uint8_t*>(w.data);
  const size_t stride = w.row_bytes ? w.row_bytes : row_bytes(w.type, w.cols);
  const int64_t nb = w.cols / kQK;
  switch (w.type) {
    case WeightType::F32: return pack_float(w, src, stride, kF32, 4);
    case WeightType::F16: return pack_float(w, src, stride, kF16, 2);
    case WeightType::BF16: return pack_float(w, src, stride, kBF16, 2);
    case WeightType::Q4_0: return pack_q4<BlockQ4_0>(w, src, stride, kQ4_0);
    case WeightType::Q4_1: return pack_q4<BlockQ4_1>(w, src, stride, kQ4_1);
    case WeightType::Q4_K: return pack_q4_k(w, src, stride);
    case WeightType::Q5_0:
      return pack_i8(w, src, stride, false, 5, [nb](const uint8_t* row, I8Row out) {
        const auto* b = reinterpret_cast<const BlockQ5_0*>(row);
        for (int64_t i = 0; i < nb; ++i) {
          out.scale[i] = fp16_to_fp32(b[i].d);
          const uint32_t qh = load_u32(b[i].qh);
          for (int j = 0; j < kQK; ++j) out.q[i * kQK + j] = static_cast<int8_t>(q5_code(b[i].qs, qh, j) - 16);
        }
      });
    case WeightType::Q5_1:
      return pack_i8(w, src, stride, true, 5, [nb](const uint8_t* row, I8Row out) {
        const auto* b = reinterpret_cast<const BlockQ5_1*>(row);
        for (int64_t i = 0; i < nb; ++i) {
          out.scale[i] = fp16_to_fp32(b[i].d);
          out.min[i] = fp16_to_fp32(b[i].m);
          const uint32_t qh = load_u32(b[i].qh);
          for (int j = 0; j < kQK; ++j) out.q[i * kQK + j] = static_cast<int8_t>(q5_code(b[i].qs, qh, j));
        }
      });
    case WeightType::Q8_0:
      return pack_i8(w, src, stride, false, 5, [nb](const uint8_t* row, I8Row out) {
        const auto* b = reinterpret_cast<const BlockQ8_0*>(row);
        for (int64_t i = 0; i < nb; ++i) {
          out.scale[i] = fp16_to_fp32(b[i].d);
          std::memcpy(out.q + i * kQK, b[i].qs, kQK);
        }
      });
    case WeightType::Q5_K:
      return pack_i8(w, src, stride, true, 5, [n = w.cols / kQK_K](const uint8_t* row, I8Row out) {
        const auto* b = reinterpret_cast<const BlockQ5_K*>(row);
        for (int64_t s = 0; s < n; ++s) {
          const float d = fp16_to_fp32(b[s].d), dmin = fp16_to_fp32(b[s].dmin);
          for (int j = 0; j < 8; ++j) {
            uint8_t sc, mn;
            k_scale_min(j, b[s].scales, &sc, &mn);
            out.scale[s * 8 + j] = d * sc;
            out.min[s * 8 + j] = -(dmin * mn);  // x - m == x + (-m) exactly
            // Sub-block j: nibbles of bytes 32 (j / 2) .., fifth bit j of qh.
            const uint8_t* ql = b[s].qs + 32 * (j / 2);
            for (int l = 0; l < 32; ++l) {
              const int q = ((ql[l] >> ((j & 1) * 4)) & 0xF) + ((b[s].qh[l] >> j) & 1) * 16;
              out.q[s * kQK_K + j * 32 + l] = static_cast<int8_t>(q);
            }
          }
        }
      });
    case WeightType::Q6_K:
      return pack_i8(w, src, stride, false, 4, [n = w.cols / kQK_K](const uint8_t* row, I8Row out) {
        const auto* b = reinterpret_cast<const BlockQ6_K*>(row);
        for (int64_t s = 0; s < n; ++s) {
          const float d = fp16_to_fp32(b[s].d);
          for (int j = 0; j < 16; ++j) out.scale[s * 16 + j] = d * static_cast<float>(b[s].scales[j]);
          int8_t* y = out.q + s * kQK_K;
          // 128-element halves: ql 64 bytes, qh 32 bytes each.
          for (int h = 0; h < 2; ++h, y += 128) {
            const uint8_t* ql = b[s].ql + 64 * h;
            const uint8_t* qh = b[s].qh + 32 * h;
            for (int l = 0; l < 32; ++l) {
              y[l] = static_cast<int8_t>(((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
              y[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
              y[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
              y[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
          }
        }
      });
  }
  return {};
}

}  // namespace

PackedWeight pack_weight(const WeightRef& w) { return pack(w); }

PackedWeight pack_e0m4(const WeightRef& w) {
  return pack_e0m4(w, static_cast<const uint8_t*>(w.data), w.row_bytes ? w.row_bytes : row_bytes(w.type, w.cols));
}

}  // namespace llmsvc::hal::opencl
