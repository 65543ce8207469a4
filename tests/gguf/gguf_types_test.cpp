// SPDX-License-Identifier: Apache-2.0
// Block geometry of the tensor types against ggml's block structs, and value type names.
#include "runtime/core/gguf/gguf_types.h"

#include <gtest/gtest.h>

#include <string>

namespace llmsvc::gguf {
namespace {

struct Expected {
  uint32_t type;
  const char* name;
  uint32_t block_elems;
  uint32_t block_bytes;
};

// From ggml-common.h (sizeof(block_*)) and ggml.h type numbers.
constexpr Expected kGgml[] = {
    {0, "F32", 1, 4},       {1, "F16", 1, 2},       {30, "BF16", 1, 2},
    {2, "Q4_0", 32, 18},    {3, "Q4_1", 32, 20},    {6, "Q5_0", 32, 22},
    {7, "Q5_1", 32, 24},    {8, "Q8_0", 32, 34},    {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},  {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144},
    {13, "Q5_K", 256, 176}, {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292},
};

TEST(GgufTypes, KnownTypesHaveGgmlGeometry) {
  for (const Expected& e : kGgml) {
    const TypeTraits* t = type_traits(e.type);
    ASSERT_NE(t, nullptr) << e.name;
    EXPECT_EQ(t->name, e.name);
    EXPECT_EQ(t->block_elems, e.block_elems) << e.name;
    EXPECT_EQ(t->block_bytes, e.block_bytes) << e.name;
  }
}

TEST(GgufTypes, UnknownTypesHaveNoTraits) {
  // 4 and 5 were Q4_2/Q4_3, 31..33 the old repacked Q4_0 variants: all removed from ggml.
  for (uint32_t t : {4u, 5u, 31u, 32u, 33u, 1000u, 0xffffffffu}) {
    EXPECT_EQ(type_traits(t), nullptr) << t;
  }
  // i-quants parse (so the loader can name them) though nothing computes with them.
  EXPECT_EQ(type_traits(static_cast<uint32_t>(TensorType::IQ4_NL))->block_bytes, 18u);
  EXPECT_EQ(type_traits(static_cast<uint32_t>(TensorType::IQ4_XS))->block_bytes, 136u);
  EXPECT_EQ(type_traits(static_cast<uint32_t>(TensorType::Q6_K))->block_bytes, 210u);
}

TEST(GgufTypes, ValueTypeNames) {
  const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  for (uint32_t t = 0; t < 13; ++t) EXPECT_EQ(value_type_name(t), names[t]) << t;
  EXPECT_EQ(value_type_name(13), "unknown");
  EXPECT_EQ(value_type_name(0xffffffffu), "unknown");
}

}  // namespace
}  // namespace llmsvc::gguf
