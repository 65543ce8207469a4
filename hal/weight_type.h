// SPDX-License-Identifier: Apache-2.0
// WeightType: the GGML element types the HAL can compute with, numbered as in GGUF.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llmsvc::hal {

enum class WeightType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8,
  Q4_K = 12, Q5_K = 13, Q6_K = 14, BF16 = 30,
};

// True for the types above; false for any other GGUF type number.
bool is_supported_weight_type(uint32_t ggml_type);
// Elements per block and bytes per block.
int64_t block_elems(WeightType t);
size_t block_bytes(WeightType t);
// "Q4_K", ...; "?" for a number outside the enum.
const char* weight_type_name(WeightType t);
// Bytes of a row of `cols` elements (cols must be a multiple of block_elems).
inline size_t row_bytes(WeightType t, int64_t cols) { return static_cast<size_t>(cols / block_elems(t)) * block_bytes(t); }

}  // namespace llmsvc::hal
