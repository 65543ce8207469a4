// KvChunkStore / KvSequence: exact accounting, LCTRU eviction order, working-set pins,
// addressing of blocks and rows, density bookkeeping.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "policy/kv_chunk_store.h"

namespace llmsvc::policy {
namespace {

const KvGeometry kGeo{2, 2, 8, 4};  // 2 layers, 2 kv heads of 8, chunks of 4 tokens

TEST(KvChunkStore, AccountsEveryByte) {
  KvChunkStore store(kGeo, 0);
  const size_t chunk = kGeo.chunk_bytes();
  EXPECT_EQ(chunk, size_t{2} * 2 * 4 * 16 * 2);  // layers x (K,V) x tokens x kv_dim x f16
  {
    KvSequence seq(store);
    ASSERT_TRUE(seq.reserve(9).ok());  // 3 chunks
    EXPECT_EQ(seq.n_chunks(), 3);
    EXPECT_EQ(store.used_bytes(), 3 * chunk);
    EXPECT_EQ(seq.resident_bytes(), 3 * chunk);
    seq.truncate(4);
    EXPECT_EQ(seq.n_chunks(), 1);
    EXPECT_EQ(store.used_bytes(), chunk);
    seq.drop(0);
    EXPECT_EQ(store.used_bytes(), 0u);
    EXPECT_EQ(seq.state(0), ChunkState::dropped);
    ASSERT_TRUE(seq.make_resident(0).ok());
    EXPECT_EQ(store.used_bytes(), chunk);
  }
  EXPECT_EQ(store.used_bytes(), 0u);
}

TEST(KvChunkStore, RowsAndBlocksAddressTheLayout) {
  KvChunkStore store(kGeo, 0);
  KvSequence seq(store);
  ASSERT_TRUE(seq.reserve(8).ok());
  // Position 5 = chunk 1, token 1; layer 1's K block starts after layer 0's K and V.
  const auto* base = reinterpret_cast<const uint16_t*>(seq.chunk_data(1));
  const size_t block = size_t(4) * 16;  // halves per block
  EXPECT_EQ(seq.k(1, 5), base + 2 * block + 16);
  EXPECT_EQ(seq.v(1, 5), base + 3 * block + 16);
  EXPECT_EQ(seq.block(1, 1, hal::KvPart::key), base + 2 * block);
}

TEST(KvChunkStore, BudgetEvictsIdleSequencesLeastRecentlyUsedFirst) {
  const size_t chunk = kGeo.chunk_bytes();
  KvChunkStore store(kGeo, 4 * chunk);
  KvSequence a(store), b(store), c(store);
  store.pin(a);
  ASSERT_TRUE(a.reserve(8).ok());  // 2 chunks
  store.unpin(a);
  store.pin(b);
  ASSERT_TRUE(b.reserve(8).ok());  // 2 chunks: the budget is full
  store.unpin(b);
  store.pin(c);
  ASSERT_TRUE(c.reserve(4).ok());  // evicts from a (least recently used), not b
  EXPECT_EQ(a.count(ChunkState::dropped), 1);
  EXPECT_EQ(b.count(ChunkState::resident), 2);
  EXPECT_EQ(store.used_bytes(), 4 * chunk);
  EXPECT_EQ(store.evictions(), 1u);
  // The requester's own chunks are never taken for it; pinned b is untouchable too.
  store.pin(b);
  ASSERT_TRUE(c.reserve(8).ok());  // takes a's last chunk
  EXPECT_EQ(a.count(ChunkState::resident), 0);
  const Status s = c.reserve(12);  // only pinned chunks left
  EXPECT_EQ(s.code(), Code::out_of_memory);
  EXPECT_EQ(b.count(ChunkState::resident), 2);
  EXPECT_EQ(c.n_chunks(), 2);  // a failed reserve adds nothing
  EXPECT_LE(store.used_bytes(), 4 * chunk);
}

TEST(KvChunkStore, DensityIsMassPerObservingQuery) {
  KvChunkStore store(kGeo, 0);
  KvSequence seq(store);
  ASSERT_TRUE(seq.reserve(8).ok());
  seq.note_queries(0, 8);  // causal prefill of 8: position p is seen by 8 - p queries
  for (int t = 0; t < 4; ++t) seq.mass(0)[t] = 1.0f;
  for (int t = 0; t < 4; ++t) seq.mass(1)[t] = 1.0f;
  // chunk 0: mass 4 over 8+7+6+5 = 26 views; chunk 1: mass 4 over 4+3+2+1 = 10.
  EXPECT_DOUBLE_EQ(seq.density(0), 4.0 / 26.0);
  EXPECT_DOUBLE_EQ(seq.density(1), 4.0 / 10.0);
  seq.note_queries(8, 0);
  EXPECT_DOUBLE_EQ(seq.density(1), 4.0 / 10.0);
}

}  // namespace
}  // namespace llmsvc::policy
