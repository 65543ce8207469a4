// SPDX-License-Identifier: Apache-2.0
// Crafted malformed images: each must be refused with model_invalid and a message naming
// the offending field, never crash or read out of bounds (run under the asan preset too).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>

#include "runtime/core/gguf/gguf_file.h"
#include "tests/gguf/gguf_builder.h"

namespace llmsvc::gguf {
namespace {

using testing::Bytes;
using testing::GgufBuilder;

// Parses a heap copy of exactly `n` bytes, so a sanitizer sees any read past the end.
// Only the status comes back: the parsed file must not outlive the copy.
Status parse_exact(const uint8_t* p, size_t n, const Limits& limits = {}) {
  auto copy = std::make_unique<uint8_t[]>(n == 0 ? 1 : n);
  if (n != 0) std::memcpy(copy.get(), p, n);
  auto r = GgufFile::from_memory(std::span<const uint8_t>(copy.get(), n), limits);
  return r.ok() ? Status::Ok() : r.status();
}

::testing::AssertionResult Invalid(const std::vector<uint8_t>& img, std::string_view needle,
                                   const Limits& limits = {}) {
  const Status s = parse_exact(img.data(), img.size(), limits);
  if (s.ok()) return ::testing::AssertionFailure() << "parsed fine; expected an error with '" << needle << "'";
  if (s.code() != Code::model_invalid) {
    return ::testing::AssertionFailure() << "code " << static_cast<int>(s.code()) << ": " << s.message();
  }
  if (s.message().rfind("gguf: ", 0) != 0 || s.message().find(needle) == std::string::npos) {
    return ::testing::AssertionFailure() << "message \"" << s.message() << "\" lacks \"" << needle << "\"";
  }
  return ::testing::AssertionSuccess();
}

bool parses(const std::vector<uint8_t>& img) { return parse_exact(img.data(), img.size()).ok(); }

// A small valid file touching every structure: scalars, strings, arrays, nested arrays,
// general.alignment, and two tensors.
GgufBuilder small_valid() {
  GgufBuilder b;
  b.alignment = 64;
  b.kv_string("general.architecture", "llama");
  b.kv_u32("general.alignment", 64);
  b.kv("f", ValueType::f32, Bytes().f32(0.25f));
  b.kv("flag", ValueType::boolean, Bytes().u8(1));
  b.kv("toks", ValueType::array, Bytes().type(ValueType::string).u64(2).str("ab").str("c"));
  b.kv("ids", ValueType::array, Bytes().type(ValueType::i32).u64(2).i32(5).i32(-5));
  b.kv("nest", ValueType::array,
       Bytes().type(ValueType::array).u64(1).type(ValueType::u16).u64(2).u16(1).u16(2));
  b.tensor("a", 0, {4});
  b.tensor("b", 8, {32, 1});
  return b;
}

TEST(GgufMalformed, SmallValidFileParses) { EXPECT_TRUE(parses(small_valid().build())); }

TEST(GgufMalformed, EveryTruncationIsRefused) {
  const std::vector<uint8_t> img = small_valid().build();
  ASSERT_TRUE(parses(img));
  for (size_t n = 0; n < img.size(); ++n) {
    const Status s = parse_exact(img.data(), n);
    ASSERT_EQ(s.code(), Code::model_invalid) << "prefix " << n << ": " << s.message();
    const std::string& m = s.message();
    const bool named = m.find("truncated reading") != std::string::npos || m.find("exceeds") != std::string::npos ||
                       m.find("cannot fit") != std::string::npos || m.find("past the end") != std::string::npos ||
                       m.find("empty") != std::string::npos;
    ASSERT_TRUE(named) << "prefix " << n << ": " << m;
  }
  // Spot checks that the message names where the cut is.
  EXPECT_EQ(parse_exact(img.data(), 6).message(),
            "gguf: header: truncated reading version at offset 4 (file size 6)");
  EXPECT_EQ(parse_exact(img.data(), 0).message(), "gguf: file is empty");
}

TEST(GgufMalformed, BadMagic) {
  GgufBuilder b = small_valid();
  b.magic = 0x4c4d4747;  // "GGML", the pre-GGUF format
  EXPECT_TRUE(Invalid(b.build(), "header: bad magic 0x4c4d4747"));
}

TEST(GgufMalformed, UnsupportedVersions) {
  GgufBuilder b = small_valid();
  b.version = 1;
  EXPECT_TRUE(Invalid(b.build(), "header: version 1 is not supported"));
  b.version = 999;
  EXPECT_TRUE(Invalid(b.build(), "header: unsupported version 999 (supported: 2, 3)"));
  b.version = 0;
  EXPECT_TRUE(Invalid(b.build(), "unsupported version 0"));
  b.version = 0x03000000;  // a big-endian v3 file read little-endian
  EXPECT_TRUE(Invalid(b.build(), "big-endian"));
}

TEST(GgufMalformed, OversizedStrings) {
  GgufBuilder b;
  b.kv("k", ValueType::string, Bytes().u64(uint64_t{1} << 62).raw("abc"));
  EXPECT_TRUE(Invalid(b.build(), "key 'k': string length 4611686018427387904 exceeds limit 1048576"));

  GgufBuilder fits_limit_not_file;
  fits_limit_not_file.kv("k", ValueType::string, Bytes().u64(1000).raw("abc"));
  EXPECT_TRUE(Invalid(fits_limit_not_file.build(), "key 'k': string length 1000 exceeds the 3 bytes left"));

  GgufBuilder key;
  key.kv_raw(Bytes().u64(std::numeric_limits<uint64_t>::max()).raw("k").zeros(16));
  EXPECT_TRUE(Invalid(key.build(), "metadata #0: key length 18446744073709551615 exceeds limit"));

  GgufBuilder name;
  name.tensor_raw(Bytes().u64(uint64_t{1} << 40).zeros(64));
  EXPECT_TRUE(Invalid(name.build(), "tensor #0: name length 1099511627776 exceeds limit"));

  GgufBuilder in_array;
  in_array.kv("toks", ValueType::array, Bytes().type(ValueType::string).u64(2).str("ok").u64(uint64_t{1} << 50));
  EXPECT_TRUE(Invalid(in_array.build(), "key 'toks': array string length 1125899906842624 exceeds limit"));
}

TEST(GgufMalformed, OversizedArrays) {
  GgufBuilder b;
  b.kv("arr", ValueType::array, Bytes().type(ValueType::u8).u64(uint64_t{1} << 40).u8(1));
  EXPECT_TRUE(Invalid(b.build(), "key 'arr': array length 1099511627776 exceeds limit 16777216"));

  GgufBuilder fits_limit_not_file;
  fits_limit_not_file.kv("arr", ValueType::array, Bytes().type(ValueType::u32).u64(1000).u32(1).u32(2));
  EXPECT_TRUE(Invalid(fits_limit_not_file.build(), "key 'arr': array length 1000 of u32 cannot fit in the 8 bytes"));

  // Strings take at least their 8-byte length each.
  GgufBuilder strings;
  strings.kv("arr", ValueType::array, Bytes().type(ValueType::string).u64(3).zeros(16));
  EXPECT_TRUE(Invalid(strings.build(), "key 'arr': array length 3 of string cannot fit in the 16 bytes"));
}

TEST(GgufMalformed, InvalidTypes) {
  GgufBuilder elem;
  elem.kv("arr", ValueType::array, Bytes().u32(13).u64(1).u8(0));
  EXPECT_TRUE(Invalid(elem.build(), "key 'arr': array element type 13 is not a valid value type"));

  GgufBuilder elem_max;
  elem_max.kv("arr", ValueType::array, Bytes().u32(0xffffffffu).u64(0));
  EXPECT_TRUE(Invalid(elem_max.build(), "array element type 4294967295 is not a valid value type"));

  GgufBuilder value;
  value.kv_raw(Bytes().str("v").u32(13).u64(0));
  EXPECT_TRUE(Invalid(value.build(), "key 'v': invalid value type 13"));

  GgufBuilder nested_elem;
  nested_elem.kv("arr", ValueType::array, Bytes().type(ValueType::array).u64(1).u32(77).u64(0));
  EXPECT_TRUE(Invalid(nested_elem.build(), "key 'arr': array element type 77 is not a valid value type"));

  GgufBuilder boolean;
  boolean.kv("flag", ValueType::boolean, Bytes().u8(2));
  EXPECT_TRUE(Invalid(boolean.build(), "key 'flag': bool value 2 is neither 0 nor 1"));
}

TEST(GgufMalformed, DeeplyNestedArraysAreRefusedNotRecursedInto) {
  Bytes deep;
  for (int k = 0; k < 10000; ++k) deep.type(ValueType::array).u64(1);
  deep.type(ValueType::u8).u64(0);
  GgufBuilder b;
  b.kv("deep", ValueType::array, deep);
  EXPECT_TRUE(Invalid(b.build(), "key 'deep': arrays nested deeper than 4"));
}

TEST(GgufMalformed, AbsurdCounts) {
  GgufBuilder kv = small_valid();
  kv.kv_count = uint64_t{1} << 63;
  EXPECT_TRUE(Invalid(kv.build(), "header: kv_count 9223372036854775808 exceeds limit 65536"));
  kv.kv_count = 60000;  // within the limit, not within the file
  EXPECT_TRUE(Invalid(kv.build(), "header: kv_count 60000 cannot fit"));
  kv.kv_count = 8;  // one more than written: the next key runs into the tensor table
  EXPECT_FALSE(parses(kv.build()));

  GgufBuilder t = small_valid();
  t.tensor_count = std::numeric_limits<uint64_t>::max();
  EXPECT_TRUE(Invalid(t.build(), "header: tensor_count 18446744073709551615 exceeds limit 65536"));
  t.tensor_count = 1000;
  EXPECT_TRUE(Invalid(t.build(), "tensor_count 1000 cannot fit"));
  t.tensor_count = 3;  // one more than written: the next entry is read from the data section
  EXPECT_FALSE(parses(t.build()));
}

TEST(GgufMalformed, TensorDims) {
  for (uint32_t n_dims : {0u, 5u, 1000u}) {
    GgufBuilder b;
    b.tensor_raw(Bytes().str("t").u32(n_dims).u64(4).u64(1).u64(1).u64(1).u64(1).u32(0).u64(0));
    b.data_size = 64;
    EXPECT_TRUE(Invalid(b.build(), "tensor 't': n_dims " + std::to_string(n_dims) + " is outside 1..4"));
  }
  GgufBuilder zero;
  zero.tensor_at("t", 0, {4, 0}, 0);
  zero.data_size = 64;
  EXPECT_TRUE(Invalid(zero.build(), "tensor 't': ne[1] is 0"));

  GgufBuilder overflow;
  overflow.tensor_at("t", 0, {uint64_t{1} << 32, uint64_t{1} << 31, 4}, 0);
  overflow.data_size = 64;
  EXPECT_TRUE(Invalid(overflow.build(), "tensor 't': element count overflows 64 bits at ne[2]"));

  GgufBuilder huge;
  huge.tensor_at("t", 0, {uint64_t{1} << 21, uint64_t{1} << 20}, 0);  // 2^41 > 2^40
  huge.data_size = 64;
  EXPECT_TRUE(Invalid(huge.build(), "tensor 't': 2199023255552 elements exceed limit 1099511627776"));
}

TEST(GgufMalformed, TensorTypes) {
  for (uint32_t type : {4u, 5u, 31u, 1000u}) {
    GgufBuilder b;
    b.tensor_at("t", type, {256}, 0);
    b.data_size = 1024;
    EXPECT_TRUE(Invalid(b.build(), "tensor 't': unknown tensor type " + std::to_string(type)));
  }
  GgufBuilder q8;
  q8.tensor_at("t", 8, {33, 1}, 0);
  q8.data_size = 64;
  EXPECT_TRUE(Invalid(q8.build(), "tensor 't': ne[0] = 33 is not a multiple of the Q8_0 block size 32"));
  GgufBuilder q4k;
  q4k.tensor_at("t", 12, {128, 2}, 0);  // 256 elements in all, but rows are half a block
  q4k.data_size = 1024;
  EXPECT_TRUE(Invalid(q4k.build(), "ne[0] = 128 is not a multiple of the Q4_K block size 256"));
}

TEST(GgufMalformed, OffsetsPastTheEnd) {
  GgufBuilder b;
  b.tensor_at("blk.0.attn_q.weight", 0, {8}, 4096);
  b.data_size = 64;
  EXPECT_TRUE(Invalid(b.build(), "tensor 'blk.0.attn_q.weight': offset 4096 + size 32 exceeds the data section of 64 bytes"));

  GgufBuilder end;  // one byte too far
  end.tensor_at("t", 0, {8}, 32);
  end.data_size = 63;
  EXPECT_TRUE(Invalid(end.build(), "tensor 't': offset 32 + size 32 exceeds the data section of 63 bytes"));

  GgufBuilder wrap;  // offset + size wraps around 2^64
  wrap.tensor_at("t", 0, {16}, std::numeric_limits<uint64_t>::max() - 31);
  wrap.data_size = 64;
  EXPECT_TRUE(Invalid(wrap.build(), "tensor 't': offset 18446744073709551584 + size 64 exceeds"));

  // A tensor table that ends unaligned, with the file cut before the data section starts.
  GgufBuilder cut;
  cut.tensor_at("t", 0, {1}, 0);
  std::vector<uint8_t> img = cut.build();
  const size_t info_end = 24 + 8 + 1 + 4 + 8 + 4 + 8;
  ASSERT_NE(info_end % 32, 0u);
  img.resize(info_end + 1);
  EXPECT_TRUE(Invalid(img, "data section: starts at offset 64 past the end of the file (size 58)"));
}

TEST(GgufMalformed, MisalignedOffsets) {
  GgufBuilder b;
  b.tensor_at("t", 0, {4}, 16);
  b.data_size = 64;
  EXPECT_TRUE(Invalid(b.build(), "tensor 't': offset 16 is not a multiple of alignment 32"));

  GgufBuilder custom;
  custom.alignment = 64;
  custom.kv_u32("general.alignment", 64);
  custom.tensor_at("t", 0, {4}, 32);
  custom.data_size = 128;
  EXPECT_TRUE(Invalid(custom.build(), "tensor 't': offset 32 is not a multiple of alignment 64"));
}

TEST(GgufMalformed, OverlappingTensors) {
  GgufBuilder b;
  b.tensor_at("a", 0, {16}, 0);   // bytes [0, 64)
  b.tensor_at("b", 0, {16}, 32);  // bytes [32, 96)
  EXPECT_TRUE(Invalid(b.build(), "tensor 'b': data at offset 32 overlaps tensor 'a' (offset 0, size 64)"));

  GgufBuilder same;
  same.tensor_at("a", 0, {8}, 0);
  same.tensor_at("b", 0, {8}, 0);
  EXPECT_TRUE(Invalid(same.build(), "overlaps tensor"));

  GgufBuilder reversed;  // table order is not data order
  reversed.tensor_at("late", 0, {8}, 64);
  reversed.tensor_at("early", 0, {32}, 0);  // bytes [0, 128)
  EXPECT_TRUE(Invalid(reversed.build(), "tensor 'late': data at offset 64 overlaps tensor 'early'"));

  GgufBuilder adjacent;  // touching is fine
  adjacent.tensor_at("a", 0, {8}, 0);
  adjacent.tensor_at("b", 0, {8}, 32);
  EXPECT_TRUE(parses(adjacent.build()));
}

TEST(GgufMalformed, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u, 1u << 20}) {
    GgufBuilder b;
    b.kv_u32("general.alignment", a);
    EXPECT_TRUE(Invalid(b.build(), "key 'general.alignment': value " + std::to_string(a) + " is not a power of two"));
  }
  GgufBuilder str;
  str.kv_string("general.alignment", "32");
  EXPECT_TRUE(Invalid(str.build(), "key 'general.alignment': type string is not an unsigned integer"));
  GgufBuilder neg;
  neg.kv("general.alignment", ValueType::i32, Bytes().i32(-32));
  EXPECT_TRUE(Invalid(neg.build(), "key 'general.alignment': type i32 is not an unsigned integer"));
}

TEST(GgufMalformed, Duplicates) {
  GgufBuilder key = small_valid();
  key.kv_u32("general.alignment", 64);
  EXPECT_TRUE(Invalid(key.build(), "key 'general.alignment': duplicate key"));

  GgufBuilder tensor;
  tensor.tensor("w", 0, {4});
  tensor.tensor("w", 0, {4});
  EXPECT_TRUE(Invalid(tensor.build(), "tensor 'w': duplicate tensor name"));
}

TEST(GgufMalformed, EmptyKeyAndUnprintableNames) {
  GgufBuilder empty;
  empty.kv_u32("", 1);
  EXPECT_TRUE(Invalid(empty.build(), "metadata #0: empty key"));
  GgufBuilder unnamed;
  unnamed.tensor("", 0, {4});
  EXPECT_TRUE(Invalid(unnamed.build(), "tensor #0: empty name"));

  GgufBuilder odd;
  odd.kv_raw(Bytes().str(std::string("a\x01'b\n", 5)).u32(99));
  EXPECT_TRUE(Invalid(odd.build(), "key 'a\\x01\\x27b\\x0a': invalid value type 99"));
}

}  // namespace
}  // namespace llmsvc::gguf
