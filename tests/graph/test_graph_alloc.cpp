// SPDX-License-Identifier: Apache-2.0
// No allocation per decoded token: after warm-up, a decode step of Forward (the graph run,
// every kernel, the KV writes and attention) makes no call to operator new. This binary
// replaces the global operator new with a counting one, so it stands alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

#include "hal/devices/device_registry.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/graph/forward.h"
#include "tests/common/test_paths.h"

namespace {
std::atomic<uint64_t> g_news{0};
}  // namespace

// These replacements pair malloc with free by design; GCC, seeing a replaced operator new
// inlined into a caller, takes the free for a mismatch.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, std::align_val_t a) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  const size_t al = static_cast<size_t>(a);
  if (void* p = std::aligned_alloc(al, (std::max<size_t>(n, 1) + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n, std::align_val_t a) { return operator new(n, a); }
// The nothrow forms too (std::stable_sort's buffer uses one): every form must come from here,
// or a sanitizer sees one allocator's block freed by another.
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  const size_t al = static_cast<size_t>(a);
  return std::aligned_alloc(al, (std::max<size_t>(n, 1) + al - 1) / al * al);
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t& t) noexcept { return operator new(n, a, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }

namespace llmsvc {
namespace {

TEST(GraphAlloc, ADecodedTokenAllocatesNothing) {
  for (const char* spec : {"cpu", "split"}) {
    SCOPED_TRACE(spec);
    auto dev = hal::open_device("cpu", hal::DeviceOptions{2});
    auto second = hal::open_device("cpu:1", hal::DeviceOptions{2});
    ASSERT_TRUE(dev.ok() && second.ok());
    auto model = Model::load(test::default_model_path(), **dev);
    ASSERT_TRUE(model.ok()) << model.status().message();
    const ModelConfig& c = (*model)->config();
    std::unique_ptr<Forward> fwd;
    if (std::string(spec) == "cpu") {
      fwd = std::make_unique<Forward>(**model, **dev, 64);
    } else {
      hal::Device* devices[] = {dev->get(), second->get()};
      auto rule = hal::parse_placement("layers:15", c.n_layer, 2);
      ASSERT_TRUE(rule.ok());
      auto f = Forward::create(**model, devices, *rule, 64);
      ASSERT_TRUE(f.ok()) << f.status().message();
      fwd = std::move(f).value();
    }
    // Chunks of 64 tokens: the steps measured stay inside one chunk (a new chunk is KV memory
    // the context grows by, not per-token work).
    policy::KvChunkStore store(policy::KvGeometry{c.n_layer, c.n_head_kv, c.head_dim, 64}, 0);
    policy::KvSequence seq(store);
    std::vector<float> logits;
    const std::vector<int32_t> prompt = {1, 504, 3458, 282, 253, 1345, 30, 3121};
    ASSERT_TRUE(fwd->eval(seq, prompt, 0, false, logits).ok());
    int32_t next = 42;
    int pos = static_cast<int>(prompt.size());
    for (int i = 0; i < 2; ++i, ++pos) ASSERT_TRUE(fwd->eval(seq, {&next, 1}, pos, false, logits).ok());  // warm-up
    const uint64_t before = g_news.load();
    for (int i = 0; i < 16; ++i, ++pos) {
      ASSERT_TRUE(fwd->eval(seq, {&next, 1}, pos, false, logits).ok());
      next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    EXPECT_EQ(g_news.load() - before, 0u) << "operator new calls in 16 decoded tokens";
  }
}

}  // namespace
}  // namespace llmsvc
