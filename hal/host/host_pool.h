// SPDX-License-Identifier: Apache-2.0
// HostPool: a MemoryPool in host memory (hal/host/host_memory.h's blocks), what the CPU
// devices and the KV chunk store allocate from.
#pragma once

#include <string>

#include "hal/buffer.h"

namespace llmsvc::hal::host {

class HostPool final : public MemoryPool {
 public:
  // space: its name ("host" for the process's shared host memory, "cpu:1" for a CPU device
  // that keeps a pool of its own); capacity 0: unbounded.
  explicit HostPool(std::string space = "host", uint64_t capacity = 0) : MemoryPool(std::move(space), capacity) {}
  bool host_visible() const override { return true; }

 protected:
  Block allocate(size_t bytes) override;
  void release(const Block& block, size_t bytes) noexcept override;
};

// The process's host memory, unbounded: where KV chunks live when no device pool is named.
HostPool& shared_host_pool();

}  // namespace llmsvc::hal::host
