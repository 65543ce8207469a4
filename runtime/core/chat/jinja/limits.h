// SPDX-License-Identifier: Apache-2.0
// Bounds on compiling and rendering an untrusted template: each violation is an error
// naming the limit, never a crash, a hang or unbounded memory.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llmsvc::jinja {

struct Limits {
  size_t max_template_bytes = 1u << 20;   // source size
  uint32_t max_nesting = 96;              // parser: nested expressions and blocks
  size_t max_output_bytes = 16u << 20;    // rendered text, and any one string built
  size_t max_list_items = 1u << 20;       // any one list built (range, repetition, +)
  uint32_t max_value_depth = 128;         // nesting of lists / dicts (JSON input included)
  uint32_t max_call_depth = 64;           // nested macro calls
  uint64_t max_loop_iterations = 1u << 20;  // for-loop iterations in one render, all loops
  // Work in one render: bytes and items produced by every operation, plus iterations.
  // Bounds the time a hostile template can take (e.g. a loop building huge strings).
  uint64_t max_work = 1ull << 30;
};

}  // namespace llmsvc::jinja
