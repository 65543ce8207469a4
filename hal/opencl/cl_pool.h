// SPDX-License-Identifier: Apache-2.0
// ClPool: a MemoryPool of OpenCL buffers in one device's memory (not host-visible: reached
// through its ClQueue). The capacity keeps a margin under the device's global memory, and a
// buffer never exceeds the device's largest allocation: past either, a clean out_of_memory.
#pragma once

#include "hal/buffer.h"
#include "hal/opencl/cl_api.h"

namespace llmsvc::hal::opencl {

class ClPool final : public MemoryPool {
 public:
  // capacity 0: 90 % of global_memory.
  ClPool(cl_context context, std::string space, uint64_t global_memory, uint64_t max_alloc, uint64_t capacity = 0);
  bool host_visible() const override { return false; }
  // The buffer's cl_mem (Buffer::handle()).
  static cl_mem mem(const Buffer& b) { return static_cast<cl_mem>(b.handle()); }

 protected:
  Block allocate(size_t bytes) override;
  void release(const Block& block, size_t bytes) noexcept override;

 private:
  cl_context context_;
  uint64_t max_alloc_;
};

}  // namespace llmsvc::hal::opencl
