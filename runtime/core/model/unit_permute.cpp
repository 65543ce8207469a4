// SPDX-License-Identifier: Apache-2.0
// Row units and column-block units of a typed matrix, moved.
#include "runtime/core/model/unit_permute.h"

#include <algorithm>
#include <string>

#include "hal/weight_type.h"

namespace llmsvc {

bool is_permutation(std::span<const int> order, int64_t n) {
  if (static_cast<int64_t>(order.size()) != n) return false;
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int u : order) {
    if (u < 0 || u >= n || seen[u]) return false;
    seen[u] = true;
  }
  return true;
}

Result<std::vector<uint8_t>> permuted_rows(const hal::WeightRef& w, std::span<const int> order, int64_t unit) {
  if (unit <= 0 || w.rows % unit != 0) return Status(Code::invalid_argument, "permute: not whole units of rows");
  if (!is_permutation(order, w.rows / unit)) return Status(Code::invalid_argument, "permute: not a permutation of the row units");
  const size_t unit_bytes = w.row_bytes * static_cast<size_t>(unit);
  const auto* src = static_cast<const uint8_t*>(w.data);
  std::vector<uint8_t> out(unit_bytes * order.size());
  for (size_t k = 0; k < order.size(); ++k) std::copy_n(src + order[k] * unit_bytes, unit_bytes, out.data() + k * unit_bytes);
  return out;
}

Result<std::vector<uint8_t>> permuted_cols(const hal::WeightRef& w, std::span<const int> order, int64_t unit) {
  const int64_t block = hal::block_elems(w.type);
  if (unit <= 0 || unit % block != 0 || w.cols % unit != 0)
    return Status(Code::invalid_argument, "permute: a unit of " + std::to_string(unit) + " columns splits blocks of " +
                                              std::to_string(block));
  if (!is_permutation(order, w.cols / unit)) return Status(Code::invalid_argument, "permute: not a permutation of the column units");
  const size_t unit_bytes = hal::row_bytes(w.type, unit), row_bytes = hal::row_bytes(w.type, w.cols);
  const auto* src = static_cast<const uint8_t*>(w.data);
  std::vector<uint8_t> out(row_bytes * static_cast<size_t>(w.rows));
  for (int64_t r = 0; r < w.rows; ++r) {
    const uint8_t* row = src + static_cast<size_t>(r) * w.row_bytes;
    uint8_t* dst = out.data() + static_cast<size_t>(r) * row_bytes;
    for (size_t k = 0; k < order.size(); ++k) std::copy_n(row + order[k] * unit_bytes, unit_bytes, dst + k * unit_bytes);
  }
  return out;
}

}  // namespace llmsvc
