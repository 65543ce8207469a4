// SPDX-License-Identifier: Apache-2.0
// SwapStore: chunks stored and read back whole or layer by layer (batched, pipelined), on
// both read engines and all codecs; damaged, stale, truncated, missing and replaced files
// come back as per-chunk statuses.
#include "policy/swap/swap_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <thread>
#include <tuple>

#include "tests/common/kv_synth.h"
#include "tests/policy/swap_test_util.h"

namespace llmsvc::policy {
namespace {

using hal::KvFormat;
using test::make_meta;
using test::ScratchDir;
using test::synth_chunk_payload;

struct Chunk {
  ChunkMeta meta;
  std::vector<uint8_t> payload;
};

std::vector<Chunk> make_chunks(int n, KvFormat f, uint16_t n_layer = 6) {
  std::vector<Chunk> out;
  for (int i = 0; i < n; ++i) {
    Chunk c{make_meta(static_cast<uint32_t>(i), f, n_layer, 2, 32), {}};
    c.payload = synth_chunk_payload(c.meta, static_cast<uint32_t>(i));
    out.push_back(std::move(c));
  }
  return out;
}

class SwapStoreTest : public ::testing::TestWithParam<std::tuple<ReaderKind, ChunkCodec>> {
 protected:
  void SetUp() override {
    auto io = SwapIo::create({std::get<0>(GetParam()), 64, 4, {}});
    ASSERT_TRUE(io.ok()) << io.status().message();
    io_ = std::move(io).value();
    auto store = SwapStore::open(*io_, dir_.file("ctx"), {std::get<1>(GetParam()), 3});
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(store).value();
  }

  // Stores every chunk asynchronously and returns their indices.
  std::vector<ChunkIndex> store_all(const std::vector<Chunk>& chunks) {
    std::vector<std::promise<Result<ChunkIndex>>> done(chunks.size());
    for (size_t i = 0; i < chunks.size(); ++i) {
      Status s = store_->store_async(chunks[i].meta, chunks[i].payload,
                                     [&done, i](Result<ChunkIndex> r) { done[i].set_value(std::move(r)); });
      EXPECT_TRUE(s.ok()) << s.message();
    }
    std::vector<ChunkIndex> out;
    for (auto& d : done) {
      auto r = d.get_future().get();
      EXPECT_TRUE(r.ok()) << r.status().message();
      out.push_back(r.ok() ? std::move(r).value() : ChunkIndex{});
    }
    return out;
  }

  ScratchDir dir_;
  std::unique_ptr<SwapIo> io_;
  std::unique_ptr<SwapStore> store_;
};

TEST_P(SwapStoreTest, ChunksComeBackWholeAndLayerByLayer) {
  for (KvFormat f : {KvFormat::f16, KvFormat::q8, KvFormat::q4, KvFormat::q3, KvFormat::q2}) {
    const auto chunks = make_chunks(12, f);
    const auto stored = store_all(chunks);
    std::vector<ChunkMeta> metas;
    for (const Chunk& c : chunks) metas.push_back(c.meta);
    auto indices = store_->read_indices(metas);
    ASSERT_EQ(indices.size(), chunks.size());
    for (size_t i = 0; i < chunks.size(); ++i) {
      ASSERT_TRUE(indices[i].ok()) << indices[i].status().message();
      EXPECT_EQ(indices[i]->meta, chunks[i].meta);
      EXPECT_EQ(indices[i]->file_size, stored[i].file_size);
      EXPECT_EQ(indices[i]->frames.size(), stored[i].frames.size());
      EXPECT_EQ(indices[i]->frames.back().raw_hash, stored[i].frames.back().raw_hash);
    }
    const size_t layer = indices[0]->layer_bytes();
    for (int l = 0; l < chunks[0].meta.n_layer; ++l) {
      std::vector<std::vector<uint8_t>> outs(chunks.size(), std::vector<uint8_t>(layer));
      std::vector<LayerTarget> targets;
      for (size_t i = 0; i < chunks.size(); ++i) targets.push_back({&*indices[i], outs[i]});
      auto st = store_->read_layer(l, targets);
      ASSERT_EQ(st.size(), chunks.size());
      for (size_t i = 0; i < chunks.size(); ++i) {
        ASSERT_TRUE(st[i].ok()) << st[i].message();
        EXPECT_EQ(0, std::memcmp(outs[i].data(), chunks[i].payload.data() + l * layer, layer)) << i << " " << l;
      }
    }
    for (const Chunk& c : chunks) {
      std::vector<uint8_t> out(c.payload.size());
      auto r = store_->read_chunk(c.meta, out);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(out, c.payload);
    }
  }
  auto listed = store_->list();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 12u);
}

// The pipeline's pattern: layer l+1 is submitted before layer l is consumed.
TEST_P(SwapStoreTest, PipelinedLayerReads) {
  const auto chunks = make_chunks(64, KvFormat::q4, 10);
  const auto idx = store_all(chunks);
  const size_t layer = idx[0].layer_bytes(), n = chunks.size();
  std::vector<std::vector<uint8_t>> buf(2, std::vector<uint8_t>(n * layer));
  auto submit = [&](int l) {
    std::vector<LayerTarget> t;
    for (size_t i = 0; i < n; ++i) t.push_back({&idx[i], std::span(buf[l % 2]).subspan(i * layer, layer)});
    return store_->read_layer_async(l, t);
  };
  LayerRead pending = submit(0);
  for (int l = 0; l < 10; ++l) {
    LayerRead next = l + 1 < 10 ? submit(l + 1) : LayerRead();
    auto st = pending.wait();
    ASSERT_EQ(st.size(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(st[i].ok()) << st[i].message();
      ASSERT_EQ(0, std::memcmp(buf[l % 2].data() + i * layer, chunks[i].payload.data() + l * layer, layer));
    }
    pending = std::move(next);
  }
  EXPECT_TRUE(pending.wait().empty());
}

// load_chunks' pattern: the next batch of whole chunks is in flight while one is decoded;
// batches finish in any order, and moving over one in flight waits for it.
TEST_P(SwapStoreTest, WholeChunkReadsInFlightTogether) {
  const auto chunks = make_chunks(24, KvFormat::q8, 6);
  store_all(chunks);
  std::vector<std::vector<uint8_t>> outs;
  for (const Chunk& c : chunks) outs.emplace_back(c.payload.size());
  auto submit = [&](size_t first, size_t n) {
    std::vector<ChunkMeta> metas;
    std::vector<std::span<uint8_t>> spans;
    for (size_t i = first; i < first + n; ++i) {
      metas.push_back(chunks[i].meta);
      spans.emplace_back(outs[i]);
    }
    return store_->read_chunks_async(metas, spans);  // both copied: the read outlives them
  };
  ChunkRead a = submit(0, 10), b = submit(10, 10);
  auto rb = b.wait();
  auto ra = a.wait();
  ASSERT_EQ(ra.size(), 10u);
  ASSERT_EQ(rb.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    ASSERT_TRUE(ra[i].ok() && rb[i].ok()) << i;
    EXPECT_EQ(ra[i]->meta, chunks[i].meta);
  }
  ChunkRead c = submit(20, 2);
  c = submit(22, 2);
  ASSERT_EQ(c.wait().size(), 2u);
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(outs[i], chunks[i].payload) << i;
  for (size_t i = 22; i < 24; ++i) EXPECT_EQ(outs[i], chunks[i].payload) << i;
}

TEST_P(SwapStoreTest, BadFilesAreReportedPerChunk) {
  const auto chunks = make_chunks(8, KvFormat::q8);
  const auto idx = store_all(chunks);
  // 1: a byte of layer 2's frame flipped. 2: truncated. 3: garbage. 4: missing.
  // 5: written for another token history. 6: replaced after its index was read.
  {
    auto f = test::read_file(store_->path(1));
    f[idx[1].frames[2].offset + 5] ^= 0x10;
    test::write_file(store_->path(1), f);
    f = test::read_file(store_->path(2));
    f.resize(f.size() - 3);
    test::write_file(store_->path(2), f);
    test::write_file(store_->path(3), test::pattern_bytes(5000, 3));
    ASSERT_TRUE(store_->remove(4).ok());
    ChunkMeta other = chunks[5].meta;
    other.tokens_hash ^= 1;
    ASSERT_TRUE(store_->store(other, chunks[5].payload).ok());
    ASSERT_TRUE(store_->store(chunks[6].meta, synth_chunk_payload(chunks[6].meta, 999)).ok());
  }
  std::vector<ChunkMeta> metas;
  for (const Chunk& c : chunks) metas.push_back(c.meta);
  auto r = store_->read_indices(metas);
  EXPECT_TRUE(r[0].ok() && r[1].ok() && r[6].ok() && r[7].ok());
  auto has = [](const Status& s, Code code, const std::string& needle) {
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  };
  has(r[2].status(), Code::io, "chunk 2 (");
  has(r[2].status(), Code::io, "(truncated)");
  has(r[3].status(), Code::io, "bad magic");
  has(r[4].status(), Code::not_found, "chunk 4");
  has(r[5].status(), Code::io, "stale chunk file: tokens_hash differs");

  // Layer reads with the indices from the store: chunk 1 fails at layer 2 only, chunk 2 at its
  // last layer, chunk 6's frames no longer match (its file was replaced), 0 and 7 are fine.
  const size_t layer = idx[0].layer_bytes();
  for (int l = 0; l < chunks[0].meta.n_layer; ++l) {
    std::vector<std::vector<uint8_t>> outs(chunks.size(), std::vector<uint8_t>(layer));
    std::vector<LayerTarget> t;
    for (size_t i = 0; i < chunks.size(); ++i) t.push_back({&idx[i], outs[i]});
    auto st = store_->read_layer(l, t);
    EXPECT_TRUE(st[0].ok() && st[7].ok());
    if (l == 2) has(st[1], Code::io, "chunk 1 (");
    if (l == 2) has(st[1], Code::io, "layer 2: frame checksum mismatch");
    else EXPECT_TRUE(st[1].ok()) << st[1].message();
    // The truncated file lacks the end of its last frame only.
    if (l == chunks[0].meta.n_layer - 1) has(st[2], Code::io, "unexpected end of file");
    else EXPECT_TRUE(st[2].ok()) << st[2].message();
    EXPECT_FALSE(st[3].ok());
    EXPECT_EQ(st[4].code(), Code::not_found);
    EXPECT_FALSE(st[6].ok());
    for (size_t i : {0, 7}) EXPECT_EQ(0, std::memcmp(outs[i].data(), chunks[i].payload.data() + l * layer, layer));
  }
  std::vector<uint8_t> out(chunks[1].payload.size());
  has(store_->read_chunk(chunks[1].meta, out).status(), Code::io, "layer 2: frame checksum mismatch");
  has(store_->read_chunk(chunks[2].meta, out).status(), Code::io, "(truncated)");
  has(store_->read_chunk(chunks[3].meta, out).status(), Code::io, "bad magic");
  has(store_->read_chunk(chunks[4].meta, out).status(), Code::not_found, "chunk 4");
  has(store_->read_chunk(chunks[5].meta, out).status(), Code::io, "stale chunk file: tokens_hash differs");
  EXPECT_TRUE(store_->read_chunk(chunks[6].meta, out).ok());  // the replacement is a valid file
  EXPECT_TRUE(store_->read_chunk(chunks[7].meta, out).ok());
  EXPECT_EQ(out, chunks[7].payload);
  test::write_file(store_->path(3), test::pattern_bytes(max_encoded_chunk_bytes(chunks[3].meta) + 1, 3));
  has(store_->read_chunk(chunks[3].meta, out).status(), Code::io, "larger than any file of the expected shape");
}

TEST_P(SwapStoreTest, WrongTargetsAreRefusedAlone) {
  const auto chunks = make_chunks(2, KvFormat::f16);
  const auto idx = store_all(chunks);
  std::vector<uint8_t> good(idx[0].layer_bytes()), small(idx[0].layer_bytes() - 2);
  std::vector<LayerTarget> t{{&idx[0], small}, {nullptr, good}, {&idx[1], good}};
  auto st = store_->read_layer(0, t);
  EXPECT_EQ(st[0].code(), Code::invalid_argument);
  EXPECT_EQ(st[1].code(), Code::invalid_argument);
  EXPECT_TRUE(st[2].ok());
  EXPECT_EQ(0, std::memcmp(good.data(), chunks[1].payload.data(), good.size()));
  EXPECT_EQ(store_->read_layer(99, t)[2].code(), Code::invalid_argument);
  std::vector<uint8_t> wrong(5);
  EXPECT_EQ(store_->read_chunk(chunks[0].meta, wrong).status().code(), Code::invalid_argument);
  ChunkMeta bad = chunks[0].meta;
  bad.n_layer = 0;
  EXPECT_EQ(store_->store(bad, chunks[0].payload).status().code(), Code::invalid_argument);
  EXPECT_EQ(store_->store_async(bad, chunks[0].payload, [](Result<ChunkIndex>) { ADD_FAILURE(); }).code(),
            Code::invalid_argument);
}

TEST_P(SwapStoreTest, IndicesLongerThanTheFirstReadTakeASecond) {
  // 200 layers: the index (6472 bytes) does not fit in the first 4 KiB read.
  const auto chunks = make_chunks(3, KvFormat::q2, 200);
  store_all(chunks);
  for (const Chunk& c : chunks) {
    std::vector<uint8_t> out(c.payload.size());
    auto r = store_->read_chunk(c.meta, out);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->frames.size(), 200u);
    EXPECT_EQ(out, c.payload);
  }
}

TEST_P(SwapStoreTest, RemoveAndList) {
  const auto chunks = make_chunks(5, KvFormat::q4);
  store_all(chunks);
  std::promise<Status> removed;
  store_->remove_async(3, [&](Status s) { removed.set_value(std::move(s)); });
  EXPECT_TRUE(removed.get_future().get().ok());
  EXPECT_TRUE(store_->remove(0).ok());
  EXPECT_EQ(store_->remove(0).code(), Code::not_found);
  auto listed = store_->list();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed, (std::vector<uint32_t>{1, 2, 4}));
  EXPECT_EQ(store_->read_index(chunks[3].meta).status().code(), Code::not_found);
}

TEST_P(SwapStoreTest, ConcurrentStoresAndReads) {
  const auto chunks = make_chunks(48, KvFormat::q8, 4);
  const auto first = store_all(std::vector<Chunk>(chunks.begin(), chunks.begin() + 16));
  std::atomic<int> bad{0};
  std::thread storer([&] {
    std::vector<std::promise<Result<ChunkIndex>>> done(32);
    for (size_t i = 16; i < 48; ++i)
      if (!store_->store_async(chunks[i].meta, chunks[i].payload,
                               [&done, i](Result<ChunkIndex> r) { done[i - 16].set_value(std::move(r)); }).ok())
        ++bad;
    for (auto& d : done) bad += !d.get_future().get().ok();
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t)
    readers.emplace_back([&, t] {
      const size_t layer = first[0].layer_bytes();
      for (int round = 0; round < 20; ++round) {
        const int l = (round + t) % 4;
        std::vector<std::vector<uint8_t>> outs(16, std::vector<uint8_t>(layer));
        std::vector<LayerTarget> targets;
        for (size_t i = 0; i < 16; ++i) targets.push_back({&first[i], outs[i]});
        auto st = store_->read_layer(l, targets);
        for (size_t i = 0; i < 16; ++i)
          bad += !st[i].ok() || std::memcmp(outs[i].data(), chunks[i].payload.data() + l * layer, layer) != 0;
      }
    });
  storer.join();
  for (auto& r : readers) r.join();
  EXPECT_EQ(bad.load(), 0);
  for (size_t i = 16; i < 48; ++i) {
    std::vector<uint8_t> out(chunks[i].payload.size());
    ASSERT_TRUE(store_->read_chunk(chunks[i].meta, out).ok());
    EXPECT_EQ(out, chunks[i].payload);
  }
}

INSTANTIATE_TEST_SUITE_P(
    EnginesAndCodecs, SwapStoreTest,
    ::testing::Combine(::testing::Values(ReaderKind::io_uring, ReaderKind::threads),
                       ::testing::Values(ChunkCodec::none, ChunkCodec::lz4, ChunkCodec::zstd)),
    [](const auto& info) {
      return std::string(reader_kind_name(std::get<0>(info.param))) + "_" + chunk_codec_name(std::get<1>(info.param));
    });

TEST(SwapStore, OpenCreatesTheDirectoryAndRemovesLeftoverTemporaryFiles) {
  ScratchDir dir;
  auto io = SwapIo::create();
  ASSERT_TRUE(io.ok());
  const std::string d = dir.file("app");
  ASSERT_EQ(::mkdir(d.c_str(), 0700), 0);
  test::write_file(d + "/.3.kvc.4242.0.tmp", test::pattern_bytes(100, 1));
  test::write_file(d + "/3.kvc", test::pattern_bytes(100, 2));
  auto store = SwapStore::open(**io, d);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"app"});
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(d)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"3.kvc"});
  auto fresh = SwapStore::open(**io, dir.file("new"));
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("new")));
  test::write_file(dir.file("plain"), {1});
  EXPECT_EQ(SwapStore::open(**io, dir.file("plain")).status().code(), Code::io);
  EXPECT_EQ(SwapStore::open(**io, dir.file("a/b")).status().code(), Code::io);
}

// A DiskQuota over two stores of one owner: writes stop at the limit (refused whole, the
// older file of the refused chunk removed), removals and a closed store give their bytes
// back, and a store reopened over existing files counts them.
TEST(SwapStore, AQuotaBoundsTheOwnersFilesAndCountsWhatItFinds) {
  ScratchDir dir;
  auto io = SwapIo::create();
  ASSERT_TRUE(io.ok());
  const std::vector<Chunk> chunks = make_chunks(12, KvFormat::f16);
  auto one_file = [&]() -> uint64_t {  // what one chunk's file takes (all are the same size)
    auto probe = SwapStore::open(**io, dir.file("probe"));
    EXPECT_TRUE(probe.ok());
    auto idx = (*probe)->store(chunks[0].meta, chunks[0].payload);
    EXPECT_TRUE(idx.ok());
    return idx.ok() ? idx->file_size : 0;
  }();
  ASSERT_GT(one_file, 0u);
  auto quota = std::make_shared<DiskQuota>(5 * one_file + one_file / 2);  // room for five files
  auto a = SwapStore::open(**io, dir.file("a"));
  auto b = SwapStore::open(**io, dir.file("b"));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->set_quota(quota).ok());
  ASSERT_TRUE((*b)->set_quota(quota).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*a)->store(chunks[i].meta, chunks[i].payload).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*b)->store(chunks[i].meta, chunks[i].payload).ok());
  EXPECT_EQ(quota->used(), 5 * one_file);
  // The sixth file is refused, in either store, synchronously or not; nothing is written.
  EXPECT_EQ((*b)->store(chunks[2].meta, chunks[2].payload).status().code(), Code::quota_exceeded);
  bool called = false;
  EXPECT_EQ((*a)->store_async(chunks[3].meta, chunks[3].payload, [&](Result<ChunkIndex>) { called = true; }).code(),
            Code::quota_exceeded);
  (*a)->flush();
  EXPECT_FALSE(called);
  EXPECT_EQ(*(*b)->list(), (std::vector<uint32_t>{0, 1}));
  // Rewriting a chunk whose file is there charges only the difference (none here).
  EXPECT_TRUE((*a)->store(chunks[0].meta, chunks[0].payload).ok());
  EXPECT_EQ(quota->used(), 5 * one_file);
  // A removal gives room back.
  ASSERT_TRUE((*a)->remove(2).ok());
  EXPECT_EQ(quota->used(), 4 * one_file);
  EXPECT_TRUE((*b)->store(chunks[2].meta, chunks[2].payload).ok());
  EXPECT_EQ((*b)->counted_bytes(), 3 * one_file);
  // A closed store gives its count back; reopened, its files count again, past the limit
  // if they are there (they are on storage whatever the limit says), and further writes stop.
  a->reset();
  EXPECT_EQ(quota->used(), 3 * one_file);
  auto tight = std::make_shared<DiskQuota>(one_file);
  auto again = SwapStore::open(**io, dir.file("b"));
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*again)->set_quota(tight).ok());
  EXPECT_EQ(tight->used(), 3 * one_file);
  EXPECT_EQ((*again)->store(chunks[5].meta, chunks[5].payload).status().code(), Code::quota_exceeded);
  // A rewrite no larger than the file it replaces passes; a larger one is refused, and the
  // older file, stale by then, is removed.
  EXPECT_TRUE((*again)->store(chunks[1].meta, chunks[1].payload).ok());
  const Chunk larger = make_chunks(2, KvFormat::f16, 8)[1];
  EXPECT_EQ((*again)->store(larger.meta, larger.payload).status().code(), Code::quota_exceeded);
  (*again)->flush();
  EXPECT_EQ(*(*again)->list(), (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(tight->used(), 2 * one_file);
  EXPECT_EQ((*again)->set_quota(tight).code(), Code::internal);  // once only
}

}  // namespace
}  // namespace llmsvc::policy
