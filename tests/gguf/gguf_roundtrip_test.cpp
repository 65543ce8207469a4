// SPDX-License-Identifier: Apache-2.0
// Valid images built by GgufBuilder parse back to exactly what was written: all 13 value
// types, arrays of each, arrays of arrays, tensors, alignment, v2, and the typed getters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "runtime/core/gguf/gguf_file.h"
#include "tests/gguf/gguf_builder.h"

namespace llmsvc::gguf {
namespace {

using testing::Bytes;
using testing::GgufBuilder;
using testing::kI64Min;
using testing::kU64Max;

GgufBuilder all_types_builder() {
  GgufBuilder b;
  b.kv("t.u8", ValueType::u8, Bytes().u8(200));
  b.kv("t.i8", ValueType::i8, Bytes().i8(-100));
  b.kv("t.u16", ValueType::u16, Bytes().u16(60000));
  b.kv("t.i16", ValueType::i16, Bytes().i16(-30000));
  b.kv("t.u32", ValueType::u32, Bytes().u32(4000000000u));
  b.kv("t.i32", ValueType::i32, Bytes().i32(-2000000000));
  b.kv("t.f32", ValueType::f32, Bytes().f32(1.5f));
  b.kv("t.bool", ValueType::boolean, Bytes().u8(1));
  b.kv("t.string", ValueType::string, Bytes().str("h\xc3\xa9llo"));
  b.kv("t.u64", ValueType::u64, Bytes().u64(kU64Max));
  b.kv("t.i64", ValueType::i64, Bytes().i64(kI64Min));
  b.kv("t.f64", ValueType::f64, Bytes().f64(-2.25e300));
  b.kv("a.u8", ValueType::array, Bytes().type(ValueType::u8).u64(2).u8(0).u8(255));
  b.kv("a.i8", ValueType::array, Bytes().type(ValueType::i8).u64(2).i8(-128).i8(127));
  b.kv("a.u16", ValueType::array, Bytes().type(ValueType::u16).u64(1).u16(65535));
  b.kv("a.i16", ValueType::array, Bytes().type(ValueType::i16).u64(1).i16(-32768));
  b.kv("a.u32", ValueType::array, Bytes().type(ValueType::u32).u64(0));
  b.kv("a.i32", ValueType::array, Bytes().type(ValueType::i32).u64(3).i32(-1).i32(0).i32(7));
  b.kv("a.f32", ValueType::array, Bytes().type(ValueType::f32).u64(2).f32(0.5f).f32(-1.0f));
  b.kv("a.bool", ValueType::array, Bytes().type(ValueType::boolean).u64(3).u8(1).u8(0).u8(1));
  b.kv("a.string", ValueType::array, Bytes().type(ValueType::string).u64(3).str("a").str("").str("ccc"));
  b.kv("a.u64", ValueType::array, Bytes().type(ValueType::u64).u64(2).u64(1).u64(kU64Max));
  b.kv("a.i64", ValueType::array, Bytes().type(ValueType::i64).u64(1).i64(kI64Min));
  b.kv("a.f64", ValueType::array, Bytes().type(ValueType::f64).u64(1).f64(1e-300));
  // [[i32: 1, 2], [string: "x"], [array: [u8: 9]]]: inner arrays carry their own element type.
  b.kv("a.nested", ValueType::array,
       Bytes()
           .type(ValueType::array).u64(3)
           .type(ValueType::i32).u64(2).i32(1).i32(2)
           .type(ValueType::string).u64(1).str("x")
           .type(ValueType::array).u64(1).type(ValueType::u8).u64(1).u8(9));
  b.tensor("w.f32", 0, {4, 2});
  b.tensor("w.q8", 8, {64, 2});
  b.tensor("w.f16", 1, {3});
  return b;
}

Result<std::unique_ptr<GgufFile>> parse(const std::vector<uint8_t>& bytes, const Limits& limits = {}) {
  return GgufFile::from_memory(bytes, limits);
}

TEST(GgufRoundTrip, AllScalarTypes) {
  const std::vector<uint8_t> img = all_types_builder().build();
  auto r = parse(img);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.file_size(), img.size());
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 25u);

  EXPECT_EQ(f.get_uint("t.u8"), 200u);
  EXPECT_EQ(f.get_int("t.i8"), -100);
  EXPECT_EQ(f.get_uint("t.u16"), 60000u);
  EXPECT_EQ(f.get_int("t.i16"), -30000);
  EXPECT_EQ(f.get_uint("t.u32"), 4000000000u);
  EXPECT_EQ(f.get_int("t.i32"), -2000000000);
  EXPECT_EQ(f.get_float("t.f32"), 1.5);
  EXPECT_EQ(f.get_bool("t.bool"), true);
  EXPECT_EQ(f.get_string("t.string"), "h\xc3\xa9llo");
  EXPECT_EQ(f.get_uint("t.u64"), kU64Max);
  EXPECT_EQ(f.get_int("t.i64"), kI64Min);
  EXPECT_EQ(f.get_float("t.f64"), -2.25e300);
  // The stored type is kept.
  EXPECT_EQ(f.find("t.u16")->type, ValueType::u16);
  EXPECT_EQ(f.find("t.f32")->type, ValueType::f32);
  EXPECT_EQ(f.find("t.bool")->type, ValueType::boolean);
}

TEST(GgufRoundTrip, GettersRefuseIncompatibleTypes) {
  auto r = parse(all_types_builder().build());
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.get_uint("t.i8"), std::nullopt);       // negative
  EXPECT_EQ(f.get_int("t.u64"), std::nullopt);       // above INT64_MAX
  EXPECT_EQ(f.get_int("t.u32"), 4000000000);          // widened when it fits
  EXPECT_EQ(f.get_float("t.u32"), std::nullopt);
  EXPECT_EQ(f.get_string("t.u32"), std::nullopt);
  EXPECT_EQ(f.get_bool("t.u8"), std::nullopt);
  EXPECT_EQ(f.get_uint("t.bool"), std::nullopt);
  EXPECT_EQ(f.get_uint("missing"), std::nullopt);
  EXPECT_EQ(f.find("missing"), nullptr);
  EXPECT_EQ(f.get_string_array("a.i32"), nullptr);
  EXPECT_EQ(f.get_int_array("a.string"), nullptr);
  EXPECT_EQ(f.get_int_array("a.f32"), nullptr);
  EXPECT_EQ(f.get_float_array("a.i32"), nullptr);
  EXPECT_EQ(f.get_int_array("a.bool"), nullptr);      // bools are not ints
  EXPECT_EQ(f.get_string_array("t.string"), nullptr); // a scalar is not an array
  EXPECT_EQ(f.get_int_array("a.u64"), nullptr);       // holds a u64 above INT64_MAX
}

TEST(GgufRoundTrip, ArraysOfEveryType) {
  auto r = parse(all_types_builder().build());
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& f = **r;
  using I = std::vector<int64_t>;
  using U = std::vector<uint64_t>;
  ASSERT_NE(f.get_int_array("a.u8"), nullptr);
  EXPECT_EQ(*f.get_int_array("a.u8"), (I{0, 255}));
  EXPECT_EQ(f.find("a.u8")->uints, (U{0, 255}));
  EXPECT_EQ(*f.get_int_array("a.i8"), (I{-128, 127}));
  EXPECT_EQ(*f.get_int_array("a.u16"), (I{65535}));
  EXPECT_EQ(*f.get_int_array("a.i16"), (I{-32768}));
  EXPECT_EQ(*f.get_int_array("a.u32"), (I{}));
  EXPECT_EQ(f.find("a.u32")->array_size, 0u);
  EXPECT_EQ(*f.get_int_array("a.i32"), (I{-1, 0, 7}));
  EXPECT_EQ(*f.get_int_array("a.i64"), (I{kI64Min}));
  EXPECT_EQ(*f.get_float_array("a.f32"), (std::vector<double>{0.5, -1.0}));
  EXPECT_EQ(*f.get_float_array("a.f64"), (std::vector<double>{1e-300}));
  EXPECT_EQ(*f.get_string_array("a.string"), (std::vector<std::string>{"a", "", "ccc"}));
  const Value* bools = f.find("a.bool");
  EXPECT_EQ(bools->elem_type, ValueType::boolean);
  EXPECT_EQ(bools->ints, (I{1, 0, 1}));
  EXPECT_EQ(bools->uints, (U{1, 0, 1}));
  const Value* big = f.find("a.u64");
  EXPECT_EQ(big->uints, (U{1, kU64Max}));
  EXPECT_TRUE(big->ints.empty());
  EXPECT_EQ(big->array_size, 2u);
  for (const char* k : {"a.u8", "a.i32", "a.string", "a.f64", "a.nested"}) {
    EXPECT_EQ(f.find(k)->type, ValueType::array) << k;
  }
}

TEST(GgufRoundTrip, ArraysOfArrays) {
  auto r = parse(all_types_builder().build());
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Value* v = (*r)->find("a.nested");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->elem_type, ValueType::array);
  ASSERT_EQ(v->arr.size(), 3u);
  EXPECT_EQ(v->array_size, 3u);
  EXPECT_EQ(v->arr[0].type, ValueType::array);
  EXPECT_EQ(v->arr[0].elem_type, ValueType::i32);
  EXPECT_EQ(v->arr[0].ints, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(v->arr[1].elem_type, ValueType::string);
  EXPECT_EQ(v->arr[1].strs, (std::vector<std::string>{"x"}));
  EXPECT_EQ(v->arr[2].elem_type, ValueType::array);
  ASSERT_EQ(v->arr[2].arr.size(), 1u);
  EXPECT_EQ(v->arr[2].arr[0].uints, (std::vector<uint64_t>{9}));
}

TEST(GgufRoundTrip, TensorsPointIntoTheDataSection) {
  const std::vector<uint8_t> img = all_types_builder().build();
  auto r = parse(img);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& f = **r;
  ASSERT_EQ(f.tensors().size(), 3u);
  const TensorInfo* q8 = f.find_tensor("w.q8");
  ASSERT_NE(q8, nullptr);
  EXPECT_EQ(q8->type, TensorType::Q8_0);
  EXPECT_EQ(q8->n_dims, 2u);
  EXPECT_EQ(q8->ne, (std::array<uint64_t, 4>{64, 2, 1, 1}));
  EXPECT_EQ(q8->n_elems, 128u);
  EXPECT_EQ(q8->n_bytes, 4u * 34u);
  EXPECT_EQ(q8->offset, 32u);  // right after w.f32 (32 bytes)
  const TensorInfo* f16 = f.find_tensor("w.f16");
  ASSERT_NE(f16, nullptr);
  EXPECT_EQ(f16->n_bytes, 6u);
  EXPECT_EQ(f16->offset, 192u);  // 32 + 136 rounded up to 32
  EXPECT_EQ(f.find_tensor("w.none"), nullptr);
  // The file ends with the last tensor, so the data section starts n bytes before the end.
  const uint8_t* data_start = img.data() + img.size() - (f16->offset + f16->n_bytes);
  for (const TensorInfo& t : f.tensors()) {
    ASSERT_EQ(t.data, data_start + t.offset) << t.name;
    for (uint64_t k = 0; k < t.n_bytes; ++k) {
      ASSERT_EQ(t.data[k], testing::test_data_byte(t.offset + k)) << t.name << " byte " << k;
    }
  }
  EXPECT_EQ(static_cast<size_t>(data_start - img.data()) % 32, 0u);
}

TEST(GgufRoundTrip, VersionTwoAndCustomAlignment) {
  GgufBuilder b;
  b.version = 2;
  b.alignment = 256;
  b.kv_u32("general.alignment", 256);
  b.tensor("a", 0, {3});
  b.tensor("b", 0, {5});
  auto r = parse(b.build());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->version(), 2u);
  EXPECT_EQ((*r)->alignment(), 256u);
  EXPECT_EQ((*r)->find_tensor("b")->offset, 256u);
}

TEST(GgufRoundTrip, MetadataOnlyFile) {
  GgufBuilder b;
  b.kv_string("general.architecture", "llama");
  auto r = parse(b.build());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE((*r)->tensors().empty());
  EXPECT_EQ((*r)->get_string("general.architecture"), "llama");
}

TEST(GgufRoundTrip, OpenMapsTheFile) {
  const std::vector<uint8_t> img = all_types_builder().build();
  const std::string path = ::testing::TempDir() + "gguf_roundtrip_open.gguf";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(img.data()), static_cast<std::streamsize>(img.size()));
  }
  {
    auto r = GgufFile::open(path);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ((*r)->path(), path);
    EXPECT_EQ((*r)->file_size(), img.size());
    EXPECT_EQ((*r)->get_string("t.string"), "h\xc3\xa9llo");
    const TensorInfo* t = (*r)->find_tensor("w.q8");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->data[0], testing::test_data_byte(t->offset));
  }  // unmapped here
  std::remove(path.c_str());
}

TEST(GgufRoundTrip, OpenErrors) {
  auto missing = GgufFile::open(::testing::TempDir() + "no/such/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::model_not_found);
  EXPECT_NE(missing.status().message().find("no/such/model.gguf"), std::string::npos);

  auto dir = GgufFile::open(::testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), Code::model_invalid);

  const std::string empty = ::testing::TempDir() + "gguf_empty.gguf";
  { std::ofstream out(empty, std::ios::binary); }
  auto e = GgufFile::open(empty);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Code::model_invalid);
  EXPECT_NE(e.status().message().find("empty"), std::string::npos);
  std::remove(empty.c_str());
}

TEST(GgufRoundTrip, LimitsAreHonoured) {
  const std::vector<uint8_t> img = all_types_builder().build();
  Limits small_strings;
  small_strings.max_string_bytes = 3;
  auto r = parse(img, small_strings);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::model_invalid);
  EXPECT_NE(r.status().message().find("key 't.string': string length 6 exceeds limit 3"), std::string::npos)
      << r.status().message();

  Limits shallow;
  shallow.max_array_depth = 2;  // a.nested goes three deep
  r = parse(img, shallow);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("key 'a.nested': arrays nested deeper than 2"), std::string::npos)
      << r.status().message();

  Limits few_elems;
  few_elems.max_tensor_elems = 100;  // w.q8 has 128
  r = parse(img, few_elems);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor 'w.q8': 128 elements exceed limit 100"), std::string::npos)
      << r.status().message();

  Limits two_dims;
  two_dims.max_dims = 1;
  r = parse(img, two_dims);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor 'w.f32': n_dims 2 is outside 1..1"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace llmsvc::gguf
