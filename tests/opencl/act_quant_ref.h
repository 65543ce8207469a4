// SPDX-License-Identifier: Apache-2.0
// The CPU's quantization of a matmul's input (hal/cpu/quant/act_quant.h), read back as floats
// q * d: what the OpenCL device's quantize_input and fused quantized outputs must give.
#pragma once

#include <cstdint>
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

}  // namespace llmsvc::hal::opencl
