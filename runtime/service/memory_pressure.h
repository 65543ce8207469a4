// SPDX-License-Identifier: Apache-2.0
// MemoryPressure: where llmsvcd hears of memory pressure, by systemd's protocol for services
// (systemd.io/MEMORY_PRESSURE). $MEMORY_PRESSURE_WATCH names what to watch: a PSI file (the
// trigger $MEMORY_PRESSURE_WRITE carries, base64, is written to it, and POLLPRI means
// pressure), a FIFO or an AF_UNIX stream socket (the trigger is sent on it; anything readable
// means pressure); "/dev/null" turns watching off. Without it (systemd before 254 sets none):
// this process's cgroup v2 memory.pressure, else the system's /proc/pressure/memory, with the
// trigger "some 200000 2000000" (200 ms of stall in any 2 s). On pressure the daemon gives back
// what it holds but can remake: the weight rows an elastic model's larger levels alone read.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace llmsvc::service {

class MemoryPressure {
 public:
  enum class Kind { none, psi, fifo, socket };

  // From the environment's values (nullptr: unset). A source that cannot be watched is an
  // error naming it (the daemon logs it and runs without); "/dev/null": Kind::none.
  static Result<MemoryPressure> open(const char* watch, const char* write_base64);

  Kind kind() const { return kind_; }
  int fd() const { return fd_.get(); }
  // The epoll events that mean pressure on fd().
  uint32_t epoll_events() const;
  // What is watched, for the log ("psi /proc/pressure/memory: some 200000 2000000").
  const std::string& describe() const { return what_; }
  // After an event: reads what a FIFO or socket sent. False when the source is gone (the
  // socket's peer closed): stop watching it.
  bool drain();

 private:
  Kind kind_ = Kind::none;
  fileio::UniqueFd fd_;
  std::string what_;
};

}  // namespace llmsvc::service
