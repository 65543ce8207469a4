// SPDX-License-Identifier: Apache-2.0
// PageBuffer: an owned byte array in its own anonymous mapping, which on destruction goes
// back to a small process-wide pool of such mappings or, past the pool's bound, to the kernel.
//
// For large buffers (encoded chunks queued for the swap writer, chunk files read back) that
// are made on one thread and often freed on another. Through malloc they land in the
// allocating thread's arena once glibc's mmap threshold has risen past their size, and each
// arena keeps its own high-water mark of freed space: llmsvcd under load held 35-60 MiB of free
// arena memory above its KV budget. Fresh mappings for every buffer cost page faults and
// cross-CPU TLB flushes on unmap (switch-in a sixth slower), hence the pool: the few buffer
// sizes in use (one per chunk format and batch) are reused, and what it holds is bounded.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "base/mapping_pool.h"

namespace llmsvc {

// Freed mappings kept for reuse, at most this many bytes in the process.
inline constexpr size_t kPagePoolBytes = 16u << 20;

// The pool every PageBuffer takes from and gives back to.
inline MappingPool& page_pool() {
  static MappingPool* p = new MappingPool(kPagePoolBytes, 4);  // never destroyed: buffers may be freed during exit
  return *p;
}

class PageBuffer {
 public:
  PageBuffer() = default;
  PageBuffer(PageBuffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), size_(std::exchange(o.size_, 0)), mapped_(std::exchange(o.mapped_, 0)) {}
  PageBuffer& operator=(PageBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      size_ = std::exchange(o.size_, 0);
      mapped_ = std::exchange(o.mapped_, 0);
    }
    return *this;
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;
  ~PageBuffer() { release(); }

  // `bytes` of page-aligned memory, contents undefined (a reused mapping holds what it held);
  // false when the system has none. bytes 0 maps nothing.
  bool allocate(size_t bytes) {
    release();
    if (bytes == 0) return true;
    if (bytes > SIZE_MAX - page()) return false;
    const size_t len = round_up(bytes);
    size_t got = 0;
    void* p = page_pool().take(len, &got);
    if (p == nullptr) {
      p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return false;
      got = len;
    }
    p_ = static_cast<uint8_t*>(p);
    size_ = bytes;
    mapped_ = got;
    return true;
  }
  // Keeps the first `bytes` (<= size()); the mapping stays as it is.
  void resize_down(size_t bytes) {
    if (bytes < size_) size_ = bytes;
  }

  uint8_t* data() { return p_; }
  const uint8_t* data() const { return p_; }
  size_t size() const { return size_; }
  // Bytes of memory behind the buffer (its mapping), at least size().
  size_t capacity() const { return mapped_; }
  std::span<uint8_t> span() { return {p_, size_}; }
  std::span<const uint8_t> span() const { return {p_, size_}; }

 private:
  static size_t page() {
    static const size_t p = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    return p;
  }
  static size_t round_up(size_t n) { return (n + page() - 1) / page() * page(); }
  void release() {
    if (p_ && !page_pool().keep(p_, mapped_)) ::munmap(p_, mapped_);
    p_ = nullptr;
    size_ = mapped_ = 0;
  }

  uint8_t* p_ = nullptr;
  size_t size_ = 0;    // bytes in use
  size_t mapped_ = 0;  // length of the mapping
};

}  // namespace llmsvc
