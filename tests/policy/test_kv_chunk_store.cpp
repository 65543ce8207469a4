// SPDX-License-Identifier: Apache-2.0
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

// A chunk records the elastic level that computed its rows: the level of a computation that
// wrote it from its first row, the smaller one where older rows stay; it follows the content
// (release to a file and back, a fork's shared chunk, a restore).
TEST(KvChunkStore, ChunksRecordTheLevelThatComputedThem) {
  KvChunkStore store(kGeo, 0);
  KvSequence seq(store);
  ASSERT_TRUE(seq.reserve(12).ok());  // 3 chunks of 4
  EXPECT_EQ(seq.level(0), 100);       // nothing computed yet: the full model's
  seq.note_level(0, 6, 30);           // chunk 0 whole, chunk 1 from its start
  EXPECT_EQ(seq.level(0), 30);
  EXPECT_EQ(seq.level(1), 30);
  EXPECT_EQ(seq.level(2), 100);
  seq.note_level(6, 4, 80);           // chunk 1 keeps rows at 30: the smaller; chunk 2 from its start
  EXPECT_EQ(seq.level(1), 30);
  EXPECT_EQ(seq.level(2), 80);
  seq.note_level(4, 4, 60);           // chunk 1 computed again from its start
  EXPECT_EQ(seq.level(1), 60);
  seq.note_level(8, 1, 20);
  EXPECT_EQ(seq.level(2), 20);
  // Its file keeps the content and the level; a fork shares it.
  seq.mark_stored(0, seq.version(0));
  seq.release(0);
  ASSERT_EQ(seq.state(0), ChunkState::swapped);
  EXPECT_EQ(seq.level(0), 30);
  ASSERT_TRUE(seq.make_resident(0).ok());
  EXPECT_EQ(seq.level(0), 30);
  KvSequence fork(store);
  ASSERT_TRUE(fork.share_prefix(seq, 2).ok());
  EXPECT_EQ(fork.level(0), 30);
  EXPECT_EQ(fork.level(1), 60);
  // A restored sequence takes its table's levels (clamped to 1..100).
  KvSequence back(store);
  std::vector<KvSequence::RestoredChunk> table(2);
  table[0].level = 40;
  table[1].level = 0;
  ASSERT_TRUE(back.restore(table).ok());
  EXPECT_EQ(back.level(0), 40);
  EXPECT_EQ(back.level(1), 1);
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

// A share of the budget (a per-app quota): a claim past the share evicts the share's own
// chunks, even when another owner's are older; with only pinned chunks of the share left it
// is QUOTA_EXCEEDED. Shares change only while a sequence holds nothing.
TEST(KvChunkStore, ASharePassedEvictsItsOwnChunksOnly) {
  const size_t chunk = kGeo.chunk_bytes();
  KvChunkStore store(kGeo, 10 * chunk);
  auto app = store.make_share(3 * chunk);
  KvSequence other(store), mine1(store), mine2(store);
  ASSERT_TRUE(mine1.set_share(app).ok());
  ASSERT_TRUE(mine2.set_share(app).ok());
  store.pin(other);  // the least recently used of all
  ASSERT_TRUE(other.reserve(16).ok());  // 4 chunks, no share
  store.unpin(other);
  store.pin(mine1);
  ASSERT_TRUE(mine1.reserve(12).ok());  // 3 chunks: the share is full
  store.unpin(mine1);
  EXPECT_EQ(store.share_used(*app), 3 * chunk);
  store.pin(mine2);
  ASSERT_TRUE(mine2.reserve(8).ok());  // 2 chunks, both taken from mine1
  EXPECT_EQ(other.count(ChunkState::resident), 4) << "another owner's chunks were taken";
  EXPECT_EQ(mine1.count(ChunkState::resident), 1);
  EXPECT_EQ(store.share_used(*app), 3 * chunk);
  EXPECT_EQ(store.used_bytes(), 7 * chunk);
  // Only the requester and a pinned sequence of the share are left: over the share.
  store.pin(mine1);
  const Status s = mine2.reserve(12);
  EXPECT_EQ(s.code(), Code::quota_exceeded) << s.message();
  EXPECT_EQ(mine2.n_chunks(), 2);
  EXPECT_EQ(store.share_used(*app), 3 * chunk);
  store.unpin(mine1);
  // Freed memory leaves the share too.
  mine1.truncate(0);
  EXPECT_EQ(store.share_used(*app), 2 * chunk);
  EXPECT_EQ(mine2.set_share(nullptr).code(), Code::internal);  // it holds memory
  mine2.truncate(0);
  EXPECT_TRUE(mine2.set_share(nullptr).ok());
  EXPECT_EQ(store.share_used(*app), 0u);
  EXPECT_EQ(store.used_bytes(), 4 * chunk);
}

// Two idle sequences, a (used first, its chunks q8) and b (used later, f16), and a third
// that needs one chunk more than the budget has: which one loses a chunk.
struct OrderCase {
  KvChunkStore store;
  KvSequence a{store}, b{store}, c{store};
  explicit OrderCase(EvictionOrder order) : store(kGeo, 4 * kGeo.chunk_bytes(), order) {
    store.pin(a);
    EXPECT_TRUE(a.reserve(8).ok());
    EXPECT_TRUE(a.compress(0, hal::KvFormat::q8).ok());
    EXPECT_TRUE(a.compress(1, hal::KvFormat::q8).ok());
    store.unpin(a);
    store.pin(b);
    EXPECT_TRUE(b.reserve(8).ok());
    store.unpin(b);
    store.pin(c);
  }
};

TEST(KvChunkStore, EvictionOrders) {
  const size_t chunk = kGeo.chunk_bytes();
  {  // LCTRU: the least compressed go first, though b was used more recently.
    OrderCase t(EvictionOrder::lctru);
    ASSERT_TRUE(t.c.reserve(4).ok());
    EXPECT_EQ(t.b.count(ChunkState::resident), 1);
    EXPECT_EQ(t.a.count(ChunkState::resident), 2);
  }
  {  // LRU: a was used first, whatever its format.
    OrderCase t(EvictionOrder::lru);
    ASSERT_TRUE(t.c.reserve(4).ok());
    EXPECT_LT(t.a.count(ChunkState::resident), 2);
    EXPECT_EQ(t.b.count(ChunkState::resident), 2);
  }
  {  // Whole sequences: one chunk needed, all of the least recently used sequence leaves.
    KvChunkStore store(kGeo, 4 * chunk, EvictionOrder::whole_sequence);
    KvSequence a(store), b(store), c(store);
    for (KvSequence* s : {&a, &b}) {
      store.pin(*s);
      ASSERT_TRUE(s->reserve(8).ok());
      store.unpin(*s);
    }
    store.pin(c);
    ASSERT_TRUE(c.reserve(1).ok());
    EXPECT_EQ(a.count(ChunkState::resident), 0);
    EXPECT_EQ(a.count(ChunkState::dropped), 2);
    EXPECT_EQ(b.count(ChunkState::resident), 2);
    EXPECT_EQ(store.evictions(), 2u);
    EXPECT_EQ(store.used_bytes(), 3 * chunk);
  }
}

// Without a write-back hook (ahead-of-time swap-out) a chunk whose file is not current would
// be dropped, so chunks with a current file leave first, whatever their level: here a's q8
// chunk 1, though LCTRU alone takes b's f16 chunks first (EvictionOrders).
TEST(KvChunkStore, CurrentFilesLeaveFirstWithoutWriteBack) {
  OrderCase t(EvictionOrder::lctru);
  t.a.mark_stored(1, t.a.version(1));
  ASSERT_TRUE(t.c.reserve(4).ok());
  EXPECT_EQ(t.a.state(1), ChunkState::swapped);
  EXPECT_EQ(t.a.state(0), ChunkState::resident);
  EXPECT_EQ(t.b.count(ChunkState::resident), 2);
}

// Eviction's write-back: asked only for chunks without a current file; its answer decides
// swapped or dropped; clearing it stops the calls.
TEST(KvChunkStore, WriteBackDecidesSwappedOrDropped) {
  const size_t chunk = kGeo.chunk_bytes();
  KvChunkStore store(kGeo, 3 * chunk);
  KvSequence a(store), b(store);
  store.pin(a);
  ASSERT_TRUE(a.reserve(12).ok());  // 3 chunks
  a.mark_stored(1, a.version(1));   // chunk 1's file is current already
  store.unpin(a);
  std::vector<int> asked;
  a.set_write_back([&](int c) {
    asked.push_back(c);
    return c == 0;  // chunk 0 written, chunk 2's write fails
  });
  store.pin(b);
  ASSERT_TRUE(b.reserve(12).ok());  // evicts all three
  EXPECT_EQ(asked, (std::vector<int>{0, 2}));
  EXPECT_EQ(a.state(0), ChunkState::swapped);
  EXPECT_TRUE(a.disk_current(0));
  EXPECT_EQ(a.state(1), ChunkState::swapped);
  EXPECT_EQ(a.state(2), ChunkState::dropped);
  store.unpin(b);
  a.set_write_back(nullptr);
  store.pin(a);
  ASSERT_TRUE(a.make_resident(2).ok());  // evicts one of b's: b has no hook, so dropped
  EXPECT_EQ(b.count(ChunkState::dropped), 1);
  EXPECT_EQ(asked.size(), 2u);
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
