// SPDX-License-Identifier: Apache-2.0
// Field encodings of docs/PROTOCOL.md ("Field encodings"): little-endian integers, IEEE-754
// floats, length-prefixed UTF-8 text. Encoder and Decoder have the same methods, so each
// message describes its fields once (a template over the two) and both directions apply the
// same checks: whatever encodes decodes, and whatever decodes re-encodes to the same bytes.
//
// Every failure names the field: "<Message>.<field>: <problem>", with Code::invalid_utf8 for
// text that is not UTF-8 and Code::invalid_argument for everything else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/status.h"
#include "runtime/protocol/types.h"

namespace llmsvc::protocol {

template <size_t N>
using UintOf = std::conditional_t<N == 1, uint8_t, std::conditional_t<N == 2, uint16_t, std::conditional_t<N == 4, uint32_t, uint64_t>>>;

// Strict UTF-8 (RFC 3629): no overlong forms, surrogates or code points past U+10FFFF.
bool valid_utf8(std::string_view text);

// Status codes travel as their llmsvc_status values (u32). A value this version does not
// know (a newer peer's) reads as Code::internal, and status_from_wire says which it was.
inline constexpr uint32_t kMaxKnownStatus = 16;  // LLMSVC_ERR_MODEL_MISMATCH
Code code_from_wire(uint32_t wire);
uint32_t code_to_wire(Code code);
Status status_from_wire(uint32_t wire, std::string_view message);

// Allowed length of a text field, in bytes.
struct Bounds {
  size_t min = 0;
  size_t max = 0;
};
// Text bounded only by the frame it travels in.
inline constexpr Bounds kAnyText{0, kMaxMaxPayload};
// Length prefix of an absent optional text.
inline constexpr uint32_t kAbsent = 0xFFFFFFFFu;

// Appends fields to `out`, refusing values the decoder would refuse. `version` is the
// protocol version of the connection: a message writes only the fields that version has.
class Encoder {
 public:
  Encoder(std::vector<uint8_t>& out, std::string_view msg, uint16_t version = kMaxVersion)
      : out_(out), msg_(msg), version_(version) {}

  uint16_t version() const { return version_; }

  Status u16(const char* field, uint16_t v);
  Status u16_in(const char* field, uint16_t v, uint16_t lo, uint16_t hi);
  Status u32(const char* field, uint32_t v);
  Status u32_in(const char* field, uint32_t v, uint32_t lo, uint32_t hi);
  Status u64(const char* field, uint64_t v);
  Status i32(const char* field, int32_t v);
  Status count(const char* field, int32_t v);  // i32 >= 0
  Status f32(const char* field, float v);     // finite
  Status f64(const char* field, double v);     // finite
  Status boolean(const char* field, bool v);   // u8 0 or 1
  Status enum8(const char* field, int32_t v, int32_t max);  // u8 in [0, max]
  Status status(const char* field, uint32_t v, bool allow_ok);
  Status text(const char* field, const std::string& v, Bounds b);
  Status opt_text(const char* field, const std::optional<std::string>& v, Bounds b);
  Status text_list(const char* field, const std::vector<std::string>& v, size_t max_count, Bounds b);
  // list(k, record): a u32 count <= max_count, then each entry as each(entry) writes it with
  // the methods above. min_bytes: the fewest bytes an entry takes (the decoder's check).
  template <class T, class F>
  Status records(const char* field, const std::vector<T>& v, size_t max_count, size_t /*min_bytes*/, F&& each) {
    LLMSVC_RETURN_IF_ERROR(list_count(field, v.size(), max_count));
    for (const T& entry : v) LLMSVC_RETURN_IF_ERROR(each(entry));
    return Status::Ok();
  }
  // A rule between fields (e.g. min_version <= max_version) that does not hold.
  Status fail(const char* field, std::string_view what) const;
  Status finish(bool /*extensible*/) { return Status::Ok(); }

 private:
  template <class T>
  void put(T v);  // little-endian, sizeof(T) bytes
  Status list_count(const char* field, size_t n, size_t max_count);
  std::vector<uint8_t>& out_;
  std::string_view msg_;
  uint16_t version_;
};

// Reads fields from a payload; every read is bounds-checked. `version` as for the Encoder:
// a message reads only the fields that version has (those a later one appends stay 0).
class Decoder {
 public:
  Decoder(std::span<const uint8_t> in, std::string_view msg, uint16_t version = kMaxVersion)
      : in_(in), msg_(msg), version_(version) {}

  uint16_t version() const { return version_; }

  Status u16(const char* field, uint16_t& v);
  Status u16_in(const char* field, uint16_t& v, uint16_t lo, uint16_t hi);
  Status u32(const char* field, uint32_t& v);
  Status u32_in(const char* field, uint32_t& v, uint32_t lo, uint32_t hi);
  Status u64(const char* field, uint64_t& v);
  Status i32(const char* field, int32_t& v);
  Status count(const char* field, int32_t& v);
  Status f32(const char* field, float& v);
  Status f64(const char* field, double& v);
  Status boolean(const char* field, bool& v);
  Status enum8(const char* field, int32_t& v, int32_t max);
  Status status(const char* field, uint32_t& v, bool allow_ok);
  Status text(const char* field, std::string& v, Bounds b);
  Status opt_text(const char* field, std::optional<std::string>& v, Bounds b);
  Status text_list(const char* field, std::vector<std::string>& v, size_t max_count, Bounds b);
  // As the Encoder's: the count is checked against max_count and against what the rest of the
  // payload can hold (count x min_bytes) before the entries are made.
  template <class T, class F>
  Status records(const char* field, std::vector<T>& v, size_t max_count, size_t min_bytes, F&& each) {
    uint32_t n = 0;
    LLMSVC_RETURN_IF_ERROR(list_count(field, n, max_count, min_bytes));
    v.clear();
    v.resize(n);  // n <= max_count
    for (T& entry : v) LLMSVC_RETURN_IF_ERROR(each(entry));
    return Status::Ok();
  }
  Status fail(const char* field, std::string_view what) const;
  // After the last field: trailing bytes are refused unless the message is extensible.
  Status finish(bool extensible);

  size_t remaining() const { return in_.size() - pos_; }

 private:
  Status take(const char* field, size_t n, const uint8_t*& p, int index = -1);
  template <class T>
  Status fixed(const char* field, T& v);  // little-endian, sizeof(T) bytes
  Status text_at(const char* field, int index, std::string& v, Bounds b, uint32_t len);
  Status list_count(const char* field, uint32_t& n, size_t max_count, size_t min_bytes);
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  std::string_view msg_;
  uint16_t version_;
};

}  // namespace llmsvc::protocol
