// SPDX-License-Identifier: Apache-2.0
// GgufFile: a validated, memory-mapped GGUF (v2/v3) model file: metadata + tensor table.
//
// Every count, length, offset and dimension is checked (overflow-safe) against the
// file size and the Limits before use; any violation is Code::model_invalid with a
// message naming the field. Tensor data is mmap'ed read-only and shared by the page cache.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/core/gguf/gguf_types.h"

namespace llmsvc::gguf {

namespace detail {
class Parser;  // the bounds-checked reader behind parse (gguf_file.cpp)
}  // namespace detail

struct Limits {
  uint64_t max_string_bytes = 1u << 20;        // one metadata string
  uint64_t max_array_elems = 1u << 24;         // one metadata array
  uint64_t max_kv_count = 1u << 16;
  uint64_t max_tensor_count = 1u << 16;
  uint64_t max_tensor_elems = uint64_t{1} << 40;
  uint32_t max_dims = 4;                       // at most 4 (the size of TensorInfo::ne)
  uint64_t max_name_bytes = 1u << 16;          // one metadata key or tensor name
  uint32_t max_array_depth = 4;                // arrays of arrays nest at most this deep
  uint32_t max_alignment = 1u << 16;           // general.alignment upper bound
};

// A metadata value. Scalars are widened (unsigned and bool -> u, signed -> i, floats -> f);
// `type` keeps the stored type. Arrays keep their element type and hold elements in
// the vector of the matching kind: strings in `strs`; f32/f64 in `floats`; every integer
// type and bool in `ints` (as int64); unsigned types and bool also in `uints`, exact. A u64
// array holding a value above INT64_MAX leaves `ints` empty (only `uints` can represent
// it), so get_int_array refuses it. Nested arrays are held in `arr`.
struct Value {
  ValueType type = ValueType::u8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  ValueType elem_type = ValueType::u8;  // arrays only
  std::vector<std::string> strs;
  std::vector<int64_t> ints;
  std::vector<uint64_t> uints;
  std::vector<double> floats;
  std::vector<Value> arr;               // arrays of arrays
  uint64_t array_size = 0;              // arrays only
};

struct TensorInfo {
  std::string name;
  TensorType type = TensorType::F32;
  uint32_t n_dims = 0;
  std::array<uint64_t, 4> ne{1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension
  uint64_t offset = 0;                     // from the start of the data section
  uint64_t n_elems = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;           // inside the mapping
};

// "{ne0, ne1, ...}": a tensor's shape as messages name it.
std::string shape_text(const TensorInfo& t);

class GgufFile {
 public:
  // Maps and validates `path`. Missing file: Code::model_not_found; malformed: model_invalid.
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path, const Limits& limits = {});
  // Validates an in-memory image (not copied: must outlive the result). For fuzzing and tests.
  static Result<std::unique_ptr<GgufFile>> from_memory(std::span<const uint8_t> bytes, const Limits& limits = {});

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t file_size() const { return size_; }
  uint32_t alignment() const { return alignment_; }
  const std::string& path() const { return path_; }
  // The whole file image (mapped or in memory).
  std::span<const uint8_t> bytes() const { return {base_, static_cast<size_t>(size_)}; }

  const std::map<std::string, Value, std::less<>>& metadata() const { return kv_; }
  // The metadata keys in file order (views of metadata()'s keys): how a copy keeps the order.
  const std::vector<std::string_view>& metadata_order() const { return kv_order_; }
  const Value* find(std::string_view key) const;
  // Typed getters: nullopt when absent or of an incompatible type (ints of any width are
  // accepted by get_uint/get_int when the value fits; f32/f64 by get_float).
  std::optional<std::string_view> get_string(std::string_view key) const;
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  // Arrays: nullptr when absent or of another element kind.
  const std::vector<std::string>* get_string_array(std::string_view key) const;
  const std::vector<double>* get_float_array(std::string_view key) const;
  const std::vector<int64_t>* get_int_array(std::string_view key) const;  // any signed or unsigned ints

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // Drops the pages of a tensor's bytes from this process's memory (they are read back
  // from the file if touched again). For tensors a device has copied; no-op unless mapped.
  void release_pages(const TensorInfo& t) const;
  // Tells the kernel a tensor is read a few rows at a time (the embedding table): no
  // readahead, and no huge mapping, so touching a row maps that row's pages and not the 2 MiB
  // around it (file systems with large folios map whole folios). No-op unless mapped.
  void advise_sparse(const TensorInfo& t) const;
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  Status parse(const Limits& limits);
  // The steps of parse, in file order (gguf_file.cpp says what each checks).
  Status parse_header(detail::Parser& p, const Limits& limits, uint64_t* tensor_count, uint64_t* kv_count);
  Status parse_metadata(detail::Parser& p, const Limits& limits, uint64_t kv_count);
  Status read_alignment(const Limits& limits);
  Status parse_tensor_infos(detail::Parser& p, const Limits& limits, uint64_t tensor_count);
  Status place_tensor_data(uint64_t header_end);

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  std::map<std::string, Value, std::less<>> kv_;
  std::vector<std::string_view> kv_order_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace llmsvc::gguf
