// SPDX-License-Identifier: Apache-2.0
// The HAL's op kinds: what a graph node does, and what a device says it can run (a bit each).
#pragma once

#include <cstdint>
#include <string_view>

namespace llmsvc::hal {

enum class OpKind : uint8_t {
  get_rows,   // embedding rows of token ids
  rms_norm,   // rows normalized, optionally scaled
  matmul,     // one to three weights over one input (Q/K/V, gate/up fused)
  add_bias,   // per-row bias
  rope,       // rotary position embedding, in place
  scale,      // x *= s
  store_kv,   // new K/V rows into the context's KV chunks
  attention,  // causal attention over the KV chunks
  last_rows,  // the last O rows moved to the front (only the output rows go on)
  add,        // residual add, y += x
  swiglu,     // gate = silu(gate) * up
  geglu,      // gate = gelu(gate) * up
  copy,       // a transfer between memory spaces (placement inserts these)
  count_,
};

inline constexpr int kOpKinds = static_cast<int>(OpKind::count_);
inline constexpr uint32_t op_bit(OpKind k) { return 1u << static_cast<int>(k); }
inline constexpr uint32_t kAllOps = (1u << kOpKinds) - 1;

std::string_view op_name(OpKind k);

}  // namespace llmsvc::hal
