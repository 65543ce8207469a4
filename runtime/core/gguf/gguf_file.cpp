// SPDX-License-Identifier: Apache-2.0
// GGUF v2/v3 parsing and validation, read-only mapping, typed metadata access.
//
// Layout: magic "GGUF", u32 version, u64 tensor_count, u64 kv_count, the key/value pairs,
// the tensor infos, padding to general.alignment, then the data section that tensor
// offsets point into. The file is untrusted: every length is checked against both the
// Limits and the bytes left before anything is allocated or read.
#include "runtime/core/gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "runtime/core/gguf/gguf_cursor.h"

namespace llmsvc::gguf {

namespace {

// Smallest possible encodings, used to refuse counts the remaining bytes cannot hold.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;           // key length, type, a u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name len, n_dims, ne[0], type, offset

Status invalid(const std::string& msg) { return Status(Code::model_invalid, "gguf: " + msg); }

std::string num(uint64_t v) { return std::to_string(v); }

// A file-supplied name made safe for a log line: printable ASCII kept, the rest escaped,
// long names cut short.
std::string printable(std::string_view s) {
  constexpr size_t kMax = 96;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > kMax) out += "...";
  return out;
}

// Bytes one array element takes at least (exactly, for fixed-size types).
uint64_t min_elem_bytes(ValueType t) {
  switch (t) {
    case ValueType::u8: case ValueType::i8: case ValueType::boolean: return 1;
    case ValueType::u16: case ValueType::i16: return 2;
    case ValueType::u32: case ValueType::i32: case ValueType::f32: return 4;
    case ValueType::u64: case ValueType::i64: case ValueType::f64: return 8;
    case ValueType::string: return 8;  // the length prefix
    case ValueType::array: return 12;  // element type + count
  }
  return 1;
}

// Parser state over one image; every error message names where it was (`where`).
}  // namespace
namespace detail {

class Parser {
 public:
  Parser(const uint8_t* base, uint64_t size, const Limits& limits)
      : cur_(base, size), size_(size), limits_(limits) {}

  Cursor& cursor() { return cur_; }

  template <class T>
  Status read(T& out, const std::string& where, std::string_view field) {
    const uint64_t at = cur_.pos();
    if (!cur_.read(out)) {
      return invalid(where + ": truncated reading " + std::string(field) + " at offset " + num(at) +
                     " (file size " + num(size_) + ")");
    }
    return Status::Ok();
  }

  // A u64-length-prefixed string of at most `max` bytes.
  Status read_string(std::string& out, uint64_t max, const std::string& where, std::string_view field) {
    uint64_t len = 0;
    LLMSVC_RETURN_IF_ERROR(read(len, where, std::string(field) + " length"));
    if (len > max) {
      return invalid(where + ": " + std::string(field) + " length " + num(len) + " exceeds limit " + num(max));
    }
    std::string_view bytes;
    if (!cur_.read_bytes(len, bytes)) {
      return invalid(where + ": " + std::string(field) + " length " + num(len) + " exceeds the " +
                     num(cur_.remaining()) + " bytes left in the file");
    }
    out.assign(bytes);
    return Status::Ok();
  }

  Status read_value(uint32_t type_num, Value& v, uint32_t depth, const std::string& where) {
    if (!is_value_type(type_num)) {
      return invalid(where + ": invalid value type " + num(type_num));
    }
    v.type = static_cast<ValueType>(type_num);
    switch (v.type) {
      case ValueType::u8: return read_uint<uint8_t>(v.u, where);
      case ValueType::u16: return read_uint<uint16_t>(v.u, where);
      case ValueType::u32: return read_uint<uint32_t>(v.u, where);
      case ValueType::u64: return read_uint<uint64_t>(v.u, where);
      case ValueType::i8: return read_int<int8_t>(v.i, where);
      case ValueType::i16: return read_int<int16_t>(v.i, where);
      case ValueType::i32: return read_int<int32_t>(v.i, where);
      case ValueType::i64: return read_int<int64_t>(v.i, where);
      case ValueType::f32: {
        float f = 0;
        LLMSVC_RETURN_IF_ERROR(read(f, where, "f32 value"));
        v.f = f;
        return Status::Ok();
      }
      case ValueType::f64: return read(v.f, where, "f64 value");
      case ValueType::boolean: return read_bool(v.u, where);
      case ValueType::string: return read_string(v.s, limits_.max_string_bytes, where, "string");
      case ValueType::array: return read_array(v, depth + 1, where);
    }
    return invalid(where + ": invalid value type " + num(type_num));
  }

 private:
  template <class T>
  Status read_uint(uint64_t& out, const std::string& where) {
    T x = 0;
    LLMSVC_RETURN_IF_ERROR(read(x, where, "integer value"));
    out = x;
    return Status::Ok();
  }
  template <class T>
  Status read_int(int64_t& out, const std::string& where) {
    T x = 0;
    LLMSVC_RETURN_IF_ERROR(read(x, where, "integer value"));
    out = x;
    return Status::Ok();
  }
  Status read_bool(uint64_t& out, const std::string& where) {
    uint8_t b = 0;
    LLMSVC_RETURN_IF_ERROR(read(b, where, "bool value"));
    if (b > 1) return invalid(where + ": bool value " + num(b) + " is neither 0 nor 1");
    out = b;
    return Status::Ok();
  }

  // `depth` counts array levels, 1 for an array of scalars.
  Status read_array(Value& v, uint32_t depth, const std::string& where) {
    if (depth > limits_.max_array_depth) {
      return invalid(where + ": arrays nested deeper than " + num(limits_.max_array_depth));
    }
    uint32_t et = 0;
    LLMSVC_RETURN_IF_ERROR(read(et, where, "array element type"));
    if (!is_value_type(et)) {
      return invalid(where + ": array element type " + num(et) + " is not a valid value type");
    }
    v.elem_type = static_cast<ValueType>(et);
    uint64_t n = 0;
    LLMSVC_RETURN_IF_ERROR(read(n, where, "array length"));
    if (n > limits_.max_array_elems) {
      return invalid(where + ": array length " + num(n) + " exceeds limit " + num(limits_.max_array_elems));
    }
    const uint64_t min_bytes = min_elem_bytes(v.elem_type);
    if (n > cur_.remaining() / min_bytes) {
      return invalid(where + ": array length " + num(n) + " of " + std::string(value_type_name(et)) +
                     " cannot fit in the " + num(cur_.remaining()) + " bytes left in the file");
    }
    v.array_size = n;
    // n is now bounded by the bytes left, so reserving cannot be made to over-allocate.
    const auto count = static_cast<size_t>(n);
    const ValueType t = v.elem_type;
    if (t == ValueType::string) {
      v.strs.resize(count);
      for (size_t k = 0; k < count; ++k) {
        LLMSVC_RETURN_IF_ERROR(read_string(v.strs[k], limits_.max_string_bytes, where, "array string"));
      }
    } else if (t == ValueType::array) {
      v.arr.resize(count);
      for (size_t k = 0; k < count; ++k) {
        v.arr[k].type = ValueType::array;
        LLMSVC_RETURN_IF_ERROR(read_array(v.arr[k], depth + 1, where));
      }
    } else if (is_float(t)) {
      v.floats.reserve(count);
      for (size_t k = 0; k < count; ++k) {
        Value e;
        LLMSVC_RETURN_IF_ERROR(read_value(et, e, depth, where));
        v.floats.push_back(e.f);
      }
    } else if (is_signed_int(t)) {
      v.ints.reserve(count);
      for (size_t k = 0; k < count; ++k) {
        Value e;
        LLMSVC_RETURN_IF_ERROR(read_value(et, e, depth, where));
        v.ints.push_back(e.i);
      }
    } else {  // unsigned ints and bool: exact in uints, and in ints while they fit
      v.uints.reserve(count);
      bool fits = true;
      for (size_t k = 0; k < count; ++k) {
        Value e;
        LLMSVC_RETURN_IF_ERROR(read_value(et, e, depth, where));
        v.uints.push_back(e.u);
        fits = fits && e.u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      }
      if (fits) v.ints.assign(v.uints.begin(), v.uints.end());
    }
    return Status::Ok();
  }

  Cursor cur_;
  uint64_t size_;
  const Limits& limits_;
};
}  // namespace detail
namespace {

// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path, const Limits& limits) {
  Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) {
    const int err = errno;
    const Code code = (err == ENOENT || err == ENOTDIR) ? Code::model_not_found : Code::io;
    return Status(code, "gguf: cannot open '" + path + "': " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) {
    return Status(Code::io, "gguf: cannot stat '" + path + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return invalid("'" + path + "' is not a regular file");
  if (st.st_size == 0) return invalid("'" + path + "' is empty");
  if (static_cast<uint64_t>(st.st_size) > std::numeric_limits<size_t>::max()) {
    return invalid("'" + path + "' is too large to map");
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (p == MAP_FAILED) {
    return Status(Code::io, "gguf: cannot map '" + path + "': " + std::strerror(errno));
  }
  // The constructor is private to force construction through open/from_memory.
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->base_ = static_cast<const uint8_t*>(p);
  f->size_ = size;
  f->mapped_ = true;  // from here the destructor unmaps
  LLMSVC_RETURN_IF_ERROR(f->parse(limits));
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::from_memory(std::span<const uint8_t> bytes, const Limits& limits) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = "<memory>";
  f->base_ = bytes.data();
  f->size_ = bytes.size();
  LLMSVC_RETURN_IF_ERROR(f->parse(limits));
  return f;
}

GgufFile::~GgufFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(base_), static_cast<size_t>(size_));
}

Status GgufFile::parse(const Limits& limits) {
  if (size_ == 0 || base_ == nullptr) return invalid("file is empty");
  detail::Parser p(base_, size_, limits);
  uint64_t tensor_count = 0, kv_count = 0;
  LLMSVC_RETURN_IF_ERROR(parse_header(p, limits, &tensor_count, &kv_count));
  LLMSVC_RETURN_IF_ERROR(parse_metadata(p, limits, kv_count));
  LLMSVC_RETURN_IF_ERROR(read_alignment(limits));
  LLMSVC_RETURN_IF_ERROR(parse_tensor_infos(p, limits, tensor_count));
  return place_tensor_data(p.cursor().pos());
}

// "GGUF", the version (2 or 3) and the two counts, each checked against the limits and
// against the bytes left (so a forged count cannot make the loops below run long).
Status GgufFile::parse_header(detail::Parser& p, const Limits& limits, uint64_t* tensor_count_out,
                              uint64_t* kv_count_out) {
  Cursor& cur = p.cursor();
  const std::string header = "header";

  uint32_t magic = 0;
  LLMSVC_RETURN_IF_ERROR(p.read(magic, header, "magic"));
  if (magic != kGgufMagic) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "header: bad magic 0x%08" PRIx32 " (expected \"GGUF\")", magic);
    return invalid(buf);
  }
  LLMSVC_RETURN_IF_ERROR(p.read(version_, header, "version"));
  if (version_ == 1) {
    return invalid("header: version 1 is not supported (GGUF v1 used 32-bit counts; re-convert the "
                   "model with a current llama.cpp)");
  }
  if (version_ != 2 && version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(version_);
    return invalid("header: unsupported version " + num(version_) + " (supported: 2, 3)" +
                   (swapped == 2 || swapped == 3 ? "; this looks like a big-endian file" : ""));
  }
  uint64_t& tensor_count = *tensor_count_out;
  uint64_t& kv_count = *kv_count_out;
  LLMSVC_RETURN_IF_ERROR(p.read(tensor_count, header, "tensor_count"));
  LLMSVC_RETURN_IF_ERROR(p.read(kv_count, header, "kv_count"));
  if (tensor_count > limits.max_tensor_count) {
    return invalid("header: tensor_count " + num(tensor_count) + " exceeds limit " + num(limits.max_tensor_count));
  }
  if (kv_count > limits.max_kv_count) {
    return invalid("header: kv_count " + num(kv_count) + " exceeds limit " + num(limits.max_kv_count));
  }
  if (kv_count > cur.remaining() / kMinKvBytes) {
    return invalid("header: kv_count " + num(kv_count) + " cannot fit in the " + num(cur.remaining()) +
                   " bytes left in the file");
  }
  if (tensor_count > cur.remaining() / kMinTensorInfoBytes) {
    return invalid("header: tensor_count " + num(tensor_count) + " cannot fit in the " +
                   num(cur.remaining()) + " bytes left in the file");
  }
  return Status::Ok();
}

// kv_count key/value pairs: non-empty, unique keys; values as read_value bounds them.
Status GgufFile::parse_metadata(detail::Parser& p, const Limits& limits, uint64_t kv_count) {
  for (uint64_t k = 0; k < kv_count; ++k) {
    std::string key;
    LLMSVC_RETURN_IF_ERROR(p.read_string(key, limits.max_name_bytes, "metadata #" + num(k), "key"));
    if (key.empty()) return invalid("metadata #" + num(k) + ": empty key");
    const std::string where = "key '" + printable(key) + "'";
    if (kv_.find(key) != kv_.end()) return invalid(where + ": duplicate key");
    uint32_t type = 0;
    LLMSVC_RETURN_IF_ERROR(p.read(type, where, "value type"));
    Value v;
    LLMSVC_RETURN_IF_ERROR(p.read_value(type, v, 0, where));
    const auto it = kv_.emplace(std::move(key), std::move(v)).first;
    kv_order_.push_back(it->first);  // map nodes do not move: the view stays valid
  }
  return Status::Ok();
}

// general.alignment when present: an unsigned power of two within the limit; else 32.
Status GgufFile::read_alignment(const Limits& limits) {
  alignment_ = kGgufDefaultAlignment;
  if (const Value* a = find("general.alignment")) {
    const std::optional<uint64_t> al = get_uint("general.alignment");
    if (!al) {
      return invalid("key 'general.alignment': type " + std::string(value_type_name(static_cast<uint32_t>(a->type))) +
                     " is not an unsigned integer");
    }
    if (*al == 0 || (*al & (*al - 1)) != 0 || *al > limits.max_alignment) {
      return invalid("key 'general.alignment': value " + num(*al) + " is not a power of two in 1.." +
                     num(limits.max_alignment));
    }
    alignment_ = static_cast<uint32_t>(*al);
  }
  return Status::Ok();
}

// tensor_count tensor infos: unique names, 1..max_dims dimensions, a type and dimensions
// tensor_size accepts, at most max_tensor_elems elements, an aligned offset.
Status GgufFile::parse_tensor_infos(detail::Parser& p, const Limits& limits, uint64_t tensor_count) {
  Cursor& cur = p.cursor();
  if (tensor_count > cur.remaining() / kMinTensorInfoBytes) {
    return invalid("header: tensor_count " + num(tensor_count) + " cannot fit in the " +
                   num(cur.remaining()) + " bytes left after the metadata");
  }
  const uint32_t max_dims = std::min<uint32_t>(limits.max_dims, 4);
  tensors_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t k = 0; k < tensor_count; ++k) {
    TensorInfo t;
    LLMSVC_RETURN_IF_ERROR(p.read_string(t.name, limits.max_name_bytes, "tensor #" + num(k), "name"));
    if (t.name.empty()) return invalid("tensor #" + num(k) + ": empty name");
    const std::string where = "tensor '" + printable(t.name) + "'";
    if (tensor_index_.find(t.name) != tensor_index_.end()) return invalid(where + ": duplicate tensor name");
    LLMSVC_RETURN_IF_ERROR(p.read(t.n_dims, where, "n_dims"));
    if (t.n_dims < 1 || t.n_dims > max_dims) {
      return invalid(where + ": n_dims " + num(t.n_dims) + " is outside 1.." + num(max_dims));
    }
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      LLMSVC_RETURN_IF_ERROR(p.read(t.ne[d], where, "ne[" + num(d) + "]"));
    }
    uint32_t type = 0;
    LLMSVC_RETURN_IF_ERROR(p.read(type, where, "type"));
    const Result<TensorSize> size = tensor_size(type, std::span<const uint64_t>(t.ne.data(), t.n_dims));
    if (!size.ok()) return invalid(where + ": " + size.status().message());
    if (size->elems > limits.max_tensor_elems) {
      return invalid(where + ": " + num(size->elems) + " elements exceed limit " + num(limits.max_tensor_elems));
    }
    t.type = static_cast<TensorType>(type);
    t.n_elems = size->elems;
    t.n_bytes = size->bytes;
    LLMSVC_RETURN_IF_ERROR(p.read(t.offset, where, "offset"));
    if (t.offset % alignment_ != 0) {
      return invalid(where + ": offset " + num(t.offset) + " is not a multiple of alignment " + num(alignment_));
    }
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }
  return Status::Ok();
}

// The data section after the infos (`header_end`), aligned: every tensor inside it, none
// overlapping another.
Status GgufFile::place_tensor_data(uint64_t header_end) {
  // Data section: starts at the next multiple of the alignment.
  const uint64_t pad = (alignment_ - header_end % alignment_) % alignment_;
  const uint64_t data_start = header_end + pad;  // pos <= size, pad < 2^32: no overflow
  if (tensors_.empty()) return Status::Ok();   // nothing points into the data section
  if (data_start > size_) {
    return invalid("data section: starts at offset " + num(data_start) + " past the end of the file (size " +
                   num(size_) + ")");
  }
  const uint64_t data_size = size_ - data_start;
  for (TensorInfo& t : tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      return invalid("tensor '" + printable(t.name) + "': offset " + num(t.offset) + " + size " + num(t.n_bytes) +
                     " exceeds the data section of " + num(data_size) + " bytes (file size " + num(size_) + ")");
    }
    t.data = base_ + data_start + t.offset;
  }
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const TensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const TensorInfo& prev = *by_offset[k - 1];
    const TensorInfo& t = *by_offset[k];
    if (t.offset < prev.offset + prev.n_bytes) {  // both ranges are inside the file: no overflow
      return invalid("tensor '" + printable(t.name) + "': data at offset " + num(t.offset) + " overlaps tensor '" +
                     printable(prev.name) + "' (offset " + num(prev.offset) + ", size " + num(prev.n_bytes) + ")");
    }
  }
  return Status::Ok();
}

const Value* GgufFile::find(std::string_view key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

std::optional<std::string_view> GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr || v->type != ValueType::string) return std::nullopt;
  return std::string_view(v->s);
}

std::optional<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (is_unsigned_int(v->type)) return v->u;
  if (is_signed_int(v->type) && v->i >= 0) return static_cast<uint64_t>(v->i);
  return std::nullopt;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (is_signed_int(v->type)) return v->i;
  if (is_unsigned_int(v->type) && v->u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(v->u);
  }
  return std::nullopt;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr || !is_float(v->type)) return std::nullopt;
  return v->f;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr || v->type != ValueType::boolean) return std::nullopt;
  return v->u != 0;
}

const std::vector<std::string>* GgufFile::get_string_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr || v->type != ValueType::array || v->elem_type != ValueType::string) return nullptr;
  return &v->strs;
}

const std::vector<double>* GgufFile::get_float_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr || v->type != ValueType::array || !is_float(v->elem_type)) return nullptr;
  return &v->floats;
}

const std::vector<int64_t>* GgufFile::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr || v->type != ValueType::array) return nullptr;
  if (!is_unsigned_int(v->elem_type) && !is_signed_int(v->elem_type)) return nullptr;
  if (v->ints.size() != v->array_size) return nullptr;  // a u64 above INT64_MAX
  return &v->ints;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

// The whole pages inside a tensor's bytes (neighbours sharing a page are left alone), or an
// empty range.
std::pair<uintptr_t, uintptr_t> inner_pages(const TensorInfo& t) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t b = (reinterpret_cast<uintptr_t>(t.data) + page - 1) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(t.data) + t.n_bytes) / page * page;
  return {b, e > b ? e : b};
}

}  // namespace

void GgufFile::release_pages(const TensorInfo& t) const {
  if (!mapped_ || t.data == nullptr || t.n_bytes == 0) return;
  const auto [b, e] = inner_pages(t);
  if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

void GgufFile::advise_sparse(const TensorInfo& t) const {
  if (!mapped_ || t.data == nullptr || t.n_bytes == 0) return;
  const auto [b, e] = inner_pages(t);
  if (e == b) return;
  // Advice only: a kernel without it reads the same bytes, with more resident.
  (void)::madvise(reinterpret_cast<void*>(b), e - b, MADV_NOHUGEPAGE);
  (void)::madvise(reinterpret_cast<void*>(b), e - b, MADV_RANDOM);
}

std::string shape_text(const TensorInfo& t) {
  std::string s = "{";
  for (uint32_t i = 0; i < t.n_dims; ++i) s += (i ? ", " : "") + std::to_string(t.ne[i]);
  return s + "}";
}

}  // namespace llmsvc::gguf
