// SPDX-License-Identifier: Apache-2.0
// Device memory: a MemoryPool is one device's memory space with a capacity; a Buffer is one
// allocation in it (RAII, move-only).
//
// A pool refuses an allocation past its capacity with Code::out_of_memory (never a crash):
// how a device that runs out of memory fails a call cleanly. Host-visible spaces (the CPU's,
// a mobile GPU's unified memory) give each buffer a host pointer; a discrete GPU's buffers
// have none and are reached through its Queue (hal/queue.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>

#include "base/status.h"

namespace llmsvc::hal {

class MemoryPool;

class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  explicit operator bool() const { return pool_ != nullptr; }
  size_t size() const { return bytes_; }
  // The bytes in host memory, or null where the space is not host-visible.
  uint8_t* data() const { return host_; }
  // The device's own handle (a cl_mem, ...); for host spaces the host pointer. A pool that
  // sub-allocates one large device object (an arena) gives every buffer that object's handle
  // and the buffer's byte offset in it.
  void* handle() const { return handle_; }
  size_t offset() const { return offset_; }
  const MemoryPool* pool() const { return pool_; }
  // Gives the allocation back to its pool.
  void reset() noexcept;

 private:
  friend class MemoryPool;
  MemoryPool* pool_ = nullptr;
  uint8_t* host_ = nullptr;
  void* handle_ = nullptr;
  size_t offset_ = 0;
  size_t bytes_ = 0;
};

class MemoryPool {
 public:
  // capacity 0: bounded only by what the system gives.
  MemoryPool(std::string space, uint64_t capacity) : space_(std::move(space)), capacity_(capacity) {}
  virtual ~MemoryPool() = default;
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  // The space's name ("host", "cpu:1", "opencl:0"): buffers of two pools with the same
  // space are interchangeable without a transfer.
  const std::string& space() const { return space_; }
  virtual bool host_visible() const = 0;

  // `bytes` (> 0) aligned to at least 64 bytes. Code::out_of_memory past the capacity or
  // when the system has none, naming the space.
  Result<Buffer> alloc(size_t bytes);

  // Copies bytes [offset, offset + n) of `b` (a buffer of this pool) to or from host memory:
  // what the memory policy's swap and compression use for chunks they cannot read in place.
  // Host-visible spaces copy directly; a device's pool through its own transfer queue,
  // returning once the copy is done (a launch enqueued after a write sees its bytes; a read
  // must not race a kernel still writing those bytes). Code::invalid_argument out of range or
  // for another pool's buffer, Code::unsupported where a pool offers no copies.
  Status read(const Buffer& b, size_t offset, std::span<uint8_t> out) const;
  Status write(const Buffer& b, size_t offset, std::span<const uint8_t> in);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const;
  uint64_t peak() const;
  uint64_t allocations() const;  // successful alloc() calls so far

 protected:
  struct Block {
    uint8_t* host = nullptr;
    void* handle = nullptr;
    size_t offset = 0;  // within handle
  };
  // The backend's allocator: a block of `bytes`, or {} when there is none.
  virtual Block allocate(size_t bytes) = 0;
  virtual void release(const Block& block, size_t bytes) noexcept = 0;
  // A device pool's copies of checked ranges (the host-visible case never reaches them).
  virtual Status copy_out(const Buffer& b, size_t offset, std::span<uint8_t> out) const;
  virtual Status copy_in(const Buffer& b, size_t offset, std::span<const uint8_t> in);

 private:
  friend class Buffer;
  void give_back(Buffer& b) noexcept;

  const std::string space_;
  const uint64_t capacity_;
  mutable std::mutex mu_;
  uint64_t used_ = 0, peak_ = 0, allocations_ = 0;
};

}  // namespace llmsvc::hal
