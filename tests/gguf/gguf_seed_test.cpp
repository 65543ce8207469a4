// SPDX-License-Identifier: Apache-2.0
// The fuzz seed corpus, written by gguf-py (fuzz/make_gguf_seeds.py): an independent writer
// whose files must parse, with the values the script wrote.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <limits>

#include "runtime/core/gguf/gguf_file.h"

namespace llmsvc::gguf {
namespace {

std::string seed(const char* name) { return std::string(LLMSVC_GGUF_SEEDS) + "/" + name; }

TEST(GgufSeeds, EveryValidSeedParses) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(LLMSVC_GGUF_SEEDS)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("valid_", 0) != 0) continue;
    auto r = GgufFile::open(e.path().string());
    EXPECT_TRUE(r.ok()) << name << ": " << r.status().message();
    ++n;
  }
  EXPECT_GE(n, 6);
}

TEST(GgufSeeds, AllTypesFromGgufPy) {
  auto r = GgufFile::open(seed("valid_all_types.gguf"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const GgufFile& f = **r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "test");
  EXPECT_EQ(f.get_uint("t.u8"), 200u);
  EXPECT_EQ(f.get_int("t.i8"), -100);
  EXPECT_EQ(f.get_uint("t.u16"), 60000u);
  EXPECT_EQ(f.get_int("t.i16"), -30000);
  EXPECT_EQ(f.get_uint("t.u32"), 4000000000u);
  EXPECT_EQ(f.get_int("t.i32"), -2000000000);
  EXPECT_EQ(f.get_float("t.f32"), 1.5);
  EXPECT_EQ(f.get_bool("t.bool"), true);
  EXPECT_EQ(f.get_string("t.string"), "h\xc3\xa9llo");
  EXPECT_EQ(f.get_uint("t.u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.get_int("t.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.get_float("t.f64"), -2.25e300);
  EXPECT_EQ(*f.get_string_array("a.string"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(*f.get_int_array("a.i32"), (std::vector<int64_t>{-1, 0, 7}));
  EXPECT_EQ(*f.get_int_array("a.u8"), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(*f.get_float_array("a.f32"), (std::vector<double>{0.5, -1.0}));
  EXPECT_EQ(f.find("a.bool")->uints, (std::vector<uint64_t>{1, 0, 1}));
  EXPECT_EQ(f.find("a.u64")->uints, (std::vector<uint64_t>{1, std::numeric_limits<uint64_t>::max()}));
  const Value* nested = f.find("a.nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->arr.size(), 3u);
  EXPECT_EQ(nested->arr[0].ints, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(nested->arr[1].strs, (std::vector<std::string>{"x"}));
  ASSERT_EQ(nested->arr[2].arr.size(), 1u);
  EXPECT_EQ(nested->arr[2].arr[0].ints, (std::vector<int64_t>{9}));

  // gguf-py writes numpy shapes reversed: ggml's ne[0] is the last numpy axis.
  const TensorInfo* w = f.find_tensor("w.f32");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->ne, (std::array<uint64_t, 4>{3, 2, 1, 1}));
  float v[6];
  std::memcpy(v, w->data, sizeof v);
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[5], 5.0f);
  const TensorInfo* q8 = f.find_tensor("w.q8_0");
  ASSERT_NE(q8, nullptr);
  EXPECT_EQ(q8->type, TensorType::Q8_0);
  EXPECT_EQ(q8->ne, (std::array<uint64_t, 4>{64, 2, 1, 1}));
  EXPECT_EQ(q8->n_bytes, 4u * 34u);
  const TensorInfo* q4k = f.find_tensor("w.q4_k");
  ASSERT_NE(q4k, nullptr);
  EXPECT_EQ(q4k->n_bytes, 144u);
}

TEST(GgufSeeds, AlignmentAndVersion2) {
  auto a = GgufFile::open(seed("valid_align64.gguf"));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ((*a)->alignment(), 64u);
  EXPECT_EQ((*a)->find_tensor("b")->offset, 64u);
  auto v2 = GgufFile::open(seed("valid_v2.gguf"));
  ASSERT_TRUE(v2.ok()) << v2.status().message();
  EXPECT_EQ((*v2)->version(), 2u);
}

TEST(GgufSeeds, TinyLlama) {
  auto r = GgufFile::open(seed("valid_tiny_llama.gguf"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->get_uint("llama.block_count"), 2u);
  EXPECT_EQ((*r)->get_string_array("tokenizer.ggml.tokens")->size(), 300u);
  EXPECT_EQ((*r)->tensors().size(), 16u);
  EXPECT_EQ((*r)->find_tensor("blk.1.ffn_gate.weight")->type, TensorType::Q2_K);
  EXPECT_EQ((*r)->find_tensor("blk.0.ffn_down.weight")->n_bytes, 2u * 210u);
}

}  // namespace
}  // namespace llmsvc::gguf
