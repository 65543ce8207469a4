// SPDX-License-Identifier: Apache-2.0
// Batched reads on io_uring.
#include "policy/swap/uring_reader.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "policy/swap/read_only_ring.h"

namespace llmsvc::policy {
namespace {

constexpr unsigned kMaxReadBytes = 1u << 30;  // per SQE (the length is 32-bit); longer reads continue

[[noreturn]] void ring_broken(int err) {
  // Only a bug (bad ring fd or pointers) gets here. Waiting is impossible and going on
  // could let the kernel write into freed buffers.
  std::fprintf(stderr, "llmsvc: io_uring failed: %s\n", std::strerror(err));
  std::abort();
}

}  // namespace

Result<std::shared_ptr<UringReader>> UringReader::create(unsigned queue_depth) {
  auto r = std::make_shared<UringReader>(Private{}, std::clamp(queue_depth, 1u, 4096u));
  // A ring that can only read (read_only_ring.h); a kernel that cannot restrict one gets
  // the fallback.
  LLMSVC_RETURN_IF_ERROR(init_read_only_ring(r->ring_, r->entries_));
  r->ring_ok_ = true;
  return r;
}

UringReader::~UringReader() {
  // Every batch holds a reference to its reader, so none can be in flight here.
  if (ring_ok_) io_uring_queue_exit(&ring_);
}

ReadBatch UringReader::submit(std::vector<ReadRequest> requests) {
  std::shared_ptr<BatchState> state = open_batch(std::move(requests));
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < state->requests.size(); ++i)
      if (state->fds[i].valid()) backlog_.push_back(std::make_unique<Slot>(Slot{state, i}));
    pump_locked();
  }
  return ReadBatch(shared_from_this(), state);
}

void UringReader::submit_locked() {
  for (;;) {
    const int r = io_uring_submit(&ring_);
    if (r >= 0 || r == -EAGAIN || r == -EBUSY) return;  // busy: the SQEs stay queued, retried by the reaper
    if (r != -EINTR) ring_broken(-r);
  }
}

void UringReader::pump_locked() {
  // At most as many in flight as the completion queue holds, so completions never overflow.
  const size_t cap = ring_.cq.ring_entries;
  bool queued = false;
  while (!backlog_.empty() && in_flight_ < cap) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {  // submission queue full: hand it to the kernel and go on
      submit_locked();
      sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) break;
    }
    Slot* slot = backlog_.front().release();
    backlog_.pop_front();
    BatchState& s = *slot->state;
    const ReadRequest& r = s.requests[slot->index];
    const size_t done = s.results[slot->index].bytes;
    const unsigned len = static_cast<unsigned>(std::min<size_t>(r.dest.size() - done, kMaxReadBytes));
    io_uring_prep_read(sqe, s.fds[slot->index].get(), r.dest.data() + done, len, r.offset + done);
    io_uring_sqe_set_data(sqe, slot);
    ++in_flight_;
    queued = true;
  }
  if (queued) submit_locked();
}

void UringReader::complete_locked(Slot* raw, int res) {
  std::unique_ptr<Slot> slot(raw);
  BatchState& s = *slot->state;
  const size_t i = slot->index;
  if (res == -EINTR || res == -EAGAIN) {
    backlog_.push_front(std::move(slot));
    return;
  }
  bool eof = res == 0;
  if (res > 0) {
    s.results[i].bytes += static_cast<size_t>(res);
    if (wants_more(s, i)) {  // short read: continue where it stopped
      backlog_.push_front(std::move(slot));
      return;
    }
    eof = s.results[i].bytes < s.requests[i].dest.size();  // a direct read's end of file
  }
  finish_request(s, i, res < 0 ? -res : 0, eof);
  --s.pending;
}

void UringReader::reap_locked() {
  io_uring_cqe* cqe = nullptr;
  while (io_uring_peek_cqe(&ring_, &cqe) == 0 && cqe != nullptr) {
    auto* slot = static_cast<Slot*>(io_uring_cqe_get_data(cqe));
    const int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    --in_flight_;
    complete_locked(slot, res);
  }
  pump_locked();
}

void UringReader::reap_round(std::unique_lock<std::mutex>& lock) {
  pump_locked();
  if (io_uring_sq_ready(&ring_) > 0) submit_locked();
  if (in_flight_ == io_uring_sq_ready(&ring_)) {
    // Nothing is with the kernel (it refused a submission for now): nothing to wait for.
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    lock.lock();
    return;
  }
  reaping_ = true;
  lock.unlock();
  // Only the reaper touches the completion queue; submitters use the submission queue
  // under mu_, which liburing allows concurrently.
  io_uring_cqe* cqe = nullptr;
  const int r = io_uring_wait_cqe(&ring_, &cqe);
  lock.lock();
  if (r < 0 && r != -EINTR && r != -EAGAIN && r != -ETIME) ring_broken(-r);
  reap_locked();
  reaping_ = false;
  cv_.notify_all();
}

void UringReader::wait(BatchState& state) {
  std::unique_lock<std::mutex> lock(mu_);
  while (state.pending > 0) {
    if (reaping_) {
      cv_.wait(lock);
      continue;
    }
    reap_round(lock);
  }
}

}  // namespace llmsvc::policy
