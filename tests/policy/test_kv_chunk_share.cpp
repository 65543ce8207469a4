// SPDX-License-Identifier: Apache-2.0
// KvSequence::share_prefix (forks): shared chunks cost their bytes once, survive any holder's
// end, leave memory only when no holder is pinned (for every holder, each by its own file),
// come back detached, are never kept partly by truncate, and compress in place for all.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "policy/kv_chunk_store.h"

namespace llmsvc::policy {
namespace {
namespace chunk_share {  // its own names beside the other files of its unity batch

const KvGeometry kGeo{2, 2, 8, 4};  // 2 layers, 2 kv heads of 8, chunks of 4 tokens

void fill(KvSequence& s, int c, uint16_t v) {
  auto* p = reinterpret_cast<uint16_t*>(s.chunk_data(c));
  for (size_t i = 0; i < kGeo.chunk_bytes() / 2; ++i) p[i] = static_cast<uint16_t>(v + (i % 7));
}

TEST(KvChunkShare, SharedChunksCostTheirBytesOnceAndOutliveTheParent) {
  const size_t chunk = kGeo.chunk_bytes();
  KvChunkStore store(kGeo, 0);
  auto parent = std::make_unique<KvSequence>(store);
  ASSERT_TRUE(parent->reserve(14).ok());  // 4 chunks, the last partial
  for (int c = 0; c < 4; ++c) fill(*parent, c, static_cast<uint16_t>(100 * c));
  parent->mass(1)[2] = 0.5f;
  KvSequence a(store), b(store);
  ASSERT_TRUE(a.share_prefix(*parent, 3).ok());
  ASSERT_TRUE(b.share_prefix(*parent, 3).ok());
  EXPECT_EQ(store.used_bytes(), 4 * chunk);  // nothing new
  EXPECT_EQ(a.counts().shared, 3);
  EXPECT_EQ(parent->counts().shared, 3);
  EXPECT_EQ(a.resident_bytes(), 3 * chunk);  // each holder's figure counts them
  EXPECT_EQ(a.token_mass(1)[2], 0.5f);       // bookkeeping copied, then its own
  a.mass(1)[2] = 2.0f;
  EXPECT_EQ(parent->token_mass(1)[2], 0.5f);
  EXPECT_EQ(a.chunk_data(2), parent->chunk_data(2));
  // The forks grow by their own chunks only.
  ASSERT_TRUE(a.reserve(16).ok());
  ASSERT_TRUE(b.reserve(20).ok());
  EXPECT_EQ(store.used_bytes(), (4 + 1 + 2) * chunk);
  std::vector<uint8_t> before(a.chunk_data(1), a.chunk_data(1) + chunk);
  parent.reset();  // its partial chunk goes; the shared ones stay with a and b
  EXPECT_EQ(store.used_bytes(), (3 + 1 + 2) * chunk);
  EXPECT_EQ(std::memcmp(before.data(), a.chunk_data(1), chunk), 0);
  EXPECT_EQ(a.counts().shared, 3);  // still a and b
  b.truncate(0);
  EXPECT_EQ(a.counts().shared, 0);
  EXPECT_EQ(store.used_bytes(), 4 * chunk);
  EXPECT_EQ(std::memcmp(before.data(), a.chunk_data(1), chunk), 0);
}

TEST(KvChunkShare, OnlyResidentChunksAreShared) {
  KvChunkStore store(kGeo, 0);
  KvSequence parent(store), child(store);
  ASSERT_TRUE(parent.reserve(12).ok());
  parent.drop(1);
  ASSERT_TRUE(child.share_prefix(parent, 3).ok());
  EXPECT_EQ(child.state(0), ChunkState::resident);
  EXPECT_EQ(child.state(1), ChunkState::dropped);  // recomputed at its switch-in
  EXPECT_EQ(child.counts().shared, 2);
  KvSequence again(store);
  EXPECT_EQ(child.share_prefix(parent, 3).code(), Code::internal);  // not empty
  EXPECT_EQ(again.share_prefix(parent, 4).code(), Code::internal);  // more than it holds
}

TEST(KvChunkShare, EvictionTakesASharedChunkOnlyWhenNoHolderIsPinned) {
  const size_t chunk = kGeo.chunk_bytes();
  KvChunkStore store(kGeo, 4 * chunk);
  KvSequence parent(store), child(store), other(store);
  ASSERT_TRUE(parent.reserve(8).ok());  // 2 chunks
  ASSERT_TRUE(child.share_prefix(parent, 2).ok());
  ASSERT_TRUE(child.reserve(12).ok());  // + 1 of its own: 3 of 4 chunks' bytes
  parent.mark_stored(0, parent.version(0));  // the parent's file holds chunk 0, the child's none
  store.pin(child);
  store.pin(other);
  ASSERT_TRUE(other.reserve(4).ok());  // fits
  const Status full = other.reserve(8);  // only chunks a pinned holder holds are left
  EXPECT_EQ(full.code(), Code::out_of_memory);
  EXPECT_EQ(parent.count(ChunkState::resident), 2);
  EXPECT_TRUE(child.held_elsewhere(0) == false);  // the parent is not pinned
  store.pin(parent);
  EXPECT_TRUE(child.held_elsewhere(0));
  store.unpin(parent);
  store.unpin(child);
  ASSERT_TRUE(other.reserve(12).ok());  // takes two: the child's own first (f16, same age) or a shared one
  ASSERT_TRUE(other.reserve(16).ok());
  EXPECT_EQ(store.used_bytes(), 4 * chunk);
  // Whatever went, every holder of a shared chunk that left sees it gone, each by its file.
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(parent.state(c) == ChunkState::resident, child.state(c) == ChunkState::resident) << c;
    if (parent.state(c) != ChunkState::resident) {
      EXPECT_EQ(parent.state(c), c == 0 ? ChunkState::swapped : ChunkState::dropped);
      EXPECT_EQ(child.state(c), ChunkState::dropped);
    }
  }
}

TEST(KvChunkShare, BringingBackOrDroppingDetaches) {
  const size_t chunk = kGeo.chunk_bytes();
  KvChunkStore store(kGeo, 0);
  KvSequence parent(store), child(store);
  ASSERT_TRUE(parent.reserve(8).ok());
  ASSERT_TRUE(child.share_prefix(parent, 2).ok());
  child.drop(0);  // the child's view only
  EXPECT_EQ(parent.state(0), ChunkState::resident);
  EXPECT_EQ(child.state(0), ChunkState::dropped);
  EXPECT_EQ(store.used_bytes(), 2 * chunk);
  ASSERT_TRUE(child.make_resident(0).ok());  // its own memory now
  EXPECT_NE(child.chunk_data(0), parent.chunk_data(0));
  EXPECT_EQ(store.used_bytes(), 3 * chunk);
  EXPECT_EQ(child.counts().shared, 1);
  child.release(1);  // no file: dropped, for the child only
  EXPECT_EQ(child.state(1), ChunkState::dropped);
  EXPECT_EQ(parent.state(1), ChunkState::resident);
  EXPECT_EQ(store.used_bytes(), 3 * chunk);
}

TEST(KvChunkShare, TruncateNeverKeepsASharedChunkPartly) {
  const size_t chunk = kGeo.chunk_bytes();
  KvChunkStore store(kGeo, 0);
  KvSequence parent(store), child(store);
  ASSERT_TRUE(parent.reserve(8).ok());
  ASSERT_TRUE(child.share_prefix(parent, 2).ok());
  EXPECT_EQ(child.truncate(6), 4);  // inside shared chunk 1: it goes whole
  EXPECT_EQ(child.n_chunks(), 1);
  EXPECT_EQ(parent.n_chunks(), 2);
  EXPECT_EQ(store.used_bytes(), 2 * chunk);
  EXPECT_EQ(parent.truncate(6), 6);  // chunk 1 is the parent's alone now: kept partly
  EXPECT_EQ(parent.truncate(2), 0);  // chunk 0 is still shared
  KvSequence own(store);
  ASSERT_TRUE(own.reserve(8).ok());
  EXPECT_EQ(own.truncate(6), 6);  // an unshared resident f16 chunk is kept partly
}

TEST(KvChunkShare, CompressionNarrowsASharedChunkForEveryHolder) {
  const size_t chunk = kGeo.chunk_bytes();
  KvChunkStore store(kGeo, 0);
  KvSequence parent(store), child(store);
  ASSERT_TRUE(parent.reserve(8).ok());
  fill(parent, 0, 0x3c00);
  ASSERT_TRUE(child.share_prefix(parent, 2).ok());
  ASSERT_TRUE(child.compress(0, hal::KvFormat::q8).ok());
  EXPECT_EQ(parent.format(0), hal::KvFormat::q8);
  EXPECT_EQ(child.chunk_data(0), parent.chunk_data(0));
  EXPECT_EQ(store.used_bytes(), chunk + kGeo.chunk_bytes(hal::KvFormat::q8));
  EXPECT_EQ(child.counts().q8, 1);
  EXPECT_EQ(parent.counts().q8, 1);
}

TEST(KvChunkShare, SharedBytesStayChargedToTheShareThatClaimedThem) {
  const size_t chunk = kGeo.chunk_bytes();
  KvChunkStore store(kGeo, 0);
  auto app = store.make_share(8 * chunk);
  auto parent = std::make_unique<KvSequence>(store);
  KvSequence child(store);
  ASSERT_TRUE(parent->set_share(app).ok());
  ASSERT_TRUE(child.set_share(app).ok());
  ASSERT_TRUE(parent->reserve(8).ok());
  ASSERT_TRUE(child.share_prefix(*parent, 2).ok());
  EXPECT_EQ(store.share_used(*app), 2 * chunk);
  parent.reset();
  EXPECT_EQ(store.share_used(*app), 2 * chunk);  // the child holds them now
  child.truncate(0);
  EXPECT_EQ(store.share_used(*app), 0u);
  EXPECT_EQ(store.used_bytes(), 0u);
}

}  // namespace chunk_share
}  // namespace
}  // namespace llmsvc::policy
