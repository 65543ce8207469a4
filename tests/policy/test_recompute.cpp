// SPDX-License-Identifier: Apache-2.0
// Forward::recompute on the default model: dropped chunks come back bit for bit when their
// tokens were first evaluated in a batch (recompute's own summation order), and the layer
// hook lets chunks that are loaded while the recompute runs arrive just in time (the
// swap-recompute pipeline's contract), layer by layer.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#include "hal/cpu/cpu_device.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/model.h"
#include "tests/common/test_paths.h"

namespace llmsvc {
namespace {

constexpr int kChunk = 16;
constexpr int kTokens = 96;  // 6 chunks

class Recompute : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(test::default_model_path())) << "run tools/scripts/fetch_model.sh";
    dev_ = std::make_unique<hal::cpu::CpuDevice>(2);
    auto m = Model::load(test::default_model_path(), *dev_);
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = std::move(*m);
    const ModelConfig& c = model_->config();
    store_ = std::make_unique<policy::KvChunkStore>(policy::KvGeometry{c.n_layer, c.n_head_kv, c.head_dim, kChunk}, 0);
    fwd_ = std::make_unique<Forward>(*model_, *dev_, 64);  // micro-batches of 64: recompute splits too
    std::ifstream in(test::data_dir() + "/golden/ppl_text.txt", std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    tokens_ = model_->tokenizer().encode(text, true, false);
    ASSERT_GE(static_cast<int>(tokens_.size()), kTokens);
    tokens_.resize(kTokens);
    seq_ = std::make_unique<policy::KvSequence>(*store_);
    std::vector<float> logits;
    ASSERT_TRUE(fwd_->eval(*seq_, tokens_, 0, false, logits).ok());
    for (int c = 0; c < kTokens / kChunk; ++c) original_.emplace_back(chunk(c), chunk(c) + chunk_bytes());
  }

  size_t chunk_bytes() const { return store_->geometry().chunk_bytes(); }
  size_t layer_bytes() const { return store_->geometry().layer_bytes(hal::KvFormat::f16); }
  uint8_t* chunk(int c) { return seq_->chunk_data(c); }
  bool same(int c) { return std::memcmp(chunk(c), original_[c].data(), chunk_bytes()) == 0; }

  // Drops chunks `cs` and makes them resident again, zeroed.
  void lose(std::initializer_list<int> cs) {
    for (int c : cs) {
      seq_->drop(c);
      ASSERT_TRUE(seq_->make_resident(c).ok());
      std::memset(chunk(c), 0, chunk_bytes());
    }
  }
  // Tokens and positions of chunks `cs`.
  void inputs(std::initializer_list<int> cs, std::vector<int32_t>& ids, std::vector<int32_t>& pos) {
    for (int c : cs)
      for (int p = c * kChunk; p < (c + 1) * kChunk; ++p) {
        ids.push_back(tokens_[p]);
        pos.push_back(p);
      }
  }

  std::unique_ptr<hal::cpu::CpuDevice> dev_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<policy::KvChunkStore> store_;
  std::unique_ptr<Forward> fwd_;
  std::unique_ptr<policy::KvSequence> seq_;
  std::vector<int32_t> tokens_;
  std::vector<std::vector<uint8_t>> original_;
};

TEST_F(Recompute, InterleavedDroppedChunksComeBackBitForBit) {
  lose({1, 3, 4});
  std::vector<int32_t> ids, pos;
  inputs({1, 3, 4}, ids, pos);
  ASSERT_TRUE(fwd_->recompute(*seq_, ids, pos, kTokens).ok());
  for (int c = 0; c < kTokens / kChunk; ++c) EXPECT_TRUE(same(c)) << "chunk " << c;
}

TEST_F(Recompute, ChunksLoadedLayerByLayerArriveInTime) {
  // Chunk 2 "loads" while chunks 3 and 5 (which attend to it) recompute: the hook copies its
  // layer il just before layer il runs.
  lose({2, 3, 5});
  std::vector<int32_t> ids, pos;
  inputs({3, 5}, ids, pos);
  std::vector<int> calls;
  const auto hook = [&](int il) {
    calls.push_back(il);
    std::memcpy(chunk(2) + il * layer_bytes(), original_[2].data() + il * layer_bytes(), layer_bytes());
    return Status::Ok();
  };
  ASSERT_TRUE(fwd_->recompute(*seq_, ids, pos, kTokens, hook).ok());
  for (int c = 0; c < kTokens / kChunk; ++c) EXPECT_TRUE(same(c)) << "chunk " << c;
  ASSERT_EQ(static_cast<int>(calls.size()), model_->config().n_layer) << "once per layer, first micro-batch only";
  for (int il = 0; il < static_cast<int>(calls.size()); ++il) EXPECT_EQ(calls[il], il);
}

TEST_F(Recompute, LateDataChangesTheResultAndHookErrorsStop) {
  // The same as above with chunk 2's layers arriving one layer late: what the test above
  // proves is then visibly wrong (so that test can fail).
  lose({2, 3});
  std::vector<int32_t> ids, pos;
  inputs({3}, ids, pos);
  const auto late = [&](int il) {
    if (il > 0) std::memcpy(chunk(2) + (il - 1) * layer_bytes(), original_[2].data() + (il - 1) * layer_bytes(), layer_bytes());
    return Status::Ok();
  };
  ASSERT_TRUE(fwd_->recompute(*seq_, ids, pos, kTokens, late).ok());
  EXPECT_FALSE(same(3));

  int seen = 0;
  const auto failing = [&](int il) {
    ++seen;
    return il == 3 ? Status(Code::io, "layer 3 unreadable") : Status::Ok();
  };
  const Status s = fwd_->recompute(*seq_, ids, pos, kTokens, failing);
  EXPECT_EQ(s.code(), Code::io);
  EXPECT_EQ(seen, 4);
}

}  // namespace
}  // namespace llmsvc
