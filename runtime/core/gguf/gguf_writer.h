// SPDX-License-Identifier: Apache-2.0
// GgufWriter: writes a GGUF v3 file (metadata, tensor infos, aligned tensor data), atomically.
//
// Start empty or from a GgufFile (its metadata in file order, values as read), set, replace
// or remove keys, add tensors, write. Checks happen when a key is set or a tensor added, so
// that write() fails only for I/O, or a tensor source's error or wrong byte count:
//  - set: a non-empty key; a value made by the *_value functions below, or read by
//    GgufFile, whose integers fit its type, whose arrays hold as many elements as they say;
//    general.alignment an integer power of two. Code::invalid_argument naming the key.
//  - add_tensor: a new, non-empty name; a known type; 1..4 non-zero dimensions whose byte
//    size (tensor_size, the reader's rule) is the size of the bytes given. Code::invalid_argument
//    naming the tensor.
//  - both: nothing GgufFile::open refuses with its default Limits (lengths, counts, depth).
//
// Tensor bytes are not copied. A tensor's bytes are either a span the caller keeps alive and
// unchanged until write() returns (a GgufFile's mapping, a buffer), or a TensorSource that
// produces them during write(), a piece at a time (e.g. rows permuted from a mapped model),
// so a large model is never held twice in memory.
//
// Layout: the header; the metadata in order; the tensor infos in order; zeros to the
// alignment (general.alignment, else 32); each tensor's bytes in order, each at the next
// multiple of the alignment, followed by zeros to one (the last tensor too, as ggml does).
// The output is a function of the keys, values, tensors and bytes only: writing a file
// read back from this writer, unchanged, gives the same bytes.
//
// write() replaces the target atomically (fileio::write_atomic): a temporary file beside it,
// fdatasync, rename, directory fsync. Any failure (ENOSPC, EFBIG, EIO, a source's error)
// removes the temporary file, leaves the target as it was and returns a Status naming the
// path and the cause. The file is created 0644 less the umask: a model is not a secret.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/gguf/gguf_types.h"

namespace llmsvc::gguf {

// Metadata values of each stored type, filled as GgufFile fills what it reads.
Value uint_value(ValueType t, uint64_t v);                  // u8, u16, u32, u64
Value int_value(ValueType t, int64_t v);                    // i8, i16, i32, i64
Value float_value(ValueType t, double v);                   // f32 (rounded to float now), f64
Value bool_value(bool v);
Value string_value(std::string v);
Value uint_array(ValueType elem, std::vector<uint64_t> v);  // u8..u64, or boolean (0 and 1)
Value int_array(ValueType elem, std::vector<int64_t> v);    // i8..i64
Value float_array(ValueType elem, std::vector<double> v);   // f32 (each rounded), f64
Value string_array(std::vector<std::string> v);
Value array_array(std::vector<Value> arrays);               // each an array value

class GgufWriter {
 public:
  // Takes the next piece of the output (the file, or a tensor's bytes); on a failure, stop
  // and return it.
  using Sink = std::function<Status(std::span<const uint8_t> piece)>;
  // Produces a tensor's bytes during write(): calls `sink` with consecutive pieces, exactly
  // the tensor's byte size in all. Called once per write() or to_bytes().
  using TensorSource = std::function<Status(const Sink& sink)>;

  GgufWriter() = default;
  // Every metadata key of `src`, in file order, values as read; no tensors (see
  // add_tensors_from). Fails only for what the default Limits refuse (a file opened with
  // larger ones).
  static Result<GgufWriter> from_file(const GgufFile& src);

  // ---- metadata
  // Replaces the value of `key` where it stands, or appends it.
  Status set(std::string_view key, Value v);
  bool remove(std::string_view key);  // false when absent
  const Value* find(std::string_view key) const;
  size_t key_count() const { return kvs_.size(); }
  // general.alignment, or 32 when absent.
  uint32_t alignment() const;

  // ---- tensors (appended in order)
  Status add_tensor(std::string_view name, TensorType type, const std::vector<uint64_t>& ne,
                    std::span<const uint8_t> bytes);
  Status add_tensor(std::string_view name, TensorType type, const std::vector<uint64_t>& ne, TensorSource source);
  // Every tensor of `src`, in file order, its bytes viewed in src (which must outlive
  // write(); writing over src's own path is fine: its mapping keeps the old file).
  Status add_tensors_from(const GgufFile& src);
  // New bytes for a tensor already added (same type and dimensions, so the same size).
  Status set_tensor_data(std::string_view name, std::span<const uint8_t> bytes);
  Status set_tensor_data(std::string_view name, TensorSource source);
  bool remove_tensor(std::string_view name);  // false when absent
  size_t tensor_count() const { return tensors_.size(); }

  // ---- output
  // The file at `path`, replaced atomically (see above).
  Status write(const std::string& path) const;
  // The whole file image in memory (tests, small files).
  Result<std::vector<uint8_t>> to_bytes() const;
  // The whole file image, in order, to `out`: what write() and to_bytes() both use.
  Status write_to(const Sink& out) const;

 private:
  struct Tensor {
    std::string name;
    TensorType type{};
    std::vector<uint64_t> ne;
    uint64_t n_bytes{};
    std::span<const uint8_t> bytes;
    TensorSource source;  // when set, used instead of `bytes`
  };

  // Checks the shape and name of a new tensor; its byte size in *n_bytes.
  Status check_new_tensor(std::string_view name, TensorType type, const std::vector<uint64_t>& ne,
                          uint64_t* n_bytes) const;
  Tensor* find_tensor(std::string_view name);
  Status write_tensor(const Tensor& t, const Sink& out) const;

  std::vector<std::pair<std::string, Value>> kvs_;  // in file order
  std::map<std::string, size_t, std::less<>> key_index_;
  std::vector<Tensor> tensors_;  // in file order
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace llmsvc::gguf
