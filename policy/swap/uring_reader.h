// SPDX-License-Identifier: Apache-2.0
// UringReader: the batch reader on io_uring. Any thread may submit; the waiting threads
// take turns reaping completions for everyone (one at a time), so no extra thread is needed
// and a read's completion reaches its waiter without a hand-off. Its ring is made at
// create() and can only read (read_only_ring.h).
#pragma once

#include <liburing.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include "policy/swap/batch_reader.h"

namespace llmsvc::policy {

class UringReader final : public BatchReader {
 public:
  // Code::unavailable when the kernel refuses a ring (seccomp, a kernel before 5.10,
  // io_uring_disabled).
  static Result<std::shared_ptr<UringReader>> create(unsigned queue_depth);
  // Waits for the reads still in flight (their buffers belong to live batches), then frees the ring.
  ~UringReader() override;

  ReaderKind kind() const override { return ReaderKind::io_uring; }
  ReadBatch submit(std::vector<ReadRequest> requests) override;

 protected:
  void wait(BatchState& state) override;

 private:
  struct Slot {  // one request; its address is the SQE's user_data
    std::shared_ptr<BatchState> state;
    size_t index;
  };
  struct Private {};

 public:
  UringReader(Private, unsigned entries) : entries_(entries) {}

 private:
  // Queue SQEs for the backlog while fewer than the CQ can hold are in flight; mu_ held.
  void pump_locked();
  void submit_locked();
  // Handles every available completion; mu_ held, reaping_ owned by the caller.
  void reap_locked();
  void complete_locked(Slot* slot, int res);
  // One round of waiting for completions by the current reaper.
  void reap_round(std::unique_lock<std::mutex>& lock);

  io_uring ring_{};
  bool ring_ok_ = false;
  unsigned entries_;
  std::mutex mu_;
  std::condition_variable cv_;  // a reaping round ended
  bool reaping_ = false;        // a thread is waiting on the completion queue
  std::deque<std::unique_ptr<Slot>> backlog_;  // not yet given to the kernel
  size_t in_flight_ = 0;                        // prepared SQEs not yet reaped
};

}  // namespace llmsvc::policy
