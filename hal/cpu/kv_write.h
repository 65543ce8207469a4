// SPDX-License-Identifier: Apache-2.0
// Writing new K/V rows into a chunk of the f16 KV cache, in place (no staging copy).
#pragma once

#include <cstddef>
#include <cstdint>

#include "hal/host/fp16.h"

namespace llmsvc::hal::cpu {

// Converts n_tokens consecutive token rows of K or V (each row_elems = n_head_kv * head_dim
// floats, as the projection writes them) to f16 into token slots [slot, slot + n_tokens) of
// a chunk laid out [token][kv_head][head_dim]. Rounds to nearest even like ggml.
inline void kv_write(const float* src, int n_tokens, int row_elems, uint16_t* chunk, int slot) {
  const size_t stride = static_cast<size_t>(row_elems);
  fp32_to_fp16_row(src, chunk + static_cast<size_t>(slot) * stride, static_cast<int64_t>(n_tokens) * row_elems);
}

}  // namespace llmsvc::hal::cpu
