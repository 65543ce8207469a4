// SPDX-License-Identifier: Apache-2.0
// ClPool: clCreateBuffer / clReleaseMemObject behind the pool's accounting.
#include "hal/opencl/cl_pool.h"

namespace llmsvc::hal::opencl {

ClPool::ClPool(cl_context context, std::string space, uint64_t global_memory, uint64_t max_alloc, uint64_t capacity)
    : MemoryPool(std::move(space), capacity ? capacity : global_memory / 10 * 9), context_(context), max_alloc_(max_alloc) {}

MemoryPool::Block ClPool::allocate(size_t bytes) {
  if (max_alloc_ != 0 && bytes > max_alloc_) return {};
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &err);
  if (err != CL_SUCCESS || !m) return {};
  return Block{nullptr, m};
}

void ClPool::release(const Block& block, size_t) noexcept { clReleaseMemObject(static_cast<cl_mem>(block.handle)); }

}  // namespace llmsvc::hal::opencl
