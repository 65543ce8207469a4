// SPDX-License-Identifier: Apache-2.0
// Buffer and MemoryPool: the accounting every device's memory shares.
#include "hal/buffer.h"

#include <algorithm>
#include <cstring>

namespace llmsvc::hal {

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    pool_ = std::exchange(o.pool_, nullptr);
    host_ = std::exchange(o.host_, nullptr);
    handle_ = std::exchange(o.handle_, nullptr);
    offset_ = std::exchange(o.offset_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void Buffer::reset() noexcept {
  if (pool_) pool_->give_back(*this);
  pool_ = nullptr;
  host_ = nullptr;
  handle_ = nullptr;
  offset_ = 0;
  bytes_ = 0;
}

Result<Buffer> MemoryPool::alloc(size_t bytes) {
  if (bytes == 0) return Status(Code::internal, "memory: an allocation of 0 bytes in " + space_);
  {
    std::lock_guard lock(mu_);
    if (capacity_ != 0 && (bytes > capacity_ || used_ > capacity_ - bytes))
      return Status(Code::out_of_memory, "device memory " + space_ + " is full: " + std::to_string(bytes) +
                                             " bytes wanted, " + std::to_string(capacity_ - used_) + " of " +
                                             std::to_string(capacity_) + " free");
    used_ += bytes;  // reserved before allocating, so two threads cannot both pass the check
  }
  const Block block = allocate(bytes);
  std::lock_guard lock(mu_);
  if (!block.handle) {
    used_ -= bytes;
    return Status(Code::out_of_memory, "device memory " + space_ + ": the system has no " + std::to_string(bytes) +
                                           " bytes");
  }
  peak_ = std::max(peak_, used_);
  ++allocations_;
  Buffer b;
  b.pool_ = this;
  b.host_ = block.host;
  b.handle_ = block.handle;
  b.offset_ = block.offset;
  b.bytes_ = bytes;
  return b;
}

void MemoryPool::give_back(Buffer& b) noexcept {
  release(Block{b.host_, b.handle_, b.offset_}, b.bytes_);
  std::lock_guard lock(mu_);
  used_ -= b.bytes_;
}

namespace {
Status check_range(const MemoryPool* pool, const Buffer& b, size_t offset, size_t n, const std::string& space) {
  if (b.pool() != pool) return Status(Code::invalid_argument, "memory: a copy with a buffer of another pool than " + space);
  if (offset > b.size() || n > b.size() - offset)
    return Status(Code::invalid_argument, "memory: a copy past the end of a " + std::to_string(b.size()) +
                                              "-byte buffer in " + space);
  return Status::Ok();
}
}  // namespace

Status MemoryPool::read(const Buffer& b, size_t offset, std::span<uint8_t> out) const {
  LLMSVC_RETURN_IF_ERROR(check_range(this, b, offset, out.size(), space_));
  if (out.empty()) return Status::Ok();
  if (b.data()) {
    std::memcpy(out.data(), b.data() + offset, out.size());
    return Status::Ok();
  }
  return copy_out(b, offset, out);
}

Status MemoryPool::write(const Buffer& b, size_t offset, std::span<const uint8_t> in) {
  LLMSVC_RETURN_IF_ERROR(check_range(this, b, offset, in.size(), space_));
  if (in.empty()) return Status::Ok();
  if (b.data()) {
    std::memcpy(b.data() + offset, in.data(), in.size());
    return Status::Ok();
  }
  return copy_in(b, offset, in);
}

Status MemoryPool::copy_out(const Buffer&, size_t, std::span<uint8_t>) const {
  return Status(Code::unsupported, "memory: " + space_ + " offers no copies to the host");
}

Status MemoryPool::copy_in(const Buffer&, size_t, std::span<const uint8_t>) {
  return Status(Code::unsupported, "memory: " + space_ + " offers no copies from the host");
}

uint64_t MemoryPool::used() const {
  std::lock_guard lock(mu_);
  return used_;
}
uint64_t MemoryPool::peak() const {
  std::lock_guard lock(mu_);
  return peak_;
}
uint64_t MemoryPool::allocations() const {
  std::lock_guard lock(mu_);
  return allocations_;
}

}  // namespace llmsvc::hal
