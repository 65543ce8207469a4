// SPDX-License-Identifier: Apache-2.0
// ClArenaPool: one clCreateBuffer, then ranges of it.
#include "hal/opencl/cl_arena_pool.h"

namespace llmsvc::hal::opencl {
namespace {
constexpr uint64_t kAlign = 256;  // every buffer starts on a 256-byte boundary: aligned vector loads
}

Result<std::unique_ptr<ClArenaPool>> ClArenaPool::create(cl_context context, std::string space, uint64_t capacity) {
  if (capacity < kAlign) return Status(Code::invalid_argument, "opencl arena of " + std::to_string(capacity) + " bytes");
  cl_int err = CL_SUCCESS;
  ClMem arena(clCreateBuffer(context, CL_MEM_READ_WRITE, capacity, nullptr, &err));
  if (err != CL_SUCCESS) return cl_status(err, "making a " + std::to_string(capacity >> 20) + " MiB arena in " + space);
  return std::unique_ptr<ClArenaPool>(new ClArenaPool(std::move(space), capacity, std::move(arena)));
}

ClArenaPool::ClArenaPool(std::string space, uint64_t capacity, ClMem arena)
    : MemoryPool(std::move(space), capacity), arena_(std::move(arena)), ranges_(capacity, kAlign) {}

MemoryPool::Block ClArenaPool::allocate(size_t bytes) {
  std::lock_guard lock(mu_);
  const auto at = ranges_.take(bytes);  // fragmentation can refuse what the capacity allows
  if (!at) return {};
  return Block{nullptr, arena_.get(), static_cast<size_t>(*at)};
}

void ClArenaPool::release(const Block& block, size_t bytes) noexcept {
  std::lock_guard lock(mu_);
  ranges_.give(block.offset, bytes);
}

}  // namespace llmsvc::hal::opencl
