// SPDX-License-Identifier: Apache-2.0
// The real default model (SmolLM2-135M-Instruct Q4_1) parses with the expected shape.
#include <gtest/gtest.h>

#include <filesystem>

#include "runtime/core/gguf/gguf_file.h"
#include "tests/common/test_paths.h"

namespace llmsvc::gguf {
namespace {

class GgufModel : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = test::default_model_path();
    if (!std::filesystem::exists(path)) FAIL() << "default model not present: " << path;
    auto r = GgufFile::open(path);
    ASSERT_TRUE(r.ok()) << r.status().message();
    file_ = std::move(r).value();
  }
  std::unique_ptr<GgufFile> file_;
};

TEST_F(GgufModel, HeaderAndMetadata) {
  const GgufFile& f = *file_;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.tensors().size(), 272u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("llama.block_count"), 30u);
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 576u);
  ASSERT_TRUE(f.get_float("llama.rope.freq_base").has_value());
  EXPECT_GT(*f.get_float("llama.rope.freq_base"), 0.0);
  const auto* tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->size(), 49152u);
  const auto* types = f.get_int_array("tokenizer.ggml.token_type");
  ASSERT_NE(types, nullptr);
  EXPECT_EQ(types->size(), 49152u);
  ASSERT_NE(f.get_string_array("tokenizer.ggml.merges"), nullptr);
  EXPECT_FALSE(f.get_string_array("tokenizer.ggml.merges")->empty());
  ASSERT_TRUE(f.get_string("tokenizer.chat_template").has_value());
}

TEST_F(GgufModel, TokenEmbedding) {
  const TensorInfo* t = file_->find_tensor("token_embd.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, TensorType::Q8_0);
  EXPECT_EQ(t->n_dims, 2u);
  EXPECT_EQ(t->ne, (std::array<uint64_t, 4>{576, 49152, 1, 1}));
  EXPECT_EQ(t->n_elems, 576u * 49152u);
  EXPECT_EQ(t->n_bytes, 576u * 49152u / 32u * 34u);
  ASSERT_NE(t->data, nullptr);
}

TEST_F(GgufModel, TensorsLieInsideTheFile) {
  uint64_t total = 0;
  for (const TensorInfo& t : file_->tensors()) {
    EXPECT_LE(t.offset + t.n_bytes, file_->file_size()) << t.name;
    EXPECT_EQ(t.offset % file_->alignment(), 0u) << t.name;
    total += t.n_bytes;
  }
  EXPECT_LE(total, file_->file_size());
  EXPECT_GT(total, file_->file_size() / 2);  // the file is mostly weights
  ASSERT_NE(file_->find_tensor("blk.29.ffn_down.weight"), nullptr);
  EXPECT_EQ(file_->find_tensor("blk.30.ffn_down.weight"), nullptr);
}

}  // namespace
}  // namespace llmsvc::gguf
