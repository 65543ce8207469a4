// SPDX-License-Identifier: Apache-2.0
// Linear cost models of bringing KV chunks back (LLMS's swap-recompute planner input):
// recomputing tokens from their ids, and loading chunk files, each as seconds per layer
// so the two can be overlapped layer by layer. `llmsvc profile` measures them on the
// device and writes a profile (JSON); without one, safe defaults are used.
#pragma once

#include <string>

#include "base/status.h"

namespace llmsvc::policy {

struct SwitchCost {
  // Recompute of n tokens, per layer, attending to a context of m positions:
  //   rc_fixed_s + n * (rc_token_s + m * rc_token_ctx_s)
  double rc_fixed_s = 2e-4;
  double rc_token_s = 4e-5;
  double rc_token_ctx_s = 2e-8;
  // Loading one layer of k chunk files totalling b bytes (one batch of reads, decoded):
  //   io_fixed_s + k * io_chunk_s + b * io_byte_s
  double io_fixed_s = 1e-4;
  double io_chunk_s = 5e-5;
  double io_byte_s = 1.0 / 200e6;  // 200 MB/s: a slow eMMC, so loading is not over-trusted
  // Where the numbers come from: "defaults", or the profile's device description.
  std::string source = "defaults";

  double recompute_s(int n_tokens, int context_tokens) const {
    return n_tokens <= 0 ? 0.0 : rc_fixed_s + n_tokens * (rc_token_s + context_tokens * rc_token_ctx_s);
  }
  double load_s(int n_chunks, double bytes) const {
    return n_chunks <= 0 ? 0.0 : io_fixed_s + n_chunks * io_chunk_s + bytes * io_byte_s;
  }
};

// JSON text of a profile, and back. parse rejects missing, negative or non-finite fields
// (Code::invalid_argument naming the field).
std::string switch_cost_to_json(const SwitchCost& cost);
Result<SwitchCost> switch_cost_from_json(const std::string& text);

// The profile at `path`; the defaults (source "defaults") when the file does not exist;
// an unreadable or invalid file is an error the caller may log and replace by defaults.
Result<SwitchCost> load_switch_cost(const std::string& path);

}  // namespace llmsvc::policy
