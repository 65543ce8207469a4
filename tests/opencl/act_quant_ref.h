// SPDX-License-Identifier: Apache-2.0
// The CPU's quantization of a matmul's input (hal/cpu/quant/act_quant.h), read back as floats
// q * d: what the OpenCL device's quantize_input and fused quantized outputs must give.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "hal/cpu/quant/act_quant.h"
#include "hal/opencl/cl_matmul.h"

namespace llmsvc::hal::opencl {

// x (n rows of cols) as the CPU's matmul of a `type` weight sees it: quantized (hal/cpu's
// act_quant) and read back as q * d; x itself for the float types.
inline std::vector<float> cpu_quantized(ClMatmul::ActQuant mode, const std::vector<float>& x, int n, int64_t cols) {
  std::vector<float> out(x);
  switch (mode) {
    case ClMatmul::ActQuant::none: break;
    case ClMatmul::ActQuant::q8_32: {
      const int64_t nb = cols / 32;
      std::vector<int8_t> q(static_cast<size_t>(cols));
      std::vector<float> d(static_cast<size_t>(nb)), s(d.size());
      std::vector<int32_t> bias(d.size() * 8);
      for (int t = 0; t < n; ++t) {
        cpu::quantize_q8_ref(x.data() + t * cols, q.data(), d.data(), s.data(), bias.data(), cols, 0);
        for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(t * cols + c)] = q[static_cast<size_t>(c)] * d[static_cast<size_t>(c / 32)];
      }
      break;
    }
    case ClMatmul::ActQuant::q8_256: {
      std::vector<uint8_t> mem(cpu::ActQ8K::bytes(cols, n) + 64);
      void* p = mem.data() + (64 - reinterpret_cast<uintptr_t>(mem.data()) % 64) % 64;
      const cpu::ActQ8K a = cpu::ActQ8K::in(p, cols, n);
      cpu::quantize_q8k(x.data(), a, 0, n);
      for (int t = 0; t < n; ++t)
        for (int64_t c = 0; c < cols; ++c)
          out[static_cast<size_t>(t * cols + c)] = a.q[a.index(t, c / 32) * 32 + c % 32] * a.d[a.index_sb(t, c / 256)];
      break;
    }
  }
  return out;
}

inline std::vector<float> cpu_quantized(WeightType type, const std::vector<float>& x, int n, int64_t cols) {
  return cpu_quantized(ClMatmul::act_quant(type), x, n, cols);
}

// The int8 form of a quantized input (ClMatmul::quantize_input_q8; bytes: all of it, n rows of
// cols) read back as the floats q * d the float form holds, into *out. False where a block's
// two half sums are not the sums of its codes.
inline bool q8_form_floats(const std::vector<uint8_t>& bytes, int n, int64_t cols, std::vector<float>* out) {
  const size_t at = ClMatmul::q8_params_offset(n, cols), nb = static_cast<size_t>(cols / 32);
  out->assign(static_cast<size_t>(n * cols), 0.0f);
  for (size_t b = 0; b < static_cast<size_t>(n) * nb; ++b) {
    float d;
    uint32_t sums;
    std::memcpy(&d, &bytes[at + 8 * b], 4);
    std::memcpy(&sums, &bytes[at + 8 * b + 4], 4);
    int half[2] = {0, 0};
    for (size_t e = 0; e < 32; ++e) {
      const auto q = static_cast<int8_t>(bytes[32 * b + e]);
      half[e / 16] += q;
      (*out)[32 * b + e] = static_cast<float>(q) * d;
    }
    if (static_cast<int16_t>(sums & 0xFFFF) != half[0] || static_cast<int16_t>(sums >> 16) != half[1]) return false;
  }
  return true;
}

}  // namespace llmsvc::hal::opencl
