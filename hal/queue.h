// SPDX-License-Identifier: Apache-2.0
// Queues and events: how work and transfers reach a device. A queue runs what it is given in
// order; each submission returns an Event that completes when it is done, so a transfer can
// overlap other work and a consumer waits only for what it reads.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "hal/buffer.h"

namespace llmsvc::hal {

class Event {
 public:
  // A completed event (what an inline queue returns).
  Event() = default;
  // A pending event and the hook its queue completes it through.
  static std::pair<Event, std::function<void()>> pending();

  bool ready() const;
  void wait() const;

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  std::shared_ptr<State> state_;  // null: complete
};

class Queue {
 public:
  virtual ~Queue() = default;
  // Copies `bytes` from src (at src_offset) to dst (at dst_offset); both buffers' spaces
  // must be reachable from this queue's device. In order with everything else on the queue.
  virtual Event copy(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t bytes) = 0;
  // Waits for everything submitted so far.
  virtual void finish() = 0;
  // The first transfer that failed since the last call (then cleared); a host queue never fails.
  virtual Status status() { return Status::Ok(); }
};

// The host's queue: copies between host-visible buffers, run at once on the caller's thread
// (their events are complete when returned). The CPU devices' queue.
class HostQueue final : public Queue {
 public:
  Event copy(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t bytes) override;
  void finish() override {}
  uint64_t bytes_copied() const { return bytes_copied_; }

 private:
  uint64_t bytes_copied_ = 0;
};

}  // namespace llmsvc::hal
