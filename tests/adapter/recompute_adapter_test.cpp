// SPDX-License-Identifier: Apache-2.0
// Forward::recompute runs the adapter that is set: dropped chunks of a sequence first evaluated
// in batches with an adapter come back bit for bit when recomputed with it (float branches take
// the same per-token order in any batch of several tokens), and differ without it (the engine
// sets the context's adapter for a switch-in's recompute).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "hal/cpu/cpu_device.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/lora_adapter.h"
#include "runtime/core/model/model.h"
#include "tests/common/random_lora.h"
#include "tests/model/bad_input_util.h"

namespace llmsvc {
namespace {

constexpr int kChunk = 16;
constexpr int kTokens = 96;

TEST(RecomputeAdapter, DroppedChunksComeBackWithTheAdapterThatIsSet) {
  test::ScratchDir dir;
  const std::string model_path = test::test_model("llama-F32.gguf");
  test::write_random_lora(model_path, dir.file("a.gguf"), 8, 16.0f, 5, 0.05f);
  hal::cpu::CpuDevice dev(2);
  auto model = Model::load(model_path, dev);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto adapter = LoraAdapter::load(dir.file("a.gguf"), **model, dev);
  ASSERT_TRUE(adapter.ok()) << adapter.status().message();
  const ModelConfig& c = (*model)->config();
  policy::KvChunkStore store({c.n_layer, c.n_head_kv, c.head_dim, kChunk}, 0);
  Forward fwd(**model, dev, 64);  // micro-batches of 64: the first eval splits too
  ASSERT_TRUE(fwd.set_adapters({adapter->get()}).ok());
  ASSERT_TRUE(fwd.set_adapter(0).ok());
  std::vector<int32_t> tokens(kTokens);
  for (int i = 0; i < kTokens; ++i) tokens[i] = (i * 37 + 11) % c.n_vocab;
  policy::KvSequence seq(store);
  std::vector<float> logits;
  ASSERT_TRUE(fwd.eval(seq, tokens, 0, false, logits).ok());
  const size_t bytes = store.geometry().chunk_bytes();
  std::vector<std::vector<uint8_t>> original;
  for (int ch = 0; ch < kTokens / kChunk; ++ch) original.emplace_back(seq.chunk_data(ch), seq.chunk_data(ch) + bytes);

  const int lost[] = {1, 3, 4};
  auto recompute = [&](int adapter_index) {
    std::vector<int32_t> ids, pos;
    for (int ch : lost) {
      seq.drop(ch);
      ASSERT_TRUE(seq.make_resident(ch).ok());
      std::memset(seq.chunk_data(ch), 0, bytes);
      for (int p = ch * kChunk; p < (ch + 1) * kChunk; ++p) ids.push_back(tokens[p]), pos.push_back(p);
    }
    ASSERT_TRUE(fwd.set_adapter(adapter_index).ok());
    ASSERT_TRUE(fwd.recompute(seq, ids, pos, kTokens).ok());
  };
  recompute(0);
  for (int ch = 0; ch < kTokens / kChunk; ++ch)
    EXPECT_EQ(std::memcmp(seq.chunk_data(ch), original[ch].data(), bytes), 0) << "chunk " << ch;
  recompute(-1);
  for (int ch : lost) EXPECT_NE(std::memcmp(seq.chunk_data(ch), original[ch].data(), bytes), 0) << "chunk " << ch;
}

}  // namespace
}  // namespace llmsvc
