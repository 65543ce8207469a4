// SPDX-License-Identifier: Apache-2.0
// Moving whole units of a GGUF-typed matrix: units of rows, or units of columns in whole
// quantization blocks, so every block moves intact and nothing is re-quantized. Elastify
// reorders a file's units this way; Model lays an elastic model's query heads out rank-major.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "hal/device.h"

namespace llmsvc {

// Whether `order` is a permutation of [0, n).
bool is_permutation(std::span<const int> order, int64_t n);

// The bytes of `w` with unit k of the result being unit order[k] of `w`: units of `unit`
// rows, or of `unit` columns (a multiple of the type's block, applied to every row).
// Code::invalid_argument when the units do not tile `w` or `order` is not a permutation.
Result<std::vector<uint8_t>> permuted_rows(const hal::WeightRef& w, std::span<const int> order, int64_t unit);
Result<std::vector<uint8_t>> permuted_cols(const hal::WeightRef& w, std::span<const int> order, int64_t unit);

}  // namespace llmsvc
