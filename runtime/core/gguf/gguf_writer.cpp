// SPDX-License-Identifier: Apache-2.0
// GgufWriter: the checks when keys and tensors are added, the layout, and the atomic write.
#include "runtime/core/gguf/gguf_writer.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <limits>
#include <optional>
#include <utility>

#include "base/file_io.h"
#include "runtime/core/gguf/gguf_encoder.h"

namespace llmsvc::gguf {

namespace {

constexpr uint32_t kVersion = 3;
constexpr std::string_view kAlignmentKey = "general.alignment";

Status bad(const std::string& msg) { return Status(Code::invalid_argument, "gguf: " + msg); }
std::string type_name(ValueType t) { return std::string(value_type_name(static_cast<uint32_t>(t))); }

uint64_t uint_max(ValueType t) {
  switch (t) {
    case ValueType::boolean: return 1;
    case ValueType::u8: return std::numeric_limits<uint8_t>::max();
    case ValueType::u16: return std::numeric_limits<uint16_t>::max();
    case ValueType::u32: return std::numeric_limits<uint32_t>::max();
    default: return std::numeric_limits<uint64_t>::max();
  }
}

bool int_fits(ValueType t, int64_t v) {
  switch (t) {
    case ValueType::i8: return v >= std::numeric_limits<int8_t>::min() && v <= std::numeric_limits<int8_t>::max();
    case ValueType::i16: return v >= std::numeric_limits<int16_t>::min() && v <= std::numeric_limits<int16_t>::max();
    case ValueType::i32: return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
    default: return true;
  }
}

// Why an integer element or scalar of type `t` cannot be written ("" when it can).
std::string int_problem(ValueType t, uint64_t u, int64_t i) {
  if ((is_unsigned_int(t) || t == ValueType::boolean) && u > uint_max(t)) {
    return "value " + std::to_string(u) + " does not fit " + type_name(t);
  }
  if (is_signed_int(t) && !int_fits(t, i)) return "value " + std::to_string(i) + " does not fit " + type_name(t);
  return "";
}

std::string string_problem(const std::string& s, const Limits& lim) {
  if (s.size() <= lim.max_string_bytes) return "";
  return "a string of " + std::to_string(s.size()) + " bytes exceeds the limit " + std::to_string(lim.max_string_bytes);
}

// Why `v` cannot be written as it is ("" when it can); `level` counts the arrays around it.
std::string value_problem(const Value& v, uint32_t level, const Limits& lim) {
  if (!is_value_type(static_cast<uint32_t>(v.type))) return "invalid value type " + std::to_string(static_cast<uint32_t>(v.type));
  if (v.type == ValueType::string) return string_problem(v.s, lim);
  if (v.type != ValueType::array) {
    // The field the type uses is the only one set (what the *_value functions and the reader do).
    const bool uses_u = is_unsigned_int(v.type) || v.type == ValueType::boolean;
    if ((!uses_u && v.u != 0) || (!is_signed_int(v.type) && v.i != 0) || (!is_float(v.type) && v.f != 0)) {
      return "value of type " + type_name(v.type) + " held in another type's field (make it with the matching *_value)";
    }
    return int_problem(v.type, v.u, v.i);
  }
  if (level + 1 > lim.max_array_depth) return "arrays nested deeper than " + std::to_string(lim.max_array_depth);
  const ValueType et = v.elem_type;
  if (!is_value_type(static_cast<uint32_t>(et))) return "invalid array element type " + std::to_string(static_cast<uint32_t>(et));
  const size_t n = et == ValueType::string  ? v.strs.size()
                   : et == ValueType::array ? v.arr.size()
                   : is_float(et)           ? v.floats.size()
                   : is_signed_int(et)      ? v.ints.size()
                                            : v.uints.size();
  if (n != v.array_size) {
    return "an array of " + type_name(et) + " holding " + std::to_string(n) + " elements where array_size says " + std::to_string(v.array_size);
  }
  if (n > lim.max_array_elems) return "array length " + std::to_string(n) + " exceeds the limit " + std::to_string(lim.max_array_elems);
  std::string p;
  for (size_t k = 0; k < n && p.empty(); ++k) {
    if (et == ValueType::string) {
      p = string_problem(v.strs[k], lim);
    } else if (et == ValueType::array) {
      p = v.arr[k].type != ValueType::array ? "element " + std::to_string(k) + " of an array of arrays is not an array"
                                            : value_problem(v.arr[k], level + 1, lim);
    } else if (is_signed_int(et)) {
      p = int_problem(et, 0, v.ints[k]);
    } else if (!is_float(et)) {
      p = int_problem(et, v.uints[k], 0);
    }
  }
  return p;
}

// An integer value as GgufFile::get_uint reads it.
std::optional<uint64_t> as_uint(const Value& v) {
  if (is_unsigned_int(v.type)) return v.u;
  if (is_signed_int(v.type) && v.i >= 0) return static_cast<uint64_t>(v.i);
  return std::nullopt;
}

std::string shape_text(TensorType type, const std::vector<uint64_t>& ne) {
  const TypeTraits* tt = type_traits(static_cast<uint32_t>(type));
  std::string s = tt ? std::string(tt->name) : "type " + std::to_string(static_cast<uint32_t>(type));
  for (size_t d = 0; d < ne.size(); ++d) s += (d == 0 ? " [" : ", ") + std::to_string(ne[d]);
  return s + "]";
}

uint64_t padding(uint64_t size, uint64_t align) { return (align - size % align) % align; }

Status write_zeros(const GgufWriter::Sink& out, uint64_t n) {
  static constexpr std::array<uint8_t, 4096> kZeros{};
  while (n > 0) {
    const size_t piece = static_cast<size_t>(std::min<uint64_t>(n, kZeros.size()));
    LLMSVC_RETURN_IF_ERROR(out(std::span<const uint8_t>(kZeros.data(), piece)));
    n -= piece;
  }
  return Status::Ok();
}

// Gathers small pieces (padding, a source's rows) into large writes to a file.
class FileOut {
 public:
  FileOut(int fd, std::string what) : fd_(fd), what_(std::move(what)) { buf_.reserve(kCapacity); }

  Status put(std::span<const uint8_t> piece) {
    if (buf_.size() + piece.size() > kCapacity) LLMSVC_RETURN_IF_ERROR(flush());
    if (piece.size() >= kCapacity) return write(piece);
    buf_.insert(buf_.end(), piece.begin(), piece.end());
    return Status::Ok();
  }
  Status flush() {
    Status s = write(buf_);
    buf_.clear();
    return s;
  }
  // Whether a write failed (its Status already names the file and the cause).
  bool failed() const { return failed_; }

 private:
  static constexpr size_t kCapacity = size_t{1} << 20;

  Status write(std::span<const uint8_t> bytes) {
    Status s = fileio::write_all(fd_, bytes, what_);
    failed_ = failed_ || !s.ok();
    return s;
  }

  int fd_;
  std::string what_;
  std::vector<uint8_t> buf_;
  bool failed_{};
};

// Erases the entry named `name` from `entries` and renumbers `index`; false when none is.
template <class Entries, class NameOf>
bool erase_named(Entries& entries, std::map<std::string, size_t, std::less<>>& index, std::string_view name,
                 NameOf name_of) {
  const auto it = index.find(name);
  if (it == index.end()) return false;
  entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(it->second));
  index.clear();
  for (size_t k = 0; k < entries.size(); ++k) index.emplace(name_of(entries[k]), k);
  return true;
}

}  // namespace

// ---- values

Value uint_value(ValueType t, uint64_t v) {
  Value x;
  x.type = t;
  x.u = v;
  return x;
}

Value int_value(ValueType t, int64_t v) {
  Value x;
  x.type = t;
  x.i = v;
  return x;
}

Value float_value(ValueType t, double v) {
  Value x;
  x.type = t;
  x.f = t == ValueType::f32 ? static_cast<float>(v) : v;
  return x;
}

Value bool_value(bool v) { return uint_value(ValueType::boolean, v ? 1 : 0); }

Value string_value(std::string v) {
  Value x;
  x.type = ValueType::string;
  x.s = std::move(v);
  return x;
}

namespace {
Value array_of(ValueType elem, size_t n) {
  Value x;
  x.type = ValueType::array;
  x.elem_type = elem;
  x.array_size = n;
  return x;
}
}  // namespace

Value uint_array(ValueType elem, std::vector<uint64_t> v) {
  Value x = array_of(elem, v.size());
  // As the reader: also in `ints` when every element fits.
  if (std::all_of(v.begin(), v.end(), [](uint64_t e) { return e <= uint64_t{std::numeric_limits<int64_t>::max()}; })) {
    x.ints.assign(v.begin(), v.end());
  }
  x.uints = std::move(v);
  return x;
}

Value int_array(ValueType elem, std::vector<int64_t> v) {
  Value x = array_of(elem, v.size());
  x.ints = std::move(v);
  return x;
}

Value float_array(ValueType elem, std::vector<double> v) {
  Value x = array_of(elem, v.size());
  if (elem == ValueType::f32) {
    for (double& e : v) e = static_cast<float>(e);
  }
  x.floats = std::move(v);
  return x;
}

Value string_array(std::vector<std::string> v) {
  Value x = array_of(ValueType::string, v.size());
  x.strs = std::move(v);
  return x;
}

Value array_array(std::vector<Value> arrays) {
  Value x = array_of(ValueType::array, arrays.size());
  x.arr = std::move(arrays);
  return x;
}

// ---- metadata

Result<GgufWriter> GgufWriter::from_file(const GgufFile& src) {
  GgufWriter w;
  for (std::string_view key : src.metadata_order()) LLMSVC_RETURN_IF_ERROR(w.set(key, *src.find(key)));
  return w;
}

Status GgufWriter::set(std::string_view key, Value v) {
  const Limits lim;
  if (key.empty()) return bad("metadata: empty key");
  const std::string where = "key '" + std::string(key) + "'";
  if (key.size() > lim.max_name_bytes) {
    return bad(where.substr(0, 64) + "...: " + std::to_string(key.size()) + " bytes exceed the limit " + std::to_string(lim.max_name_bytes));
  }
  if (const std::string p = value_problem(v, 0, lim); !p.empty()) return bad(where + ": " + p);
  if (key == kAlignmentKey) {
    const std::optional<uint64_t> a = as_uint(v);
    if (!a || *a == 0 || (*a & (*a - 1)) != 0 || *a > lim.max_alignment) {
      return bad(where + ": not an integer power of two in 1.." + std::to_string(lim.max_alignment));
    }
  }
  if (const auto it = key_index_.find(key); it != key_index_.end()) {
    kvs_[it->second].second = std::move(v);
    return Status::Ok();
  }
  if (kvs_.size() >= lim.max_kv_count) return bad(where + ": more than " + std::to_string(lim.max_kv_count) + " keys");
  key_index_.emplace(std::string(key), kvs_.size());
  kvs_.emplace_back(std::string(key), std::move(v));
  return Status::Ok();
}

bool GgufWriter::remove(std::string_view key) {
  return erase_named(kvs_, key_index_, key, [](const auto& kv) { return kv.first; });
}

const Value* GgufWriter::find(std::string_view key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &kvs_[it->second].second;
}

uint32_t GgufWriter::alignment() const {
  const Value* v = find(kAlignmentKey);
  return v ? static_cast<uint32_t>(*as_uint(*v)) : kGgufDefaultAlignment;  // set() checked it
}

// ---- tensors

Status GgufWriter::check_new_tensor(std::string_view name, TensorType type, const std::vector<uint64_t>& ne,
                                    uint64_t* n_bytes) const {
  const Limits lim;
  if (name.empty()) return bad("tensor: empty name");
  const std::string where = "tensor '" + std::string(name) + "'";
  if (name.size() > lim.max_name_bytes) {
    return bad(where.substr(0, 64) + "...: " + std::to_string(name.size()) + " bytes exceed the limit " + std::to_string(lim.max_name_bytes));
  }
  if (tensor_index_.find(name) != tensor_index_.end()) return bad(where + ": duplicate tensor name");
  if (tensors_.size() >= lim.max_tensor_count) return bad(where + ": more than " + std::to_string(lim.max_tensor_count) + " tensors");
  const Result<TensorSize> size = tensor_size(static_cast<uint32_t>(type), ne);
  if (!size.ok()) return bad(where + ": " + size.status().message());
  if (size->elems > lim.max_tensor_elems) {
    return bad(where + ": " + std::to_string(size->elems) + " elements exceed the limit " + std::to_string(lim.max_tensor_elems));
  }
  *n_bytes = size->bytes;
  return Status::Ok();
}

namespace {
Status check_bytes(std::string_view name, TensorType type, const std::vector<uint64_t>& ne, uint64_t n_bytes,
                   std::span<const uint8_t> bytes) {
  if (bytes.size() == n_bytes) return Status::Ok();
  return bad("tensor '" + std::string(name) + "': " + std::to_string(bytes.size()) + " bytes given, but " + shape_text(type, ne) +
             " takes " + std::to_string(n_bytes));
}
}  // namespace

Status GgufWriter::add_tensor(std::string_view name, TensorType type, const std::vector<uint64_t>& ne,
                              std::span<const uint8_t> bytes) {
  uint64_t n_bytes = 0;
  LLMSVC_RETURN_IF_ERROR(check_new_tensor(name, type, ne, &n_bytes));
  LLMSVC_RETURN_IF_ERROR(check_bytes(name, type, ne, n_bytes, bytes));
  tensor_index_.emplace(std::string(name), tensors_.size());
  tensors_.push_back({std::string(name), type, ne, n_bytes, bytes, {}});
  return Status::Ok();
}

Status GgufWriter::add_tensor(std::string_view name, TensorType type, const std::vector<uint64_t>& ne,
                              TensorSource source) {
  uint64_t n_bytes = 0;
  LLMSVC_RETURN_IF_ERROR(check_new_tensor(name, type, ne, &n_bytes));
  if (!source) return bad("tensor '" + std::string(name) + "': no source");
  tensor_index_.emplace(std::string(name), tensors_.size());
  tensors_.push_back({std::string(name), type, ne, n_bytes, {}, std::move(source)});
  return Status::Ok();
}

Status GgufWriter::add_tensors_from(const GgufFile& src) {
  for (const TensorInfo& t : src.tensors()) {
    const std::vector<uint64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    LLMSVC_RETURN_IF_ERROR(add_tensor(t.name, t.type, ne, std::span<const uint8_t>(t.data, t.n_bytes)));
  }
  return Status::Ok();
}

GgufWriter::Tensor* GgufWriter::find_tensor(std::string_view name) {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Status GgufWriter::set_tensor_data(std::string_view name, std::span<const uint8_t> bytes) {
  Tensor* t = find_tensor(name);
  if (t == nullptr) return bad("tensor '" + std::string(name) + "': no such tensor");
  LLMSVC_RETURN_IF_ERROR(check_bytes(name, t->type, t->ne, t->n_bytes, bytes));
  t->bytes = bytes;
  t->source = nullptr;
  return Status::Ok();
}

Status GgufWriter::set_tensor_data(std::string_view name, TensorSource source) {
  Tensor* t = find_tensor(name);
  if (t == nullptr) return bad("tensor '" + std::string(name) + "': no such tensor");
  if (!source) return bad("tensor '" + std::string(name) + "': no source");
  t->bytes = {};
  t->source = std::move(source);
  return Status::Ok();
}

bool GgufWriter::remove_tensor(std::string_view name) {
  return erase_named(tensors_, tensor_index_, name, [](const Tensor& t) { return t.name; });
}

// ---- output

Status GgufWriter::write_to(const Sink& out) const {
  const uint64_t align = alignment();
  Encoder head;
  head.header(kGgufMagic, kVersion, tensors_.size(), kvs_.size());
  for (const auto& [key, value] : kvs_) head.kv(key, value);
  uint64_t offset = 0;  // each tensor at the next multiple of the alignment in the data section
  for (const Tensor& t : tensors_) {
    head.tensor_info(t.name, t.ne, static_cast<uint32_t>(t.type), offset);
    offset += t.n_bytes + padding(t.n_bytes, align);
  }
  LLMSVC_RETURN_IF_ERROR(out(head.data()));
  LLMSVC_RETURN_IF_ERROR(write_zeros(out, padding(head.size(), align)));
  for (const Tensor& t : tensors_) {
    LLMSVC_RETURN_IF_ERROR(write_tensor(t, out));
    LLMSVC_RETURN_IF_ERROR(write_zeros(out, padding(t.n_bytes, align)));
  }
  return Status::Ok();
}

Status GgufWriter::write_tensor(const Tensor& t, const Sink& out) const {
  if (!t.source) return out(t.bytes);
  const std::string where = "tensor '" + t.name + "'";
  uint64_t given = 0;
  Status out_error;  // the output's own failure, or too many bytes: returned as it is
  const Sink counted = [&](std::span<const uint8_t> piece) -> Status {
    Status s = piece.size() > t.n_bytes - given
                   ? bad(where + ": its source gave more than the " + std::to_string(t.n_bytes) + " bytes of " + shape_text(t.type, t.ne))
                   : out(piece);
    if (s.ok()) {
      given += piece.size();
    } else if (out_error.ok()) {
      out_error = s;
    }
    return s;
  };
  const Status s = t.source(counted);
  if (!out_error.ok()) return out_error;
  if (!s.ok()) return Status(s.code(), where + ": " + s.message());
  if (given != t.n_bytes) {
    return bad(where + ": its source gave " + std::to_string(given) + " of the " + std::to_string(t.n_bytes) + " bytes of " +
               shape_text(t.type, t.ne));
  }
  return Status::Ok();
}

Status GgufWriter::write(const std::string& path) const {
  const std::string what = "write " + path;
  const auto fill = [&](int fd) {
    FileOut file(fd, what);
    Status s = write_to([&](std::span<const uint8_t> piece) { return file.put(piece); });
    if (s.ok()) s = file.flush();
    if (!s.ok() && !file.failed()) s = Status(s.code(), what + ": " + s.message());
    return s;
  };
  return fileio::write_atomic(path, fill, 0644);
}

Result<std::vector<uint8_t>> GgufWriter::to_bytes() const {
  std::vector<uint8_t> image;
  LLMSVC_RETURN_IF_ERROR(write_to([&](std::span<const uint8_t> piece) {
    image.insert(image.end(), piece.begin(), piece.end());
    return Status::Ok();
  }));
  return image;
}

}  // namespace llmsvc::gguf
