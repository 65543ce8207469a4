// SPDX-License-Identifier: Apache-2.0
// SwapWriter: the swap directory's mutations (atomic file writes, removals) run in order on
// one thread, so that swap-out never blocks inference on storage.
//
// Jobs run in submission order, a batch at a time: each write is atomic (atomic_file.h),
// then each directory touched by the batch is fsynced once, then the batch's callbacks run
// in order. A write's `done` therefore means "durable". A removal queued after a write of
// the same path runs after it, so a removed file never comes back.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/page_buffer.h"
#include "base/safe_dir.h"
#include "base/status.h"

namespace llmsvc::policy {

// Where a job writes: `path` below `dir` (never through a symbolic link: the state
// directory's files), or, without a dir, `path` as it is (a caller's own directory).
struct SwapPath {
  SwapPath(std::string p) : path(std::move(p)) {}  // NOLINT(google-explicit-constructor)
  SwapPath(const char* p) : path(p) {}             // NOLINT(google-explicit-constructor)
  SwapPath(fileio::SafeDirRef d, std::string p) : dir(std::move(d)), path(std::move(p)) {}
  // How messages name it (relative to the state root for a dir's files).
  std::string shown() const { return dir ? dir->name_of(path) : path; }

  fileio::SafeDirRef dir;  // kept open while the job waits
  std::string path;
};

struct SwapWriterOptions {
  bool drop_cache = true;  // posix_fadvise(DONTNEED) each written file
  size_t max_batch = 64;   // jobs sharing one round of directory fsyncs (0 counts as 1)
};

class SwapWriter {
 public:
  // Runs on the writer thread; must be quick and must not throw. It may queue more jobs,
  // but not call the blocking members (write, remove, flush).
  using Done = std::function<void(Status)>;

  explicit SwapWriter(const SwapWriterOptions& options = {});
  // Drains: every queued job runs and every callback is called before the thread ends.
  ~SwapWriter();
  SwapWriter(const SwapWriter&) = delete;
  SwapWriter& operator=(const SwapWriter&) = delete;

  // Queues an atomic write of `bytes` to `path`. Errors reach `done` as Code::io. Queued bytes
  // live in their own mapping (base/page_buffer.h), so freeing them on the writer thread does
  // not leave their memory in another thread's malloc arena.
  void write_async(SwapPath path, PageBuffer bytes, Done done);
  // The same, copying `bytes` (small buffers: tables, tests). If no memory can be had for the
  // copy, `done` gets Code::out_of_memory at once, on the calling thread.
  void write_async(SwapPath path, std::span<const uint8_t> bytes, Done done);
  // Writes synchronously (after the jobs already queued); `bytes` is not copied.
  Status write(SwapPath path, std::span<const uint8_t> bytes);
  // Queues removing `path`; a missing file is Code::not_found.
  void remove_async(SwapPath path, Done done);
  Status remove(SwapPath path);
  // Waits until every job queued before the call has completed.
  void flush();
  // Completes the jobs not yet started with Code::cancelled; returns how many.
  size_t cancel_pending();
  // Memory held by queued write_async jobs not yet done (their buffers' capacity): outside the
  // KV budget, which callers bound by not queueing more past a limit.
  uint64_t pending_bytes() const { return pending_bytes_.load(std::memory_order_relaxed); }

 private:
  enum class Op { write, remove };
  struct Job {
    Op op;
    SwapPath path;
    PageBuffer owned;                 // write_async's bytes
    std::span<const uint8_t> bytes;   // what to write (owned, or the caller's for write())
    Done done;
  };

  void enqueue(Job job);
  Status run_blocking(Job job);
  bool on_writer_thread() const { return std::this_thread::get_id() == thread_.get_id(); }
  void loop();
  void run_batch(std::vector<Job>& batch);

  const SwapWriterOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;       // work queued, or stopping
  std::condition_variable idle_cv_;  // completed_ advanced
  std::deque<Job> queue_;
  uint64_t submitted_ = 0, completed_ = 0;
  std::atomic<uint64_t> pending_bytes_{0};
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace llmsvc::policy
