// SPDX-License-Identifier: Apache-2.0
// Reordering a layer's FFN neurons in a GGUF's bytes: gate and up rows, and down's columns in
// whole quantization blocks, so every block moves intact (nothing is re-quantized) and the
// full model computes the same function. The bytes stream out a piece at a time (into
// GgufWriter), so a model is never held twice in memory.
#pragma once

#include <span>

#include "base/status.h"
#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/gguf/gguf_writer.h"

namespace llmsvc::elastify {

// Checks that `order` permutes the units of `unit` rows (permute_rows) or columns
// (permute_cols: `unit` a multiple of the type's block) of `t`; Code::invalid_argument naming
// the tensor otherwise.
Status check_row_order(const gguf::TensorInfo& t, std::span<const int> order, int unit);
Status check_col_order(const gguf::TensorInfo& t, std::span<const int> order, int unit);

// The bytes of `t` with unit k of the result being unit order[k] of `t`, to `sink`.
Status permute_rows(const gguf::TensorInfo& t, std::span<const int> order, int unit, const gguf::GgufWriter::Sink& sink);
Status permute_cols(const gguf::TensorInfo& t, std::span<const int> order, int unit, const gguf::GgufWriter::Sink& sink);

}  // namespace llmsvc::elastify
