// SPDX-License-Identifier: Apache-2.0
// GGUF weights repacked on the host into the layouts the OpenCL kernels read
// (kernels/matmul.cl decodes them; cl_weight_pack.cpp says which type becomes which and why).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "hal/device.h"

namespace llmsvc::hal::opencl {

// The layouts, numbered as kernels/matmul.cl's L_* and named as its kernels' suffixes.
enum Layout : int { kF32, kF16, kBF16, kQ4_0, kQ4_1, kQ4_K, kI8, kI8M, kE0M4, kLayouts };

// The 4-bit layouts, which share their own GEMV.
constexpr bool is_q4(Layout l) { return l == kQ4_0 || l == kQ4_1 || l == kQ4_K || l == kE0M4; }
constexpr std::array<const char*, kLayouts> kLayoutNames = {"f32",  "f16", "bf16", "q4_0", "q4_1",
                                                            "q4_k", "i8",  "i8m",  "e0m4"};

// A weight repacked on the host, before its parts go to the device: codes, scales, scales or
// mins as the layout needs; kp the row stride of the float layouts (0: cols, the other layouts'
// stride), gs log2 of the elements per scale of the int8 layouts. Every part holds its rows one
// after another, the same bytes per row.
struct PackedWeight {
  Layout layout = kF32;
  uint32_t kp = 0, gs = 0;
  std::vector<uint8_t> part[3];
};

// w (a supported type: is_supported_weight_type) in its layout.
PackedWeight pack_weight(const WeightRef& w);
// A Q4_0 / Q4_1 / Q4_K weight requantized as E0M4 (rows a multiple of 128 wide; lossy).
PackedWeight pack_e0m4(const WeightRef& w);

}  // namespace llmsvc::hal::opencl
