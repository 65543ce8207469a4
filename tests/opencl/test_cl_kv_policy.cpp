// SPDX-License-Identifier: Apache-2.0
// KV chunks in an OpenCL device's own memory (its KV arena, no host pointers) through the memory
// policy as host chunks go: compression, swap-out, whole-chunk and layer-by-layer loads give
// the same bytes as the same steps on host memory; copies out of range are refused.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "hal/devices/device_registry.h"
#include "policy/kv_chunk_store.h"
#include "policy/swap/kv_swap.h"
#include "policy/swap/layer_loader.h"
#include "policy/swap/swap_io.h"
#include "policy/swap/swap_store.h"
#include "tests/policy/swap_test_util.h"

namespace llmsvc {
namespace {

using policy::ChunkState;
using policy::KvChunkStore;
using policy::KvGeometry;
using policy::KvSequence;

const KvGeometry kGeo{3, 2, 32, 16};  // 3 layers, 2 kv heads of 32, chunks of 16 tokens
constexpr uint64_t kModel = 0x5151;

// f16 values of a modest range (the codecs quantize them), different per chunk.
std::vector<uint8_t> pattern(size_t bytes, int seed) {
  std::vector<uint8_t> out(bytes);
  for (size_t i = 0; i + 1 < bytes; i += 2) {
    const uint16_t h = static_cast<uint16_t>(0x3000 + ((i * 37 + static_cast<size_t>(seed) * 101) % 0x0C00));
    out[i] = static_cast<uint8_t>(h & 0xFF);
    out[i + 1] = static_cast<uint8_t>(h >> 8);
  }
  return out;
}

std::vector<uint8_t> bytes_of(const KvSequence& seq, int c) {
  std::vector<uint8_t> out(kGeo.chunk_bytes(seq.format(c)));
  EXPECT_TRUE(seq.read_chunk(c, 0, out).ok());
  return out;
}

// Overwrites resident chunk c: a chunk made resident again often gets its old place in the
// arena back, old bytes and all, which a load that wrote nothing would pass for.
void scribble(KvSequence& seq, int c) {
  ASSERT_TRUE(seq.write_chunk(c, 0, std::vector<uint8_t>(kGeo.chunk_bytes(seq.format(c)), 0xEE)).ok());
}

class ClKvPolicy : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dev = hal::open_device("opencl", hal::DeviceOptions{1});
    ASSERT_TRUE(dev.ok()) << dev.status().message();
    dev_ = std::move(dev).value();
    ASSERT_FALSE(dev_->kv_memory().host_visible());
    auto io = policy::SwapIo::create();
    ASSERT_TRUE(io.ok()) << io.status().message();
    io_ = std::move(io).value();
    auto swap = policy::SwapStore::open(*io_, dir_.path() + "/chunks");
    ASSERT_TRUE(swap.ok()) << swap.status().message();
    swap_ = std::move(swap).value();
  }
  // n_chunks chunks of `seq` holding n_valid positions, written with the patterns, chunk 1
  // compressed to q4 and chunk 2 to q8 (when full).
  void fill(KvSequence& seq, int n_valid) {
    ASSERT_TRUE(seq.reserve(n_valid).ok());
    for (int c = 0; c < seq.n_chunks(); ++c) ASSERT_TRUE(seq.write_chunk(c, 0, pattern(kGeo.chunk_bytes(), c)).ok());
    ASSERT_TRUE(seq.compress(1, hal::KvFormat::q4).ok());
    ASSERT_TRUE(seq.compress(2, hal::KvFormat::q8).ok());
  }
  void swap_out(KvSequence& seq, const std::vector<int32_t>& tokens, int n_valid) {
    int failures = 0;
    auto q = policy::store_changed_chunks(seq, *swap_, kModel, tokens, n_valid,
                                          [&](int, uint64_t, const Status& s) { failures += !s.ok(); });
    ASSERT_TRUE(q.ok()) << q.status().message();
    io_->flush();
    EXPECT_EQ(failures, 0);
  }
  std::unique_ptr<hal::Device> dev_;
  test::ScratchDir dir_;
  std::unique_ptr<policy::SwapIo> io_;
  std::unique_ptr<policy::SwapStore> swap_;
};

TEST_F(ClKvPolicy, CompressionSwapAndLoadsGiveTheHostsBytes) {
  constexpr int kValid = 4 * 16 + 5;  // four full chunks and a partial tail
  std::vector<int32_t> tokens(kValid);
  for (int i = 0; i < kValid; ++i) tokens[i] = 3 * i + 1;
  KvChunkStore host_store(kGeo, 0), dev_store(kGeo, 0, policy::EvictionOrder::lctru, &dev_->kv_memory());
  KvSequence host(host_store), gpu(dev_store);
  fill(host, kValid);
  fill(gpu, kValid);
  if (HasFatalFailure()) return;
  ASSERT_EQ(gpu.chunk_data(0), nullptr);  // no host pointer: every step below copies
  std::vector<std::vector<uint8_t>> want;
  for (int c = 0; c < host.n_chunks(); ++c) {
    want.push_back(bytes_of(host, c));
    EXPECT_EQ(bytes_of(gpu, c), want.back()) << "chunk " << c << " (" << int(gpu.format(c)) << ")";
  }

  swap_out(gpu, tokens, kValid);
  for (int c = 0; c < gpu.n_chunks(); ++c) {
    EXPECT_TRUE(gpu.disk_current(c)) << c;
    gpu.release(c);
    EXPECT_EQ(gpu.state(c), ChunkState::swapped) << c;
  }
  EXPECT_EQ(dev_->kv_memory().used(), 0u);
  // Whole chunks back (the partial tail among them).
  const std::vector<int> all = {0, 1, 2, 3, 4};
  for (int c : all) {
    ASSERT_TRUE(gpu.make_resident(c, gpu.format(c)).ok());
    scribble(gpu, c);
  }
  const std::vector<Status> loaded = policy::load_chunks(gpu, *swap_, kModel, tokens, kValid, all);
  for (const Status& s : loaded) EXPECT_TRUE(s.ok()) << s.message();
  for (int c = 0; c < 4; ++c) EXPECT_EQ(bytes_of(gpu, c), want[c]) << "chunk " << c;
  const std::vector<uint8_t> tail = bytes_of(gpu, 4);
  const size_t rows = 5 * size_t(kGeo.kv_dim()) * 2, block = 16 * size_t(kGeo.kv_dim()) * 2;
  for (size_t b = 0; b < 2 * size_t(kGeo.n_layer); ++b)
    EXPECT_TRUE(std::equal(tail.begin() + b * block, tail.begin() + b * block + rows, want[4].begin() + b * block))
        << "tail block " << b;

  // Full chunks layer by layer (the swap-recompute pipeline's loads).
  for (int c = 0; c < 4; ++c) gpu.release(c);
  const std::vector<int> full = {0, 1, 2, 3};
  for (int c : full) {
    ASSERT_TRUE(gpu.make_resident(c, gpu.format(c)).ok());
    scribble(gpu, c);
  }
  policy::LayerLoader loader(gpu, *swap_, kModel, tokens, kValid, full);
  EXPECT_TRUE(loader.header_failed().empty());
  for (int l = 0; l < kGeo.n_layer; ++l) ASSERT_TRUE(loader.before_layer(l).ok());
  loader.finish();
  EXPECT_EQ(loader.loaded(), 4);
  EXPECT_TRUE(loader.late_failed().empty());
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(bytes_of(gpu, c), want[c]) << "chunk " << c << " layer by layer";
    EXPECT_TRUE(gpu.disk_current(c)) << c;
  }
}

// Eviction's write-back (no ahead-of-time swap-out) copies a chunk out of device memory too.
TEST_F(ClKvPolicy, EvictionWritesBackAChunkOfDeviceMemory) {
  const size_t chunk = kGeo.chunk_bytes();
  KvChunkStore store(kGeo, 2 * chunk, policy::EvictionOrder::lctru, &dev_->kv_memory());
  KvSequence a(store), b(store);
  const std::vector<int32_t> tokens(32, 7);
  store.pin(a);
  ASSERT_TRUE(a.reserve(32).ok());
  for (int c = 0; c < 2; ++c) ASSERT_TRUE(a.write_chunk(c, 0, pattern(chunk, 10 + c)).ok());
  a.set_write_back([&](int c) { return policy::store_chunk_now(a, *swap_, kModel, tokens, 32, c).ok(); });
  store.unpin(a);
  store.pin(b);
  ASSERT_TRUE(b.reserve(16).ok());  // evicts one of a's chunks through the write-back
  store.unpin(b);
  a.set_write_back(nullptr);
  int swapped = 0;
  for (int c = 0; c < 2; ++c) swapped += a.state(c) == ChunkState::swapped;
  ASSERT_EQ(swapped, 1);
  const int c = a.state(0) == ChunkState::swapped ? 0 : 1;
  store.pin(a);
  b.truncate(0);
  ASSERT_TRUE(a.make_resident(c).ok());
  scribble(a, c);
  const std::vector<int> one = {c};
  EXPECT_TRUE(policy::load_chunks(a, *swap_, kModel, tokens, 32, one)[0].ok());
  EXPECT_EQ(bytes_of(a, c), pattern(chunk, 10 + c));
  store.unpin(a);
}

TEST_F(ClKvPolicy, CopiesOutOfRangeOrOfAnotherPoolAreRefused) {
  hal::MemoryPool& pool = dev_->kv_memory();
  auto b = pool.alloc(256);
  ASSERT_TRUE(b.ok());
  std::vector<uint8_t> bytes(64, 0xAB), back(64);
  ASSERT_TRUE(pool.write(*b, 192, bytes).ok());
  ASSERT_TRUE(pool.read(*b, 192, back).ok());
  EXPECT_EQ(back, bytes);
  EXPECT_EQ(pool.write(*b, 193, bytes).code(), Code::invalid_argument);
  EXPECT_EQ(pool.read(*b, 257, std::span<uint8_t>()).code(), Code::invalid_argument);
  auto other = dev_->memory().alloc(64);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(pool.read(*other, 0, back).code(), Code::invalid_argument);
}

}  // namespace
}  // namespace llmsvc
