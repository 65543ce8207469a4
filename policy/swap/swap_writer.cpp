// SPDX-License-Identifier: Apache-2.0
// The swap writer thread: ordered batches of atomic writes and removals.
#include "policy/swap/swap_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <utility>

#include "base/file_io.h"

namespace llmsvc::policy {

SwapWriter::SwapWriter(const SwapWriterOptions& options)
    : options_(options), thread_([this] { loop(); }) {}

SwapWriter::~SwapWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SwapWriter::enqueue(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
    ++submitted_;
  }
  cv_.notify_one();
}

void SwapWriter::write_async(SwapPath path, PageBuffer bytes, Done done) {
  Job job{Op::write, std::move(path), std::move(bytes), {}, std::move(done)};
  job.bytes = job.owned.span();  // the mapping does not move with the job
  pending_bytes_.fetch_add(job.owned.capacity(), std::memory_order_relaxed);
  enqueue(std::move(job));
}

void SwapWriter::write_async(SwapPath path, std::span<const uint8_t> bytes, Done done) {
  PageBuffer copy;
  if (!copy.allocate(bytes.size())) {
    if (done) done(Status(Code::out_of_memory, "swap write " + path.shown() + ": no memory to queue " +
                                                  std::to_string(bytes.size()) + " bytes"));
    return;
  }
  if (!bytes.empty()) std::memcpy(copy.data(), bytes.data(), bytes.size());
  write_async(std::move(path), std::move(copy), std::move(done));
}

void SwapWriter::remove_async(SwapPath path, Done done) {
  enqueue(Job{Op::remove, std::move(path), {}, {}, std::move(done)});
}

Status SwapWriter::run_blocking(Job job) {
  if (on_writer_thread()) return Status(Code::internal, "swap writer: blocking call from its own callback");
  std::promise<Status> result;
  auto future = result.get_future();
  job.done = [&result](Status s) { result.set_value(std::move(s)); };
  enqueue(std::move(job));
  return future.get();
}

Status SwapWriter::write(SwapPath path, std::span<const uint8_t> bytes) {
  return run_blocking(Job{Op::write, std::move(path), {}, bytes, {}});
}

Status SwapWriter::remove(SwapPath path) { return run_blocking(Job{Op::remove, std::move(path), {}, {}, {}}); }

void SwapWriter::flush() {
  if (on_writer_thread()) return;  // cannot wait for itself; the callers' jobs run after this one
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = submitted_;
  idle_cv_.wait(lock, [&] { return completed_ >= target; });
}

size_t SwapWriter::cancel_pending() {
  std::deque<Job> cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled.swap(queue_);
  }
  for (Job& job : cancelled) {
    pending_bytes_.fetch_sub(job.owned.capacity(), std::memory_order_relaxed);
    job.owned = {};
  }
  for (Job& job : cancelled)
    if (job.done) job.done(Status(Code::cancelled, "swap " + std::string(job.op == Op::write ? "write " : "remove ") +
                                                       job.path.shown() + ": cancelled"));
  {
    std::lock_guard<std::mutex> lock(mu_);
    completed_ += cancelled.size();
  }
  idle_cv_.notify_all();
  return cancelled.size();
}

void SwapWriter::loop() {
  std::vector<Job> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and drained
      while (!queue_.empty() && (batch.empty() || batch.size() < options_.max_batch)) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    run_batch(batch);
    {
      std::lock_guard<std::mutex> lock(mu_);
      completed_ += batch.size();
    }
    idle_cv_.notify_all();
    batch.clear();
  }
}

void SwapWriter::run_batch(std::vector<Job>& batch) {
  std::vector<Status> status(batch.size());
  // Directories touched by successful writes, each fsynced once: (the job's dir, its
  // parent path below it), or (null, the parent path as it is).
  using DirKey = std::pair<const fileio::SafeDir*, std::string>;
  auto dir_of = [](const Job& job) { return DirKey(job.path.dir.get(), fileio::parent_directory(job.path.path)); };
  std::vector<std::pair<DirKey, fileio::SafeDirRef>> dirs;
  for (size_t i = 0; i < batch.size(); ++i) {
    Job& job = batch[i];
    const SwapPath& p = job.path;
    if (job.op == Op::write) {
      status[i] = p.dir ? p.dir->write_atomic(p.path, job.bytes, options_.drop_cache, /*sync=*/false)
                        : fileio::write_file_atomic(p.path, job.bytes, options_.drop_cache);
      if (status[i].ok()) {
        DirKey key = dir_of(job);
        if (std::find_if(dirs.begin(), dirs.end(), [&](const auto& d) { return d.first == key; }) == dirs.end())
          dirs.emplace_back(std::move(key), p.dir);
      }
    } else if (p.dir) {
      Status s = p.dir->unlink(p.path);
      if (s.code() == Code::not_found) s = Status(Code::not_found, "swap remove " + p.shown() + ": no such file");
      status[i] = std::move(s);
    } else if (::unlink(p.path.c_str()) != 0) {
      status[i] = errno == ENOENT ? Status(Code::not_found, "swap remove " + p.path + ": no such file")
                                  : fileio::io_status(errno, "swap remove " + p.path);
    }
  }
  for (const auto& [key, ref] : dirs) {
    Status s = ref ? ref->sync(key.second) : fileio::sync_directory(key.second);
    if (s.ok()) continue;
    for (size_t i = 0; i < batch.size(); ++i)
      if (batch[i].op == Op::write && status[i].ok() && dir_of(batch[i]) == key)
        status[i] = Status(Code::io, "swap write " + batch[i].path.shown() + ": " + s.message());
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].done) batch[i].done(std::move(status[i]));
    pending_bytes_.fetch_sub(batch[i].owned.capacity(), std::memory_order_relaxed);
    batch[i].owned = {};  // free the bytes now, not when the batch is cleared
  }
}

}  // namespace llmsvc::policy
