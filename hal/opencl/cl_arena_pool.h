// SPDX-License-Identifier: Apache-2.0
// ClArenaPool: a MemoryPool carved out of one OpenCL buffer (the arena). Every buffer it gives
// has the arena's cl_mem as handle and its place in it as offset, so a kernel reaches all of
// them through one argument: how a context's KV chunks, allocated and freed one by one by the
// memory policy, are read by one attention launch. Copies to and from the host (the policy's
// swap and compression) go through a queue of its own, so that they never wait behind another
// context's kernels.
#pragma once

#include <mutex>

#include "hal/buffer.h"
#include "hal/opencl/cl_api.h"
#include "hal/range_allocator.h"

namespace llmsvc::hal::opencl {

class ClArenaPool final : public MemoryPool {
 public:
  // One buffer of `capacity` bytes (at most the device's largest allocation) on `device`, made
  // now, and the transfer queue.
  static Result<std::unique_ptr<ClArenaPool>> create(cl_context context, cl_device_id device, std::string space,
                                                     uint64_t capacity);
  bool host_visible() const override { return false; }
  cl_mem arena() const { return arena_.get(); }

 protected:
  Block allocate(size_t bytes) override;
  void release(const Block& block, size_t bytes) noexcept override;
  Status copy_out(const Buffer& b, size_t offset, std::span<uint8_t> out) const override;
  Status copy_in(const Buffer& b, size_t offset, std::span<const uint8_t> in) override;

 private:
  ClArenaPool(std::string space, uint64_t capacity, ClMem arena, ClCommandQueue transfers);
  ClMem arena_;
  ClCommandQueue transfers_;
  std::mutex mu_;
  RangeAllocator ranges_;
};

}  // namespace llmsvc::hal::opencl
