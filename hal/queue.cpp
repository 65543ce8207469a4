// SPDX-License-Identifier: Apache-2.0
// Events and the host queue.
#include "hal/queue.h"

#include <cstring>

namespace llmsvc::hal {

std::pair<Event, std::function<void()>> Event::pending() {
  Event e;
  e.state_ = std::make_shared<State>();
  auto complete = [s = e.state_] {
    {
      std::lock_guard lock(s->mu);
      s->done = true;
    }
    s->cv.notify_all();
  };
  return {std::move(e), std::move(complete)};
}

bool Event::ready() const {
  if (!state_) return true;
  std::lock_guard lock(state_->mu);
  return state_->done;
}

void Event::wait() const {
  if (!state_) return;
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
}

Event HostQueue::copy(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t bytes) {
  // Both ends host-visible and in range: the caller's contract (a planner-made copy is).
  if (bytes > 0) std::memcpy(dst.data() + dst_offset, src.data() + src_offset, bytes);
  bytes_copied_ += bytes;
  return Event();
}

}  // namespace llmsvc::hal
