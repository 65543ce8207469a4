// SPDX-License-Identifier: Apache-2.0
// PageBuffer: page-aligned and writable, moves without copying, reuses freed mappings of
// similar size from a bounded pool, and gives the rest of its memory back to the system when
// freed on a thread other than the one that made it (the case malloc's per-thread arenas keep).
#include "base/page_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <thread>
#include <vector>

#include "tests/common/proc_status.h"

namespace llmsvc {
namespace {

const size_t kPage = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

// Whether [p, p + bytes) is mapped in this process (mincore fails with ENOMEM where it is not).
bool mapped(const void* p, size_t bytes) {
  std::vector<unsigned char> vec((bytes + kPage - 1) / kPage);
  return ::mincore(const_cast<void*>(p), bytes, vec.data()) == 0 || errno != ENOMEM;
}

TEST(PageBuffer, IsPageAlignedAndWritable) {
  PageBuffer b;
  ASSERT_TRUE(b.allocate(3 * kPage + 5));
  EXPECT_EQ(b.size(), 3 * kPage + 5);
  EXPECT_GE(b.capacity(), 4 * kPage);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kPage, 0u);
  EXPECT_TRUE(mapped(b.data(), b.capacity()));
  for (size_t i = 0; i < b.size(); ++i) b.data()[i] = static_cast<uint8_t>(i * 7);
  EXPECT_EQ(b.span().size(), b.size());
  EXPECT_EQ(b.span().back(), static_cast<uint8_t>((b.size() - 1) * 7));
  b.resize_down(10);
  EXPECT_EQ(b.size(), 10u);
  EXPECT_EQ(b.data()[9], 63);
  b.resize_down(20);  // not up
  EXPECT_EQ(b.size(), 10u);
}

// A freed mapping of a size in use is handed out again (no fresh pages to fault in); one of a
// very different size is not.
TEST(PageBuffer, FreedMappingsAreReusedForSimilarSizes) {
  uint8_t* first = nullptr;
  {
    PageBuffer a;
    ASSERT_TRUE(a.allocate(40 * kPage));
    first = a.data();
  }
  PageBuffer small;
  ASSERT_TRUE(small.allocate(4 * kPage));
  EXPECT_NE(small.data(), first) << "a 4-page buffer took a 40-page mapping";
  PageBuffer again;
  ASSERT_TRUE(again.allocate(38 * kPage + 1));
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(again.capacity(), 40 * kPage);
}

// The pool holds at most kPagePoolBytes: past that, freed buffers are unmapped at once.
TEST(PageBuffer, ThePoolIsBounded) {
  const size_t len = 256 * kPage;  // 1 MiB with 4 KiB pages
  const size_t n = kPagePoolBytes / len + 4;
  std::vector<PageBuffer> bufs(n);
  std::vector<uint8_t*> at;
  for (PageBuffer& b : bufs) {
    ASSERT_TRUE(b.allocate(len));
    at.push_back(b.data());
  }
  bufs.clear();  // the first ones fill the pool; the last few cannot fit
  size_t unmapped = 0;
  for (uint8_t* p : at) unmapped += mapped(p, kPage) ? 0 : 1;
  EXPECT_GE(unmapped, size_t{4});
}

TEST(PageBuffer, MovesWithoutCopyingAndZeroBytesMapsNothing) {
  PageBuffer a;
  ASSERT_TRUE(a.allocate(kPage));
  a.data()[0] = 42;
  uint8_t* const p = a.data();
  PageBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  PageBuffer c;
  ASSERT_TRUE(c.allocate(kPage));
  c = std::move(b);  // c's own mapping is freed
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.data()[0], 42);
  PageBuffer z;
  ASSERT_TRUE(z.allocate(0));
  EXPECT_EQ(z.data(), nullptr);
  EXPECT_EQ(z.size(), 0u);
}

TEST(PageBuffer, AnImpossibleSizeFailsAndLeavesItEmpty) {
  PageBuffer b;
  ASSERT_TRUE(b.allocate(kPage));
  EXPECT_FALSE(b.allocate(SIZE_MAX / 2));  // more than any address space
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_FALSE(b.allocate(SIZE_MAX));  // rounding up to a page must not wrap around to a small size
  EXPECT_EQ(b.size(), 0u);
}

// Buffers made on one thread and freed on another, as encoded chunks are between an engine
// worker and the swap writer: all but what the pool keeps leave the process. Checked by the
// mappings themselves (sanitizer-proof), and by resident memory where that counts only the
// program's own pages (ThreadSanitizer keeps its shadow of freed memory resident).
TEST(PageBuffer, MemoryFreedOnAnotherThreadLeavesTheProcess) {
  constexpr size_t kBuffers = 320, kBytes = 200 * 1024;  // 62.5 MiB of chunk-sized buffers
  static_assert(kBuffers * kBytes > 3 * kPagePoolBytes);
  const size_t most_kept = kPagePoolBytes / kBytes;
  const uint64_t before = test::proc_status_bytes(::getpid(), "VmRSS");
  std::vector<PageBuffer> made(kBuffers);
  std::vector<const uint8_t*> at(kBuffers);
  std::thread maker([&] {
    for (size_t k = 0; k < kBuffers; ++k) {
      ASSERT_TRUE(made[k].allocate(kBytes));
      for (size_t i = 0; i < kBytes; i += 1024) made[k].data()[i] = 1;  // touch every page
      at[k] = made[k].data();
    }
  });
  maker.join();
  // Some may be reused from the pool, already resident before.
  const uint64_t held = test::proc_status_bytes(::getpid(), "VmRSS");
  EXPECT_GE(held + kPagePoolBytes, before + kBuffers * kBytes * 9 / 10)
      << "the buffers were not resident: the check below means nothing";
  std::thread freer([&] { made.clear(); });
  freer.join();
  size_t still_mapped = 0;
  for (const uint8_t* p : at) still_mapped += mapped(p, kBytes) ? 1 : 0;
  EXPECT_LE(still_mapped, most_kept) << "freed buffers stayed mapped beyond the pool's bound";
#if !defined(__SANITIZE_THREAD__)
  const uint64_t after = test::proc_status_bytes(::getpid(), "VmRSS");
  EXPECT_LE(after, before + kPagePoolBytes + (4u << 20))
      << "RSS before " << (before >> 20) << " MiB, holding " << (held >> 20) << " MiB, after " << (after >> 20) << " MiB";
#endif
}

}  // namespace
}  // namespace llmsvc
