// SPDX-License-Identifier: Apache-2.0
// Reordering a layer's units in a GGUF's bytes (FFN neurons: gate and up rows, down's columns;
// query heads: Q's rows, O's columns, q's bias) in whole quantization blocks, so every block
// moves intact (nothing is re-quantized) and the full model computes the same function. One
// tensor at a time streams out (into GgufWriter), so a model is never held twice in memory.
#pragma once

#include <span>

#include "base/status.h"
#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/gguf/gguf_writer.h"

namespace llmsvc::elastify {

// Checks that `order` permutes the units of `unit` rows (permute_rows) or columns
// (permute_cols: `unit` a multiple of the type's block; a 1-D tensor is one row) of `t`;
// Code::invalid_argument naming the tensor otherwise.
Status check_row_order(const gguf::TensorInfo& t, std::span<const int> order, int unit);
Status check_col_order(const gguf::TensorInfo& t, std::span<const int> order, int unit);

// The bytes of `t` with unit k of the result being unit order[k] of `t`, to `sink`.
Status permute_rows(const gguf::TensorInfo& t, std::span<const int> order, int unit, const gguf::GgufWriter::Sink& sink);
Status permute_cols(const gguf::TensorInfo& t, std::span<const int> order, int unit, const gguf::GgufWriter::Sink& sink);

}  // namespace llmsvc::elastify
