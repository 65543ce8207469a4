// SPDX-License-Identifier: Apache-2.0
// Scalar reference dequantization of every supported weight type (mirrors ggml's *_ref code).
#include "hal/host/dequantize.h"

#include <cstring>

#include "hal/weight_blocks.h"
#include "hal/host/fp16.h"

namespace llmsvc::hal {
namespace {

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian hosts only (x86, Arm LE), as GGUF is little-endian
}

void dq_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 0x0F) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dq_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(b[i].qs[j] & 0x0F) * d + m;
      y[j + kQK / 2] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

void dq_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    const uint32_t qh = load_u32(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = static_cast<int>((qh >> j) << 4) & 0x10;
      const int h1 = static_cast<int>(qh >> (j + 12)) & 0x10;
      y[j] = static_cast<float>(((b[i].qs[j] & 0x0F) | h0) - 16) * d;
      y[j + kQK / 2] = static_cast<float>(((b[i].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

void dq_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
    const uint32_t qh = load_u32(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = static_cast<int>((qh >> j) << 4) & 0x10;
      const int h1 = static_cast<int>(qh >> (j + 12)) & 0x10;
      y[j] = static_cast<float>((b[i].qs[j] & 0x0F) | h0) * d + m;
      y[j + kQK / 2] = static_cast<float>((b[i].qs[j] >> 4) | h1) * d + m;
    }
  }
}

void dq_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

// The scales and mins of a K-quant's sub-blocks is and is + 1 (64 elements): d * sc, dmin * mn.
struct KPair {
  float d1, m1, d2, m2;
};
KPair k_pair(int is, const uint8_t* scales, float d, float dmin) {
  uint8_t sc, mn;
  KPair k;
  k_scale_min(is, scales, &sc, &mn);
  k.d1 = d * sc, k.m1 = dmin * mn;
  k_scale_min(is + 1, scales, &sc, &mn);
  k.d2 = d * sc, k.m2 = dmin * mn;
  return k;
}

void dq_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int j = 0, is = 0; j < kQK_K; j += 64, is += 2, q += 32) {
      const KPair k = k_pair(is, b[i].scales, d, dmin);
      const float d1 = k.d1, m1 = k.m1, d2 = k.d2, m2 = k.m2;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void dq_q5_k(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
    const uint8_t* ql = b[i].qs;
    const uint8_t* qh = b[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < kQK_K; j += 64, is += 2, ql += 32) {
      const KPair k = k_pair(is, b[i].scales, d, dmin);
      const float d1 = k.d1, m1 = k.m1, d2 = k.d2, m2 = k.m2;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      u1 = static_cast<uint8_t>(u1 << 2);
      u2 = static_cast<uint8_t>(u2 << 2);
    }
  }
}

void dq_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int n = 0; n < kQK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace

void dequantize_row(WeightType type, const void* src, float* dst, int64_t n) {
  const int64_t nb = n / block_elems(type);
  switch (type) {
    case WeightType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case WeightType::F16: fp16_to_fp32_row(static_cast<const uint16_t*>(src), dst, n); return;
    case WeightType::BF16: bf16_to_fp32_row(static_cast<const uint16_t*>(src), dst, n); return;
    case WeightType::Q4_0: dq_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb); return;
    case WeightType::Q4_1: dq_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb); return;
    case WeightType::Q5_0: dq_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb); return;
    case WeightType::Q5_1: dq_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb); return;
    case WeightType::Q8_0: dq_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb); return;
    case WeightType::Q4_K: dq_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb); return;
    case WeightType::Q5_K: dq_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb); return;
    case WeightType::Q6_K: dq_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb); return;
  }
}

}  // namespace llmsvc::hal
