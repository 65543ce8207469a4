// SPDX-License-Identifier: Apache-2.0
// Swap I/O: atomic writes (page cache dropped, failures leave no trace), the writer
// thread's ordering and shutdown, batched reads on io_uring and on the pread fallback,
// disk full on a real 256 KiB tmpfs, the fallback chosen when seccomp forbids io_uring, and
// the reader's ring refusing everything but reads.
#include "policy/swap/swap_io.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <future>
#include <thread>

#include "base/aligned_buffer.h"
#include "base/file_io.h"
#include "base/unique_fd.h"
#include "policy/swap/read_only_ring.h"
#include "tests/policy/swap_test_util.h"

namespace llmsvc::policy {
namespace {

using test::pattern_bytes;
using test::read_file;
using test::ScratchDir;

// Resident pages of a file in the page cache (mincore over a mapping).
size_t resident_pages(const std::string& path) {
  fileio::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || st.st_size == 0) return 0;
  const size_t len = static_cast<size_t>(st.st_size), page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return 0;
  std::vector<unsigned char> vec((len + page - 1) / page);
  size_t n = 0;
  if (::mincore(p, len, vec.data()) == 0)
    for (unsigned char v : vec) n += v & 1;
  ::munmap(p, len);
  return n;
}

// ---- atomic_file ----

TEST(AtomicFile, WritesReplacesAndLeavesNoTemporaryFile) {
  ScratchDir dir;
  const std::string path = dir.file("5.kvc");
  const auto a = pattern_bytes(10000, 1), b = pattern_bytes(300, 2);
  ASSERT_TRUE(fileio::write_file_atomic(path, a, true).ok());
  EXPECT_EQ(read_file(path), a);
  ASSERT_TRUE(fileio::write_file_atomic(path, b, true).ok());
  EXPECT_EQ(read_file(path), b);
  ASSERT_TRUE(fileio::sync_directory(dir.path()).ok());
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"5.kvc"});
}

TEST(AtomicFile, DropsTheWrittenPagesFromThePageCache) {
  ScratchDir dir;
  const auto bytes = pattern_bytes(4 << 20, 3);
  ASSERT_TRUE(fileio::write_file_atomic(dir.file("kept"), bytes, false).ok());
  ASSERT_TRUE(fileio::write_file_atomic(dir.file("dropped"), bytes, true).ok());
  // Without the advice the freshly written pages stay cached; with it none remain.
  EXPECT_GT(resident_pages(dir.file("kept")), 0u) << "mincore does not see this file system's cache";
  EXPECT_EQ(resident_pages(dir.file("dropped")), 0u);
}

TEST(AtomicFile, FailedRenameRemovesTheTemporaryFileAndKeepsTheTarget) {
  ScratchDir dir;
  // The target is a non-empty directory: rename fails after the data was written.
  ASSERT_EQ(::mkdir(dir.file("3.kvc").c_str(), 0700), 0);
  test::write_file(dir.file("3.kvc/inside"), pattern_bytes(10, 1));
  Status s = fileio::write_file_atomic(dir.file("3.kvc"), pattern_bytes(5000, 4), true);
  EXPECT_EQ(s.code(), Code::io);
  EXPECT_NE(s.message().find("rename"), std::string::npos) << s.message();
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"3.kvc"});
  EXPECT_EQ(read_file(dir.file("3.kvc/inside")), pattern_bytes(10, 1));
}

TEST(AtomicFile, MissingDirectoryIsAnIoError) {
  ScratchDir dir;
  Status s = fileio::write_file_atomic(dir.file("nope/1.kvc"), pattern_bytes(10, 1), true);
  EXPECT_EQ(s.code(), Code::io);
  EXPECT_NE(s.message().find("create temporary file"), std::string::npos) << s.message();
}

TEST(AtomicFile, Names) {
  EXPECT_EQ(fileio::parent_directory("/a/b/c.kvc"), "/a/b");
  EXPECT_EQ(fileio::parent_directory("c.kvc"), ".");
  EXPECT_EQ(fileio::parent_directory("/c.kvc"), "/");
  EXPECT_TRUE(fileio::is_temp_file_name(".3.kvc.123.0.tmp"));
  EXPECT_FALSE(fileio::is_temp_file_name("3.kvc"));
  EXPECT_FALSE(fileio::is_temp_file_name(".tmp"));
  EXPECT_EQ(parse_chunk_file_name("17.kvc"), 17u);
  EXPECT_EQ(parse_chunk_file_name("4294967295.kvc"), 4294967295u);
  EXPECT_EQ(parse_chunk_file_name("4294967296.kvc"), std::nullopt);
  EXPECT_EQ(parse_chunk_file_name("017.kvc"), std::nullopt);
  EXPECT_EQ(parse_chunk_file_name("0.kvc"), 0u);
  EXPECT_EQ(parse_chunk_file_name(".kvc"), std::nullopt);
  EXPECT_EQ(parse_chunk_file_name("1a.kvc"), std::nullopt);
  EXPECT_EQ(parse_chunk_file_name("12.kv"), std::nullopt);
}

// ---- SwapWriter ----

TEST(SwapWriter, AsyncWritesCompleteInOrderAndFlushWaits) {
  ScratchDir dir;
  SwapWriter w;
  std::mutex mu;
  std::vector<int> order;
  constexpr int kN = 200;
  for (int i = 0; i < kN; ++i)
    w.write_async(dir.file(std::to_string(i) + ".kvc"), pattern_bytes(100 + i * 37, i), [&, i](Status s) {
      EXPECT_TRUE(s.ok()) << s.message();
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
    });
  w.flush();
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(order.size(), size_t{kN});
    for (int i = 0; i < kN; ++i) EXPECT_EQ(order[i], i);
  }
  for (int i = 0; i < kN; ++i) EXPECT_EQ(read_file(dir.file(std::to_string(i) + ".kvc")), pattern_bytes(100 + i * 37, i));
  auto listed = list_chunk_files(dir.path());
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), size_t{kN});
  EXPECT_EQ(listed->front(), 0u);
  EXPECT_EQ(listed->back(), uint32_t{kN - 1});
}

TEST(SwapWriter, LaterWritesAndRemovalsOfOnePathWin) {
  ScratchDir dir;
  SwapWriter w;
  const std::string p = dir.file("1.kvc");
  for (int i = 0; i < 30; ++i) w.write_async(p, pattern_bytes(1000, i), nullptr);
  EXPECT_TRUE(w.write(p, pattern_bytes(77, 99)).ok());
  EXPECT_EQ(read_file(p), pattern_bytes(77, 99));
  w.write_async(p, pattern_bytes(1000, 5), nullptr);
  EXPECT_TRUE(w.remove(p).ok());  // queued after the write: the file stays removed
  EXPECT_FALSE(std::filesystem::exists(p));
  EXPECT_EQ(w.remove(p).code(), Code::not_found);
  EXPECT_TRUE(dir.entries().empty());
}

// Queued buffers (handed over without a copy) count as pending, by the memory they hold, until
// written: the engine stops queueing past a limit by this figure.
TEST(SwapWriter, QueuedBuffersCountAsPendingUntilWritten) {
  ScratchDir dir;
  SwapWriter w;
  std::promise<void> entered, release;
  w.write_async(dir.file("0.kvc"), pattern_bytes(1000, 0), [&](Status s) {
    EXPECT_TRUE(s.ok()) << s.message();
    entered.set_value();
    release.get_future().wait();  // holds the writer thread, so what follows stays queued
  });
  entered.get_future().wait();
  const uint64_t first = w.pending_bytes();
  EXPECT_GE(first, 1000u);  // the copied buffer's mapping
  uint64_t queued = first;
  for (int i = 1; i <= 3; ++i) {
    const std::vector<uint8_t> want = pattern_bytes(70000 * i, i);
    PageBuffer b;
    ASSERT_TRUE(b.allocate(2 * want.size()));  // as encoding does: room for the worst case
    std::memcpy(b.data(), want.data(), want.size());
    b.resize_down(want.size());
    queued += b.capacity();  // what it holds, not what it will write
    w.write_async(dir.file(std::to_string(i) + ".kvc"), std::move(b), nullptr);
    EXPECT_EQ(w.pending_bytes(), queued);
  }
  release.set_value();
  w.flush();
  EXPECT_EQ(w.pending_bytes(), 0u);
  for (int i = 1; i <= 3; ++i) EXPECT_EQ(read_file(dir.file(std::to_string(i) + ".kvc")), pattern_bytes(70000 * i, i));
}

TEST(SwapWriter, DestructionDrainsTheQueue) {
  ScratchDir dir;
  std::atomic<int> ok{0};
  {
    SwapWriter w(SwapWriterOptions{true, 8});
    for (int i = 0; i < 100; ++i)
      w.write_async(dir.file(std::to_string(i) + ".kvc"), pattern_bytes(4096, i), [&](Status s) { ok += s.ok(); });
  }
  EXPECT_EQ(ok.load(), 100);
  EXPECT_EQ(dir.entries().size(), 100u);
}

TEST(SwapWriter, BatchSizeZeroMeansOne) {
  ScratchDir dir;
  SwapWriter w(SwapWriterOptions{true, 0});
  for (int i = 0; i < 3; ++i) w.write_async(dir.file(std::to_string(i) + ".kvc"), pattern_bytes(10, i), nullptr);
  EXPECT_TRUE(w.write(dir.file("3.kvc"), pattern_bytes(10, 3)).ok());
  EXPECT_EQ(dir.entries().size(), 4u);
}

TEST(SwapWriter, CancelPendingCompletesQueuedJobsAsCancelled) {
  ScratchDir dir;
  SwapWriter w(SwapWriterOptions{true, 1});
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  // The first job's callback holds the writer thread until the others are queued and cancelled.
  w.write_async(dir.file("0.kvc"), pattern_bytes(10, 0), [&](Status s) {
    EXPECT_TRUE(s.ok());
    started.set_value();
    released.wait();
  });
  started.get_future().wait();
  std::atomic<int> cancelled{0};
  for (int i = 1; i <= 10; ++i)
    w.write_async(dir.file(std::to_string(i) + ".kvc"), pattern_bytes(10, i), [&](Status s) {
      EXPECT_EQ(s.code(), Code::cancelled);
      ++cancelled;
    });
  EXPECT_EQ(w.cancel_pending(), 10u);
  EXPECT_EQ(cancelled.load(), 10);
  release.set_value();
  w.flush();
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"0.kvc"});
}

TEST(SwapWriter, BlockingCallsFromACallbackAreRefused) {
  ScratchDir dir;
  SwapWriter w;
  std::promise<Status> inner;
  w.write_async(dir.file("1.kvc"), pattern_bytes(10, 1),
                [&](Status) { inner.set_value(w.write(dir.file("2.kvc"), pattern_bytes(10, 2))); });
  Status s = inner.get_future().get();
  EXPECT_EQ(s.code(), Code::internal);
  w.flush();
}

TEST(SwapWriter, ErrorsReachTheCallback) {
  ScratchDir dir;
  SwapWriter w;
  std::promise<Status> p;
  w.write_async(dir.file("missing/1.kvc"), pattern_bytes(10, 1), [&](Status s) { p.set_value(std::move(s)); });
  Status s = p.get_future().get();
  EXPECT_EQ(s.code(), Code::io);
  EXPECT_NE(s.message().find("missing/1.kvc"), std::string::npos) << s.message();
}

// ---- batched reads, both engines ----

class SwapRead : public ::testing::TestWithParam<ReaderKind> {
 protected:
  std::unique_ptr<SwapIo> make(unsigned depth = 128) {
    auto io = SwapIo::create({GetParam(), depth, 4, {}});
    EXPECT_TRUE(io.ok()) << io.status().message();
    if (!io.ok()) return nullptr;
    EXPECT_EQ((*io)->reader_kind(), GetParam());
    return std::move(io).value();
  }
};

TEST_P(SwapRead, RangesOfManyFiles) {
  ScratchDir dir;
  auto io = make();
  ASSERT_TRUE(io);
  constexpr int kFiles = 40;
  std::vector<std::vector<uint8_t>> files;
  for (int i = 0; i < kFiles; ++i) {
    files.push_back(pattern_bytes(1000 + 7919 * i, i));
    ASSERT_TRUE(io->write(dir.file(std::to_string(i)), files.back()).ok());
  }
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<ReadRequest> reqs;
  std::vector<std::pair<int, size_t>> where;
  for (int i = 0; i < kFiles; ++i)
    for (size_t off : {size_t{0}, files[i].size() / 3}) {
      const size_t len = std::min<size_t>(files[i].size() - off, 500 + 131 * i);
      bufs.emplace_back(len);
      where.emplace_back(i, off);
    }
  for (size_t k = 0; k < bufs.size(); ++k) reqs.push_back({dir.file(std::to_string(where[k].first)), where[k].second, bufs[k]});
  auto res = io->read(std::move(reqs));
  ASSERT_EQ(res.size(), bufs.size());
  for (size_t k = 0; k < bufs.size(); ++k) {
    const auto& f = files[where[k].first];
    ASSERT_TRUE(res[k].status.ok()) << res[k].status.message();
    EXPECT_EQ(res[k].bytes, bufs[k].size());
    EXPECT_EQ(res[k].file_size, f.size());
    EXPECT_EQ(0, std::memcmp(bufs[k].data(), f.data() + where[k].second, bufs[k].size())) << k;
  }
}

TEST_P(SwapRead, FailuresArePerRequest) {
  ScratchDir dir;
  auto io = make();
  ASSERT_TRUE(io);
  const auto f = pattern_bytes(1000, 1);
  ASSERT_TRUE(io->write(dir.file("a"), f).ok());
  std::vector<uint8_t> b0(100), b1(100), b2(200), b3(200), b4(0), b5(1);
  auto res = io->read({{dir.file("a"), 0, b0},
                       {dir.file("missing"), 0, b1},
                       {dir.file("a"), 900, b2},         // runs past the end
                       {dir.file("a"), 900, b3, true},   // allowed to
                       {dir.file("a"), 5000, b4},        // empty: nothing to read
                       {dir.file("a"), UINT64_MAX, b5}});
  ASSERT_EQ(res.size(), 6u);
  EXPECT_TRUE(res[0].status.ok());
  EXPECT_EQ(0, std::memcmp(b0.data(), f.data(), 100));
  EXPECT_EQ(res[1].status.code(), Code::not_found);
  EXPECT_EQ(res[2].status.code(), Code::io);
  EXPECT_NE(res[2].status.message().find("unexpected end of file (100 of 200"), std::string::npos)
      << res[2].status.message();
  EXPECT_TRUE(res[3].status.ok());
  EXPECT_EQ(res[3].bytes, 100u);
  EXPECT_EQ(0, std::memcmp(b3.data(), f.data() + 900, 100));
  EXPECT_TRUE(res[4].status.ok());
  EXPECT_EQ(res[5].status.code(), Code::invalid_argument);
}

TEST_P(SwapRead, MoreRequestsThanTheQueueHolds) {
  ScratchDir dir;
  auto io = make(4);
  ASSERT_TRUE(io);
  const auto f = pattern_bytes(1 << 20, 9);
  ASSERT_TRUE(io->write(dir.file("big"), f).ok());
  constexpr size_t kReqs = 700, kLen = 1500;
  std::vector<uint8_t> buf(kReqs * kLen);
  std::vector<ReadRequest> reqs;
  for (size_t k = 0; k < kReqs; ++k)
    reqs.push_back({dir.file("big"), (k * 7717) % (f.size() - kLen), std::span(buf).subspan(k * kLen, kLen)});
  auto res = io->read(std::move(reqs));
  for (size_t k = 0; k < kReqs; ++k) {
    ASSERT_TRUE(res[k].status.ok());
    ASSERT_EQ(0, std::memcmp(buf.data() + k * kLen, f.data() + (k * 7717) % (f.size() - kLen), kLen)) << k;
  }
  // One large read.
  std::vector<uint8_t> all(f.size());
  auto r = io->read({{dir.file("big"), 0, all}});
  ASSERT_TRUE(r[0].status.ok());
  EXPECT_EQ(all, f);
}

TEST_P(SwapRead, BatchesOverlapAndCompleteInAnyOrder) {
  ScratchDir dir;
  auto io = make();
  ASSERT_TRUE(io);
  const auto a = pattern_bytes(300000, 1), b = pattern_bytes(200000, 2);
  ASSERT_TRUE(io->write(dir.file("a"), a).ok());
  ASSERT_TRUE(io->write(dir.file("b"), b).ok());
  std::vector<uint8_t> ba(a.size()), bb(b.size()), bc(1000);
  ReadBatch first = io->submit_reads({{dir.file("a"), 0, ba}});
  ReadBatch second = io->submit_reads({{dir.file("b"), 0, bb}});
  {
    ReadBatch dropped = io->submit_reads({{dir.file("a"), 5, bc}});  // destructor waits
  }
  EXPECT_EQ(0, std::memcmp(bc.data(), a.data() + 5, bc.size()));
  auto rb = second.wait();
  EXPECT_FALSE(second.valid());
  auto ra = first.wait();
  ASSERT_TRUE(ra[0].status.ok() && rb[0].status.ok());
  EXPECT_EQ(ba, a);
  EXPECT_EQ(bb, b);
  // Move-assigning over a batch in flight waits for it first.
  ReadBatch c = io->submit_reads({{dir.file("a"), 0, ba}});
  c = io->submit_reads({{dir.file("b"), 0, bb}});
  EXPECT_TRUE(c.wait()[0].status.ok());
}

// Writers replace files while readers read them: a reader sees one whole version, never a mix.
TEST_P(SwapRead, ConcurrentWritesAndReads) {
  ScratchDir dir;
  auto io = make(16);
  ASSERT_TRUE(io);
  constexpr size_t kSize = 64 << 10;
  constexpr int kFiles = 8, kVersions = 4;
  std::vector<std::vector<uint8_t>> version;
  for (int v = 0; v < kVersions; ++v) version.push_back(pattern_bytes(kSize, 100 + v));
  for (int i = 0; i < kFiles; ++i) ASSERT_TRUE(io->write(dir.file(std::to_string(i)), version[0]).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> written{0}, torn{0}, failed{0}, reads{0};
  std::thread writer([&] {
    for (int round = 0; round < 40; ++round)
      for (int i = 0; i < kFiles; ++i)
        io->write_async(dir.file(std::to_string(i)), version[(round + i) % kVersions], [&](Status s) {
          if (s.ok()) ++written;
          else ++failed;
        });
    io->flush();
    stop = true;
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t)
    readers.emplace_back([&, t] {
      std::vector<uint8_t> buf(kFiles * kSize);
      do {
        std::vector<ReadRequest> reqs;
        for (int i = 0; i < kFiles; ++i) reqs.push_back({dir.file(std::to_string(i)), 0, std::span(buf).subspan(i * kSize, kSize)});
        auto res = io->read(std::move(reqs));
        for (int i = 0; i < kFiles; ++i) {
          if (!res[i].status.ok()) {
            ++failed;
            continue;
          }
          bool whole = false;
          for (const auto& v : version) whole |= std::memcmp(buf.data() + i * kSize, v.data(), kSize) == 0;
          torn += !whole;
        }
        ++reads;
      } while (!stop || reads < 3 * (t + 1));
    });
  writer.join();
  for (auto& r : readers) r.join();
  EXPECT_EQ(written.load(), 40 * kFiles);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(torn.load(), 0);
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(dir.entries().size(), size_t{kFiles});  // no temporary file left
}

// Whether the file system under `dir` takes O_DIRECT (ext4, xfs, tmpfs since Linux 6.6 do).
bool takes_direct_io(const std::string& dir) {
  const std::string probe = dir + "/direct-probe";
  { std::ofstream(probe) << "x"; }
  fileio::UniqueFd fd(::open(probe.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT));
  ::unlink(probe.c_str());
  return fd.valid();
}

// Whole files read around the page cache, at sizes about the block size: the bytes are the
// file's, the count stops at its end, and the page cache gets nothing.
TEST_P(SwapRead, DirectReadsOfWholeFiles) {
  ScratchDir dir;
  auto io = make();
  ASSERT_TRUE(io);
  const bool direct = takes_direct_io(dir.path());
  const std::vector<size_t> sizes = {1, 4095, 4096, 4097, 10000, 3 * 4096, 200001};
  std::vector<std::vector<uint8_t>> files;
  size_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    files.push_back(pattern_bytes(sizes[i], static_cast<int>(i)));
    ASSERT_TRUE(io->write(dir.file(std::to_string(i)), files.back()).ok());
    total += direct_read_size(sizes[i] + 1);
  }
  AlignedBuffer buf;
  ASSERT_TRUE(buf.allocate(total, kDirectReadAlign));
  std::vector<ReadRequest> reqs;
  size_t pos = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const size_t len = direct_read_size(sizes[i] + 1);
    reqs.push_back({dir.file(std::to_string(i)), 0, std::span<uint8_t>(buf.data() + pos, len), true, true});
    pos += len;
  }
  auto res = io->read(std::move(reqs));
  pos = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_TRUE(res[i].status.ok()) << res[i].status.message();
    EXPECT_EQ(res[i].direct, direct) << i;
    EXPECT_EQ(res[i].bytes, sizes[i]);
    EXPECT_EQ(0, std::memcmp(buf.data() + pos, files[i].data(), sizes[i])) << i;
    EXPECT_EQ(resident_pages(dir.file(std::to_string(i))), 0u) << i;
    pos += direct_read_size(sizes[i] + 1);
  }
  // A direct read that must fill its buffer and meets the end of the file is an error, as
  // a buffered one is; one inside the file reads exactly its blocks.
  auto short_read = io->read({{dir.file("4"), 0, std::span<uint8_t>(buf.data(), 3 * 4096), false, true},
                              {dir.file("6"), 4096, std::span<uint8_t>(buf.data() + 3 * 4096, 2 * 4096), false, true}});
  EXPECT_EQ(short_read[0].status.code(), Code::io);
  EXPECT_NE(short_read[0].status.message().find("unexpected end of file (10000 of 12288"), std::string::npos)
      << short_read[0].status.message();
  ASSERT_TRUE(short_read[1].status.ok()) << short_read[1].status.message();
  EXPECT_EQ(short_read[1].direct, direct);
  EXPECT_EQ(0, std::memcmp(buf.data() + 3 * 4096, files[6].data() + 4096, 2 * 4096));
}

// A direct request out of alignment (address, length or offset) is read buffered, correctly.
TEST_P(SwapRead, MisalignedDirectRequestsAreReadBuffered) {
  ScratchDir dir;
  auto io = make();
  ASSERT_TRUE(io);
  const auto f = pattern_bytes(50000, 3);
  ASSERT_TRUE(io->write(dir.file("f"), f).ok());
  AlignedBuffer buf;
  ASSERT_TRUE(buf.allocate(4 * 8192, kDirectReadAlign));
  auto res = io->read({{dir.file("f"), 0, std::span<uint8_t>(buf.data() + 1, 8192), false, true},
                       {dir.file("f"), 0, std::span<uint8_t>(buf.data() + 12288, 8000), false, true},
                       {dir.file("f"), 100, std::span<uint8_t>(buf.data() + 24576, 8192), false, true}});
  const size_t offsets[] = {0, 0, 100}, dests[] = {1, 12288, 24576}, lens[] = {8192, 8000, 8192};
  for (size_t k = 0; k < 3; ++k) {
    ASSERT_TRUE(res[k].status.ok()) << res[k].status.message();
    EXPECT_FALSE(res[k].direct) << k;
    EXPECT_EQ(res[k].bytes, lens[k]);
    EXPECT_EQ(0, std::memcmp(buf.data() + dests[k], f.data() + offsets[k], lens[k])) << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, SwapRead, ::testing::Values(ReaderKind::io_uring, ReaderKind::threads),
                         [](const auto& info) { return std::string(reader_kind_name(info.param)); });

// ---- disk full on a real tmpfs, in a child with its own mount namespace ----

std::string enter_private_mount_namespace() {
  if (::unshare(CLONE_NEWNS) != 0) {
    if (errno != EPERM) return std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
    // Unprivileged: a user namespace in which we are root, owning the new mount namespace.
    const uid_t uid = ::getuid();
    const gid_t gid = ::getgid();
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
      return std::string("neither unshare(CLONE_NEWNS) as root nor unshare(CLONE_NEWUSER|CLONE_NEWNS) works: ") +
             std::strerror(errno);
    auto put = [](const char* file, const std::string& text) {
      std::ofstream f(file);
      f << text;
      return static_cast<bool>(f.flush());
    };
    if (!put("/proc/self/setgroups", "deny") || !put("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n") ||
        !put("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n"))
      return "cannot write the user namespace's id maps";
  }
  // Keep our mounts out of the parent's namespace.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return std::string("make / private: ") + std::strerror(errno);
  return "";
}

std::string disk_full_check(ReaderKind kind, const std::string& mnt) {
  if (std::string e = enter_private_mount_namespace(); !e.empty()) return e;
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=256k,mode=0700") != 0)
    return std::string("mount tmpfs size=256k: ") + std::strerror(errno);
  auto io = SwapIo::create({kind, 32, 2, {}});
  if (!io.ok()) return io.status().message();
  const std::string target = mnt + "/7.kvc";
  const auto old_bytes = pattern_bytes(16 << 10, 1);
  if (Status s = (*io)->write(target, old_bytes); !s.ok()) return "first write failed: " + s.message();
  // Fill the file system.
  {
    fileio::UniqueFd fd(::open((mnt + "/filler").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    const auto chunk = pattern_bytes(4096, 2);
    size_t total = 0;
    for (;;) {
      const ssize_t n = ::write(fd.get(), chunk.data(), chunk.size());
      if (n <= 0) break;
      total += static_cast<size_t>(n);
      if (total > (1 << 20)) return "tmpfs accepted more than 1 MiB: size limit not in effect";
    }
    if (errno != ENOSPC) return std::string("filling stopped with ") + std::strerror(errno);
  }
  const auto new_bytes = pattern_bytes(64 << 10, 3);
  Status s = (*io)->write(target, new_bytes);
  if (s.ok()) return "write on a full disk succeeded";
  if (s.code() != Code::io || s.message().find("disk full") == std::string::npos)
    return "unexpected status: " + s.message();
  std::promise<Status> p;
  (*io)->write_async(mnt + "/8.kvc", new_bytes, [&](Status st) { p.set_value(std::move(st)); });
  Status sa = p.get_future().get();
  if (sa.ok() || sa.message().find("disk full") == std::string::npos) return "async write: " + sa.message();
  // No temporary file, the old file intact (read through the engine under test).
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(mnt)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  if (names != std::vector<std::string>{"7.kvc", "filler"}) {
    std::string all;
    for (auto& n : names) all += n + " ";
    return "directory holds: " + all;
  }
  std::vector<uint8_t> back(old_bytes.size() + 1);
  auto r = (*io)->read({{target, 0, back, true}});
  if (!r[0].status.ok() || r[0].bytes != old_bytes.size() || !std::equal(old_bytes.begin(), old_bytes.end(), back.begin()))
    return "old file damaged: " + r[0].status.message();
  // Space freed: the same write now succeeds.
  ::unlink((mnt + "/filler").c_str());
  if (Status s2 = (*io)->write(target, new_bytes); !s2.ok()) return "write after freeing space: " + s2.message();
  if (read_file(target) != new_bytes) return "new file differs";
  return "";
}

class DiskFull : public ::testing::TestWithParam<ReaderKind> {};

TEST_P(DiskFull, WriteFailsCleanlyAndKeepsThePreviousFile) {
  ScratchDir dir;
  const std::string mnt = dir.file("mnt");
  ASSERT_EQ(::mkdir(mnt.c_str(), 0700), 0);
  const ReaderKind kind = GetParam();
  const std::string err = test::run_in_child([&] { return disk_full_check(kind, mnt); });
  EXPECT_EQ(err, "");
}

INSTANTIATE_TEST_SUITE_P(Engines, DiskFull, ::testing::Values(ReaderKind::io_uring, ReaderKind::threads),
                         [](const auto& info) { return std::string(reader_kind_name(info.param)); });

// ---- io_uring forbidden by seccomp: automatic selection falls back to threads ----

std::string seccomp_fallback_check(const std::string& dir) {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(std::size(filter)), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return std::string("no_new_privs: ") + std::strerror(errno);
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return std::string("seccomp: ") + std::strerror(errno);

  auto forced = SwapIo::create({ReaderKind::io_uring, 8, 2, {}});
  if (forced.ok() || forced.status().code() != Code::unavailable) return "io_uring was not refused";
  auto io = SwapIo::create({ReaderKind::automatic, 8, 2, {}});
  if (!io.ok()) return io.status().message();
  if ((*io)->reader_kind() != ReaderKind::threads) return "automatic did not fall back";
  const auto bytes = pattern_bytes(100000, 5);
  if (Status s = (*io)->write(dir + "/x", bytes); !s.ok()) return s.message();
  std::vector<uint8_t> back(bytes.size());
  auto r = (*io)->read({{dir + "/x", 0, back}});
  if (!r[0].status.ok() || back != bytes) return "read through the fallback failed";
  return "";
}

TEST(SwapIo, FallsBackToThreadsWhenIoUringIsForbidden) {
  ScratchDir dir;
  {
    auto normal = SwapIo::create();
    ASSERT_TRUE(normal.ok());
    EXPECT_EQ((*normal)->reader_kind(), ReaderKind::io_uring) << "this machine's kernel refuses io_uring";
  }  // its threads end before the fork: the child starts single-threaded
  EXPECT_EQ(test::run_in_child([&] { return seccomp_fallback_check(dir.path()); }), "");
}

// ---- the reader's ring: reads only ----

// Runs one SQE prepared by `prep` on `ring`; its completion's result.
template <class Prep>
int run_sqe(io_uring& ring, Prep prep, unsigned char flags = 0) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  if (sqe == nullptr) return -ENOSPC;
  prep(sqe);
  sqe->flags |= flags;
  if (const int r = io_uring_submit(&ring); r < 0) return r;
  io_uring_cqe* cqe = nullptr;
  if (const int r = io_uring_wait_cqe(&ring, &cqe); r < 0) return r;
  const int res = cqe->res;
  io_uring_cqe_seen(&ring, cqe);
  return res;
}

// What llmsvcd's syscall filter relies on (it allows io_uring_enter alone): the ring reads,
// and every other operation, SQE flag and register operation is refused by the kernel.
TEST(ReadOnlyRing, ReadsAndRefusesEverythingElse) {
  io_uring ring{};
  const Status st = init_read_only_ring(ring, 8);
  if (st.code() == Code::unavailable) GTEST_SKIP() << st.message();
  ASSERT_TRUE(st.ok()) << st.message();
  struct Exit {
    io_uring* r;
    ~Exit() { io_uring_queue_exit(r); }
  } exit_ring{&ring};
  ScratchDir dir;
  const std::string path = dir.file("data");
  const auto bytes = pattern_bytes(5000, 9);
  ASSERT_TRUE(fileio::write_atomic(path, bytes).ok());
  fileio::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());

  std::vector<uint8_t> back(bytes.size());
  EXPECT_EQ(run_sqe(ring, [&](io_uring_sqe* s) { io_uring_prep_read(s, fd.get(), back.data(), back.size(), 0); }),
            static_cast<int>(bytes.size()));
  EXPECT_EQ(back, bytes);

  // Not a read: opening a file, writing, vectored reads.
  EXPECT_EQ(run_sqe(ring, [&](io_uring_sqe* s) { io_uring_prep_openat(s, AT_FDCWD, path.c_str(), O_RDONLY, 0); }),
            -EACCES);
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK), 0);
  fileio::UniqueFd pipe_r(pipe_fds[0]), pipe_w(pipe_fds[1]);
  const char x = 'x';
  EXPECT_EQ(run_sqe(ring, [&](io_uring_sqe* s) { io_uring_prep_write(s, pipe_w.get(), &x, 1, 0); }), -EACCES);
  char got = 0;
  EXPECT_EQ(::read(pipe_r.get(), &got, 1), -1) << "the write reached the pipe";
  iovec iov{back.data(), back.size()};
  EXPECT_EQ(run_sqe(ring, [&](io_uring_sqe* s) { io_uring_prep_readv(s, fd.get(), &iov, 1, 0); }), -EACCES);
  // A read with an SQE flag (forced async, fixed file): refused too.
  EXPECT_EQ(run_sqe(ring, [&](io_uring_sqe* s) { io_uring_prep_read(s, fd.get(), back.data(), 16, 0); }, IOSQE_ASYNC),
            -EACCES);
  // No register operation: no fixed buffers, no probe, no second restriction set.
  EXPECT_EQ(io_uring_register_buffers(&ring, &iov, 1), -EACCES);
  EXPECT_EQ(io_uring_register_files(&ring, &pipe_fds[1], 1), -EACCES);
  // And plain reads still work after all of that.
  std::fill(back.begin(), back.end(), 0);
  EXPECT_EQ(run_sqe(ring, [&](io_uring_sqe* s) { io_uring_prep_read(s, fd.get(), back.data(), back.size(), 0); }),
            static_cast<int>(bytes.size()));
  EXPECT_EQ(back, bytes);
}

}  // namespace
}  // namespace llmsvc::policy
