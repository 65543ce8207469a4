// SPDX-License-Identifier: Apache-2.0
// ClArenaPool: one clCreateBuffer, then ranges of it.
#include "hal/opencl/cl_arena_pool.h"

namespace llmsvc::hal::opencl {
namespace {
constexpr uint64_t kAlign = 256;  // every buffer starts on a 256-byte boundary: aligned vector loads
}

Result<std::unique_ptr<ClArenaPool>> ClArenaPool::create(cl_context context, cl_device_id device, std::string space,
                                                         uint64_t capacity) {
  if (capacity < kAlign) return Status(Code::invalid_argument, "opencl arena of " + std::to_string(capacity) + " bytes");
  cl_int err = CL_SUCCESS;
  ClMem arena(clCreateBuffer(context, CL_MEM_READ_WRITE, capacity, nullptr, &err));
  if (err != CL_SUCCESS) return cl_status(err, "making a " + std::to_string(capacity >> 20) + " MiB arena in " + space);
  ClCommandQueue transfers(clCreateCommandQueue(context, device, 0, &err));
  if (err != CL_SUCCESS) return cl_status(err, "making the transfer queue of " + space);
  return std::unique_ptr<ClArenaPool>(new ClArenaPool(std::move(space), capacity, std::move(arena), std::move(transfers)));
}

ClArenaPool::ClArenaPool(std::string space, uint64_t capacity, ClMem arena, ClCommandQueue transfers)
    : MemoryPool(std::move(space), capacity),
      arena_(std::move(arena)),
      transfers_(std::move(transfers)),
      ranges_(capacity, kAlign) {}

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

// Blocking copies: the bytes are in place (or read) when these return.
Status ClArenaPool::copy_out(const Buffer& b, size_t offset, std::span<uint8_t> out) const {
  const cl_int err = clEnqueueReadBuffer(transfers_.get(), arena_.get(), CL_TRUE, b.offset() + offset, out.size(),
                                         out.data(), 0, nullptr, nullptr);
  return err == CL_SUCCESS ? Status::Ok() : cl_status(err, "reading " + std::to_string(out.size()) + " bytes of " + space());
}

Status ClArenaPool::copy_in(const Buffer& b, size_t offset, std::span<const uint8_t> in) {
  const cl_int err = clEnqueueWriteBuffer(transfers_.get(), arena_.get(), CL_TRUE, b.offset() + offset, in.size(),
                                          in.data(), 0, nullptr, nullptr);
  return err == CL_SUCCESS ? Status::Ok() : cl_status(err, "writing " + std::to_string(in.size()) + " bytes of " + space());
}

}  // namespace llmsvc::hal::opencl
