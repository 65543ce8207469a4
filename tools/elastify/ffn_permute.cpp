// SPDX-License-Identifier: Apache-2.0
// Byte moves of rows and of whole column blocks.
#include "tools/elastify/ffn_permute.h"

#include <algorithm>
#include <string>
#include <vector>

#include "hal/weight_type.h"

namespace llmsvc::elastify {
namespace {

// Whether `order` is a permutation of [0, n).
bool is_permutation(std::span<const int> order, int64_t n) {
  if (static_cast<int64_t>(order.size()) != n) return false;
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int u : order) {
    if (u < 0 || u >= n || seen[u]) return false;
    seen[u] = true;
  }
  return true;
}

Status bad(const gguf::TensorInfo& t, const std::string& what) {
  return Status(Code::invalid_argument, "permute '" + t.name + "': " + what);
}

}  // namespace

Status check_row_order(const gguf::TensorInfo& t, std::span<const int> order, int unit) {
  if (t.n_dims != 2 || unit <= 0 || t.ne[1] % static_cast<uint64_t>(unit) != 0) return bad(t, "not 2-D in whole units of rows");
  if (!is_permutation(order, static_cast<int64_t>(t.ne[1]) / unit)) return bad(t, "the order is not a permutation of its units");
  return Status::Ok();
}

Status check_col_order(const gguf::TensorInfo& t, std::span<const int> order, int unit) {
  if (t.n_dims != 2 || unit <= 0 || !hal::is_supported_weight_type(static_cast<uint32_t>(t.type))) return bad(t, "not a 2-D weight");
  const int64_t block = hal::block_elems(static_cast<hal::WeightType>(t.type)), cols = static_cast<int64_t>(t.ne[0]);
  if (unit % block != 0 || cols % unit != 0)
    return bad(t, "a unit of " + std::to_string(unit) + " columns splits its blocks of " + std::to_string(block));
  if (!is_permutation(order, cols / unit)) return bad(t, "the order is not a permutation of its units");
  return Status::Ok();
}

Status permute_rows(const gguf::TensorInfo& t, std::span<const int> order, int unit, const gguf::GgufWriter::Sink& sink) {
  LLMSVC_RETURN_IF_ERROR(check_row_order(t, order, unit));
  const size_t unit_bytes = t.n_bytes / t.ne[1] * unit;
  for (int u : order) LLMSVC_RETURN_IF_ERROR(sink({t.data + u * unit_bytes, unit_bytes}));
  return Status::Ok();
}

Status permute_cols(const gguf::TensorInfo& t, std::span<const int> order, int unit, const gguf::GgufWriter::Sink& sink) {
  LLMSVC_RETURN_IF_ERROR(check_col_order(t, order, unit));
  const auto type = static_cast<hal::WeightType>(t.type);
  const size_t row_bytes = hal::row_bytes(type, static_cast<int64_t>(t.ne[0])), unit_bytes = hal::row_bytes(type, unit);
  std::vector<uint8_t> row(row_bytes);
  for (uint64_t r = 0; r < t.ne[1]; ++r) {
    const uint8_t* src = t.data + r * row_bytes;
    for (size_t k = 0; k < order.size(); ++k)
      std::copy_n(src + order[k] * unit_bytes, unit_bytes, row.data() + k * unit_bytes);
    LLMSVC_RETURN_IF_ERROR(sink(row));
  }
  return Status::Ok();
}

}  // namespace llmsvc::elastify
