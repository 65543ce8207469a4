// SPDX-License-Identifier: Apache-2.0
// A tensor's units moved (runtime/core/model/unit_permute.h), checked against its GGUF entry.
#include "tools/elastify/ffn_permute.h"

#include <string>

#include "hal/weight_type.h"
#include "runtime/core/model/unit_permute.h"

namespace llmsvc::elastify {
namespace {

Status bad(const gguf::TensorInfo& t, const std::string& what) {
  return Status(Code::invalid_argument, "permute '" + t.name + "': " + what);
}

// The tensor as a matrix: a 1-D tensor (a bias) is one row.
hal::WeightRef matrix_of(const gguf::TensorInfo& t) {
  const auto type = static_cast<hal::WeightType>(t.type);
  const int64_t cols = static_cast<int64_t>(t.ne[0]), rows = t.n_dims == 1 ? 1 : static_cast<int64_t>(t.ne[1]);
  return {type, t.data, rows, cols, hal::row_bytes(type, cols)};
}

Status emit(Result<std::vector<uint8_t>> bytes, const gguf::TensorInfo& t, const gguf::GgufWriter::Sink& sink) {
  if (!bytes.ok()) return bad(t, bytes.status().message());
  return sink(*bytes);
}

}  // namespace

Status check_row_order(const gguf::TensorInfo& t, std::span<const int> order, int unit) {
  if (t.n_dims != 2 || unit <= 0 || t.ne[1] % static_cast<uint64_t>(unit) != 0) return bad(t, "not 2-D in whole units of rows");
  if (!is_permutation(order, static_cast<int64_t>(t.ne[1]) / unit)) return bad(t, "the order is not a permutation of its units");
  return Status::Ok();
}

Status check_col_order(const gguf::TensorInfo& t, std::span<const int> order, int unit) {
  if (t.n_dims < 1 || t.n_dims > 2 || unit <= 0 || !hal::is_supported_weight_type(static_cast<uint32_t>(t.type)))
    return bad(t, "not a weight");
  const int64_t block = hal::block_elems(static_cast<hal::WeightType>(t.type)), cols = static_cast<int64_t>(t.ne[0]);
  if (unit % block != 0 || cols % unit != 0)
    return bad(t, "a unit of " + std::to_string(unit) + " columns splits its blocks of " + std::to_string(block));
  if (!is_permutation(order, cols / unit)) return bad(t, "the order is not a permutation of its units");
  return Status::Ok();
}

Status permute_rows(const gguf::TensorInfo& t, std::span<const int> order, int unit, const gguf::GgufWriter::Sink& sink) {
  LLMSVC_RETURN_IF_ERROR(check_row_order(t, order, unit));
  return emit(permuted_rows(matrix_of(t), order, unit), t, sink);
}

Status permute_cols(const gguf::TensorInfo& t, std::span<const int> order, int unit, const gguf::GgufWriter::Sink& sink) {
  LLMSVC_RETURN_IF_ERROR(check_col_order(t, order, unit));
  return emit(permuted_cols(matrix_of(t), order, unit), t, sink);
}

}  // namespace llmsvc::elastify
