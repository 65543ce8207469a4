// SPDX-License-Identifier: Apache-2.0
// KV swap of a sequence (policy/swap/kv_swap.h) and swap currency in the chunk store: changed
// chunks are written (the partial tail too), current ones are not; evicting a chunk with a
// current file makes it swapped, without one dropped; loads give back the same bytes; a
// file for another history or prefix is refused; restore starts a sequence from storage.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "policy/planning/switch_planner.h"
#include "policy/swap/kv_swap.h"
#include "tests/policy/swap_test_util.h"

namespace llmsvc::policy {
namespace {

const KvGeometry kGeo{2, 2, 8, 4};  // 2 layers, 2 kv heads of 8, chunks of 4 tokens
constexpr uint64_t kModel = 0x1234;

void fill(KvSequence& seq, int c, uint8_t seed) {
  uint8_t* p = seq.chunk_data(c);
  for (size_t i = 0; i < kGeo.chunk_bytes(seq.format(c)); ++i) p[i] = static_cast<uint8_t>(seed + i * 7);
}

std::vector<uint8_t> bytes_of(const KvSequence& seq, int c) {
  const uint8_t* p = seq.chunk_data(c);
  return {p, p + kGeo.chunk_bytes(seq.format(c))};
}

struct Stored {
  std::vector<int> chunks;
  int failures = 0;
};

class KvSwap : public ::testing::Test {
 protected:
  void SetUp() override {
    auto io = SwapIo::create();
    ASSERT_TRUE(io.ok());
    io_ = std::move(io).value();
    auto store = SwapStore::open(*io_, dir_.path() + "/chunks");
    ASSERT_TRUE(store.ok());
    swap_ = std::move(store).value();
  }
  // Swaps out and waits for the writes.
  Stored swap_out(KvSequence& seq, const std::vector<int32_t>& tokens, int n_valid) {
    Stored st;
    auto q = store_changed_chunks(seq, *swap_, kModel, tokens, n_valid, [&st](int c, uint64_t bytes, const Status& s) {
      if (s.ok() && bytes > 0) st.chunks.push_back(c);
      else st.failures++;
    });
    EXPECT_TRUE(q.ok()) << q.status().message();
    io_->flush();
    return st;
  }
  test::ScratchDir dir_;
  std::unique_ptr<SwapIo> io_;
  std::unique_ptr<SwapStore> swap_;
};

TEST_F(KvSwap, ChangedChunksAreWrittenAndLoadBackTheSameBytes) {
  KvChunkStore store(kGeo, 0);
  KvSequence seq(store);
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  ASSERT_TRUE(seq.reserve(10).ok());  // chunks 0, 1 full; 2 holds 2 evaluated positions
  for (int c = 0; c < 3; ++c) fill(seq, c, static_cast<uint8_t>(c * 31));
  ASSERT_TRUE(seq.compress(1, hal::KvFormat::q4).ok());
  fill(seq, 1, 99);
  const std::vector<uint8_t> b0 = bytes_of(seq, 0), b1 = bytes_of(seq, 1), b2 = bytes_of(seq, 2);

  Stored st = swap_out(seq, tokens, 10);
  EXPECT_EQ(st.chunks, (std::vector<int>{0, 1, 2}));
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(seq.disk_current(c)) << c;
  EXPECT_EQ(swap_out(seq, tokens, 10).chunks.size(), 0u);  // nothing changed: nothing written

  // A row handed out for writing changes the chunk: only it is written again.
  (void)seq.k(0, 9);
  EXPECT_FALSE(seq.disk_current(2));
  EXPECT_EQ(swap_out(seq, tokens, 10).chunks, (std::vector<int>{2}));

  for (int c = 0; c < 3; ++c) seq.release(c);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(seq.state(c), ChunkState::swapped) << c;
  EXPECT_EQ(store.used_bytes(), 0u);
  EXPECT_EQ(seq.format(1), hal::KvFormat::q4);

  const std::vector<int> which = {0, 1, 2};
  for (int c : which) ASSERT_TRUE(seq.make_resident(c, seq.format(c)).ok());
  std::vector<Status> res = load_chunks(seq, *swap_, kModel, tokens, 10, which);
  for (const Status& s : res) EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(bytes_of(seq, 0), b0);
  EXPECT_EQ(bytes_of(seq, 1), b1);
  // The partial chunk: its evaluated rows (2 of 4) in each block.
  const size_t rows = 2 * size_t(kGeo.kv_dim()) * 2, block = 4 * size_t(kGeo.kv_dim()) * 2;
  const std::vector<uint8_t> got2 = bytes_of(seq, 2);
  for (size_t b = 0; b < 4; ++b)
    EXPECT_EQ(std::memcmp(got2.data() + b * block, b2.data() + b * block, rows), 0) << "block " << b;
  for (int c : which) EXPECT_TRUE(seq.disk_current(c)) << c;  // loaded: the files are current
}

// More chunks than a load batch holds (16), loaded out of order: each batch is read while the
// one before is decoded, and every result lands on its own chunk, a damaged file's too.
TEST_F(KvSwap, LoadsSpanningSeveralBatchesKeepEachChunksResult) {
  KvChunkStore store(kGeo, 0);
  KvSequence seq(store);
  constexpr int kTokens = 4 * 40 + 3;  // 40 full chunks and a partial tail
  std::vector<int32_t> tokens(kTokens);
  for (int i = 0; i < kTokens; ++i) tokens[i] = i + 1;
  ASSERT_TRUE(seq.reserve(kTokens).ok());
  const int n = seq.n_chunks();
  ASSERT_EQ(n, 41);
  std::vector<std::vector<uint8_t>> before;
  for (int c = 0; c < n; ++c) {
    fill(seq, c, static_cast<uint8_t>(c * 13));
    if (c % 3 == 1 && c < 40) {
      ASSERT_TRUE(seq.compress(c, hal::KvFormat::q8).ok());
    }
    before.push_back(bytes_of(seq, c));
  }
  ASSERT_EQ(swap_out(seq, tokens, kTokens).chunks.size(), size_t(n));
  for (int c = 0; c < n; ++c) seq.release(c);
  // Chunk 21 (in the second batch) damaged on storage: one byte flipped near its end.
  const std::string bad = swap_->path(21);
  std::vector<uint8_t> file = test::read_file(bad);
  file[file.size() - 5] ^= 0x40;
  test::write_file(bad, file);

  std::vector<int> which;
  for (int c = n - 1; c >= 0; --c) which.push_back(c);  // reversed: results follow `which`
  for (int c : which) ASSERT_TRUE(seq.make_resident(c, seq.format(c)).ok());
  std::vector<Status> res = load_chunks(seq, *swap_, kModel, tokens, kTokens, which);
  ASSERT_EQ(res.size(), which.size());
  for (size_t i = 0; i < which.size(); ++i) {
    const int c = which[i];
    if (c == 21) {
      EXPECT_EQ(res[i].code(), Code::io) << res[i].message();
      continue;
    }
    ASSERT_TRUE(res[i].ok()) << c << ": " << res[i].message();
    if (c == 40) {  // the tail: its 3 evaluated rows of each block
      const size_t rows = 3 * size_t(kGeo.kv_dim()) * 2, block = 4 * size_t(kGeo.kv_dim()) * 2;
      const std::vector<uint8_t> got = bytes_of(seq, c);
      for (size_t b = 0; b < 4; ++b)
        EXPECT_EQ(std::memcmp(got.data() + b * block, before[c].data() + b * block, rows), 0) << "block " << b;
    } else {
      EXPECT_EQ(bytes_of(seq, c), before[c]) << c;
    }
  }
}

TEST_F(KvSwap, FilesOfAnotherHistoryOrModelAreRefused) {
  KvChunkStore store(kGeo, 0);
  KvSequence seq(store);
  std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE(seq.reserve(8).ok());
  fill(seq, 0, 1);
  fill(seq, 1, 2);
  ASSERT_EQ(swap_out(seq, tokens, 8).chunks.size(), 2u);
  const std::vector<int> which = {0, 1};
  // Chunk 0's tokens differ: both chunks' hashes differ (chained), both refused.
  std::vector<int32_t> other = tokens;
  other[0] = 42;
  std::vector<Status> res = load_chunks(seq, *swap_, kModel, other, 8, which);
  EXPECT_EQ(res[0].code(), Code::io);
  EXPECT_EQ(res[1].code(), Code::io);
  // Another model.
  res = load_chunks(seq, *swap_, kModel + 1, tokens, 8, which);
  EXPECT_EQ(res[0].code(), Code::io);
  // Fewer evaluated positions than the file holds: chunk 1 is stale, chunk 0 good.
  res = load_chunks(seq, *swap_, kModel, tokens, 6, which);
  EXPECT_TRUE(res[0].ok()) << res[0].message();
  EXPECT_EQ(res[1].code(), Code::io);
}

TEST_F(KvSwap, EvictionSwapsChunksWithCurrentFilesAndDropsTheRest) {
  const size_t chunk = kGeo.chunk_bytes();
  KvChunkStore store(kGeo, 3 * chunk);
  KvSequence a(store), b(store);
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  store.pin(a);
  ASSERT_TRUE(a.reserve(8).ok());
  fill(a, 0, 1);
  fill(a, 1, 2);
  ASSERT_EQ(swap_out(a, tokens, 8).chunks.size(), 2u);
  (void)a.v(1, 5);  // chunk 1 changes after its write
  store.unpin(a);
  store.pin(b);
  ASSERT_TRUE(b.reserve(12).ok());  // takes both of a's chunks
  EXPECT_EQ(a.state(0), ChunkState::swapped);
  EXPECT_EQ(a.state(1), ChunkState::dropped);
  EXPECT_EQ(store.peak_bytes(), 3 * chunk);
  const KvSequence::Counts n = a.counts();
  EXPECT_EQ(n.swapped, 1);
  EXPECT_EQ(n.dropped, 1);
  EXPECT_EQ(n.resident(), 0);
}

TEST_F(KvSwap, StaleWriteCallbacksNeverMarkAReplacedChunk) {
  KvChunkStore store(kGeo, 0);
  KvSequence seq(store);
  ASSERT_TRUE(seq.reserve(4).ok());
  const uint64_t old_version = seq.version(0);
  seq.truncate(0);
  ASSERT_TRUE(seq.reserve(4).ok());  // a new chunk 0
  seq.mark_stored(0, old_version);   // the old chunk's write completing late
  EXPECT_FALSE(seq.disk_current(0));
  seq.mark_stored(7, 1);             // a chunk index that no longer exists: ignored
}

TEST(KvSequenceRestore, StartsFromStorage) {
  KvChunkStore store(kGeo, 0);
  KvSequence seq(store);
  std::vector<KvSequence::RestoredChunk> chunks(2);
  chunks[0].format = hal::KvFormat::q4;
  chunks[0].on_disk = true;
  chunks[0].mass = {1, 2, 3, 4};
  chunks[0].seen = {2, 2, 2, 2};
  ASSERT_TRUE(seq.restore(chunks).ok());
  EXPECT_EQ(seq.n_chunks(), 2);
  EXPECT_EQ(seq.state(0), ChunkState::swapped);
  EXPECT_EQ(seq.format(0), hal::KvFormat::q4);
  EXPECT_EQ(seq.state(1), ChunkState::dropped);
  EXPECT_DOUBLE_EQ(seq.density(0), 10.0 / 8.0);
  EXPECT_EQ(store.used_bytes(), 0u);
  EXPECT_FALSE(seq.restore(chunks).ok());  // only into an empty sequence
}

TEST(SwitchInPlan, ByStateLoadsWhatHasAFileAndRecomputesTheRest) {
  const std::vector<MissingChunk> missing = {{3, 5, true, 1000}, {0, 16, true, 2000}, {2, 16, false, 0}};
  const SwitchPlan p = plan_by_state(missing);
  EXPECT_EQ(p.load, (std::vector<int>{0, 3}));
  EXPECT_EQ(p.recompute, (std::vector<int>{2}));
}

}  // namespace
}  // namespace llmsvc::policy
