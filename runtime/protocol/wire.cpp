// SPDX-License-Identifier: Apache-2.0
// Field encodings: the checks both directions share, then the Encoder's writes and the
// Decoder's bounds-checked reads.
#include "runtime/protocol/wire.h"

#include <bit>
#include <cmath>

namespace llmsvc::protocol {
namespace {

// Names a field in an error: "Call.options.stop[3]".
struct Where {
  std::string_view msg;
  const char* field;
  int index = -1;
};

Status bad(const Where& w, std::string_view what, Code code = Code::invalid_argument) {
  std::string s(w.msg);
  s += '.';
  s += w.field;
  if (w.index >= 0) {
    s += '[';
    s += std::to_string(w.index);
    s += ']';
  }
  s += ": ";
  s += what;
  return {code, std::move(s)};
}

Status check_range(const Where& w, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return Status::Ok();
  return bad(w, std::to_string(v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

Status check_count(const Where& w, int32_t v) {
  if (v >= 0) return Status::Ok();
  return bad(w, std::to_string(v) + " is negative");
}

Status check_finite(const Where& w, double v) {
  if (std::isfinite(v)) return Status::Ok();
  return bad(w, "is not a finite number");
}

Status check_status(const Where& w, uint32_t v, bool allow_ok) {
  if (allow_ok || v != 0) return Status::Ok();
  return bad(w, "is 0 (LLMSVC_OK) where a failure is required");
}

Status check_text(const Where& w, std::string_view v, Bounds b) {
  if (v.size() < b.min) {
    return bad(w, v.empty() ? std::string("is empty") : std::to_string(v.size()) + " bytes, at least " +
                                                            std::to_string(b.min) + " required");
  }
  if (v.size() > b.max) return bad(w, std::to_string(v.size()) + " bytes, at most " + std::to_string(b.max) + " allowed");
  if (!valid_utf8(v)) return bad(w, "is not valid UTF-8", Code::invalid_utf8);
  return Status::Ok();
}

Status check_list(const Where& w, uint64_t n, size_t max_count) {
  if (n <= max_count) return Status::Ok();
  return bad(w, std::to_string(n) + " entries, at most " + std::to_string(max_count) + " allowed");
}

}  // namespace

bool valid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char lead = p[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // The Unicode Standard's table 3-7: the lead byte fixes the length of the sequence and
    // the range of its second byte (which excludes overlong forms, surrogates, > U+10FFFF).
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      len = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      len = 3;
      if (lead == 0xE0) lo = 0xA0;
      if (lead == 0xED) hi = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      len = 4;
      if (lead == 0xF0) lo = 0x90;
      if (lead == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (len > n - i) return false;
    if (p[i + 1] < lo || p[i + 1] > hi) return false;
    for (size_t k = 2; k < len; ++k)
      if ((p[i + k] & 0xC0) != 0x80) return false;
    i += len;
  }
  return true;
}

Code code_from_wire(uint32_t wire) {
  return wire <= kMaxKnownStatus ? static_cast<Code>(wire) : Code::internal;
}

uint32_t code_to_wire(Code code) { return static_cast<uint32_t>(code); }

Status status_from_wire(uint32_t wire, std::string_view message) {
  if (wire == 0) return Status::Ok();
  if (wire <= kMaxKnownStatus) return {static_cast<Code>(wire), std::string(message)};
  return {Code::internal, "status " + std::to_string(wire) + " (unknown to this version): " + std::string(message)};
}

// ---------------------------------------------------------------- Encoder

template <class T>
void Encoder::put(T v) {
  const auto x = std::bit_cast<UintOf<sizeof(T)>>(v);
  for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<uint8_t>(x >> (8 * i)));
}

Status Encoder::u16(const char*, uint16_t v) {
  put(v);
  return Status::Ok();
}

Status Encoder::u16_in(const char* field, uint16_t v, uint16_t lo, uint16_t hi) {
  LLMSVC_RETURN_IF_ERROR(check_range({msg_, field}, v, lo, hi));
  put(v);
  return Status::Ok();
}

Status Encoder::fail(const char* field, std::string_view what) const { return bad({msg_, field}, what); }

Status Encoder::u32(const char*, uint32_t v) {
  put(v);
  return Status::Ok();
}

Status Encoder::u32_in(const char* field, uint32_t v, uint32_t lo, uint32_t hi) {
  LLMSVC_RETURN_IF_ERROR(check_range({msg_, field}, v, lo, hi));
  put(v);
  return Status::Ok();
}

Status Encoder::u64(const char*, uint64_t v) {
  put(v);
  return Status::Ok();
}

Status Encoder::i32(const char*, int32_t v) {
  put(v);
  return Status::Ok();
}

Status Encoder::count(const char* field, int32_t v) {
  LLMSVC_RETURN_IF_ERROR(check_count({msg_, field}, v));
  put(v);
  return Status::Ok();
}

Status Encoder::f32(const char* field, float v) {
  LLMSVC_RETURN_IF_ERROR(check_finite({msg_, field}, v));
  put(v);
  return Status::Ok();
}

Status Encoder::f64(const char* field, double v) {
  LLMSVC_RETURN_IF_ERROR(check_finite({msg_, field}, v));
  put(v);
  return Status::Ok();
}

Status Encoder::boolean(const char*, bool v) {
  put(uint8_t{v});
  return Status::Ok();
}

Status Encoder::enum8(const char* field, int32_t v, int32_t max) {
  LLMSVC_RETURN_IF_ERROR(check_range({msg_, field}, v, 0, max));
  put(static_cast<uint8_t>(v));
  return Status::Ok();
}

Status Encoder::status(const char* field, uint32_t v, bool allow_ok) {
  LLMSVC_RETURN_IF_ERROR(check_status({msg_, field}, v, allow_ok));
  put(v);
  return Status::Ok();
}

Status Encoder::text(const char* field, const std::string& v, Bounds b) {
  LLMSVC_RETURN_IF_ERROR(check_text({msg_, field}, v, b));
  put(static_cast<uint32_t>(v.size()));
  out_.insert(out_.end(), v.begin(), v.end());
  return Status::Ok();
}

Status Encoder::opt_text(const char* field, const std::optional<std::string>& v, Bounds b) {
  if (v) return text(field, *v, b);
  put(kAbsent);
  return Status::Ok();
}

Status Encoder::text_list(const char* field, const std::vector<std::string>& v, size_t max_count, Bounds b) {
  LLMSVC_RETURN_IF_ERROR(list_count(field, v.size(), max_count));
  for (size_t i = 0; i < v.size(); ++i) {
    LLMSVC_RETURN_IF_ERROR(check_text({msg_, field, static_cast<int>(i)}, v[i], b));
    put(static_cast<uint32_t>(v[i].size()));
    out_.insert(out_.end(), v[i].begin(), v[i].end());
  }
  return Status::Ok();
}

Status Encoder::list_count(const char* field, size_t n, size_t max_count) {
  LLMSVC_RETURN_IF_ERROR(check_list({msg_, field}, n, max_count));
  put(static_cast<uint32_t>(n));
  return Status::Ok();
}

// ---------------------------------------------------------------- Decoder

Status Decoder::take(const char* field, size_t n, const uint8_t*& p, int index) {
  if (n > remaining()) {
    return bad({msg_, field, index},
               "truncated (" + std::to_string(n) + " bytes needed, " + std::to_string(remaining()) + " left)");
  }
  p = in_.data() + pos_;
  pos_ += n;
  return Status::Ok();
}

template <class T>
Status Decoder::fixed(const char* field, T& v) {
  const uint8_t* p = nullptr;
  LLMSVC_RETURN_IF_ERROR(take(field, sizeof(T), p));
  UintOf<sizeof(T)> x = 0;
  for (size_t i = 0; i < sizeof(T); ++i) x = static_cast<UintOf<sizeof(T)>>(x | UintOf<sizeof(T)>{p[i]} << (8 * i));
  v = std::bit_cast<T>(x);
  return Status::Ok();
}

Status Decoder::u16(const char* field, uint16_t& v) { return fixed(field, v); }

Status Decoder::u16_in(const char* field, uint16_t& v, uint16_t lo, uint16_t hi) {
  LLMSVC_RETURN_IF_ERROR(fixed(field, v));
  return check_range({msg_, field}, v, lo, hi);
}

Status Decoder::fail(const char* field, std::string_view what) const { return bad({msg_, field}, what); }

Status Decoder::u32(const char* field, uint32_t& v) { return fixed(field, v); }

Status Decoder::u32_in(const char* field, uint32_t& v, uint32_t lo, uint32_t hi) {
  LLMSVC_RETURN_IF_ERROR(fixed(field, v));
  return check_range({msg_, field}, v, lo, hi);
}

Status Decoder::u64(const char* field, uint64_t& v) { return fixed(field, v); }

Status Decoder::i32(const char* field, int32_t& v) { return fixed(field, v); }

Status Decoder::count(const char* field, int32_t& v) {
  LLMSVC_RETURN_IF_ERROR(fixed(field, v));
  return check_count({msg_, field}, v);
}

Status Decoder::f32(const char* field, float& v) {
  LLMSVC_RETURN_IF_ERROR(fixed(field, v));
  return check_finite({msg_, field}, v);
}

Status Decoder::f64(const char* field, double& v) {
  LLMSVC_RETURN_IF_ERROR(fixed(field, v));
  return check_finite({msg_, field}, v);
}

Status Decoder::boolean(const char* field, bool& v) {
  uint8_t x = 0;
  LLMSVC_RETURN_IF_ERROR(fixed(field, x));
  LLMSVC_RETURN_IF_ERROR(check_range({msg_, field}, x, 0, 1));
  v = x == 1;
  return Status::Ok();
}

Status Decoder::enum8(const char* field, int32_t& v, int32_t max) {
  uint8_t x = 0;
  LLMSVC_RETURN_IF_ERROR(fixed(field, x));
  LLMSVC_RETURN_IF_ERROR(check_range({msg_, field}, x, 0, max));
  v = static_cast<int32_t>(x);
  return Status::Ok();
}

Status Decoder::status(const char* field, uint32_t& v, bool allow_ok) {
  LLMSVC_RETURN_IF_ERROR(fixed(field, v));
  return check_status({msg_, field}, v, allow_ok);
}

Status Decoder::text_at(const char* field, int index, std::string& v, Bounds b, uint32_t len) {
  // Length checked against the bounds first (names the problem), then against what is left
  // (before anything is allocated).
  if (len > b.max) {
    return bad({msg_, field, index}, std::to_string(len) + " bytes, at most " + std::to_string(b.max) + " allowed");
  }
  const uint8_t* p = nullptr;
  LLMSVC_RETURN_IF_ERROR(take(field, len, p, index));
  std::string_view s(reinterpret_cast<const char*>(p), len);
  LLMSVC_RETURN_IF_ERROR(check_text({msg_, field, index}, s, b));
  v.assign(s);
  return Status::Ok();
}

Status Decoder::text(const char* field, std::string& v, Bounds b) {
  uint32_t len = 0;
  LLMSVC_RETURN_IF_ERROR(fixed(field, len));
  return text_at(field, -1, v, b, len);
}

Status Decoder::opt_text(const char* field, std::optional<std::string>& v, Bounds b) {
  uint32_t len = 0;
  LLMSVC_RETURN_IF_ERROR(fixed(field, len));
  if (len == kAbsent) {
    v.reset();
    return Status::Ok();
  }
  v.emplace();
  return text_at(field, -1, *v, b, len);
}

Status Decoder::text_list(const char* field, std::vector<std::string>& v, size_t max_count, Bounds b) {
  uint32_t n = 0;
  // Each entry takes at least its 4-byte length (plus b.min bytes): a count the rest of the
  // payload cannot hold is refused before anything is reserved.
  LLMSVC_RETURN_IF_ERROR(list_count(field, n, max_count, 4 + b.min));
  v.clear();
  v.resize(n);  // n <= max_count
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t len = 0;
    LLMSVC_RETURN_IF_ERROR(fixed(field, len));
    LLMSVC_RETURN_IF_ERROR(text_at(field, static_cast<int>(i), v[i], b, len));
  }
  return Status::Ok();
}

Status Decoder::list_count(const char* field, uint32_t& n, size_t max_count, size_t min_bytes) {
  LLMSVC_RETURN_IF_ERROR(fixed(field, n));
  LLMSVC_RETURN_IF_ERROR(check_list({msg_, field}, n, max_count));
  if (uint64_t{n} * min_bytes > remaining()) {
    return bad({msg_, field}, std::to_string(n) + " entries cannot fit in the " + std::to_string(remaining()) +
                                  " bytes left");
  }
  return Status::Ok();
}

Status Decoder::finish(bool extensible) {
  if (extensible || remaining() == 0) return Status::Ok();
  return {Code::invalid_argument,
          std::string(msg_) + ": " + std::to_string(remaining()) + " trailing bytes after the last field"};
}

}  // namespace llmsvc::protocol
