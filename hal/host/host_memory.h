// SPDX-License-Identifier: Apache-2.0
// Host memory for large long-lived blocks (KV chunks, activation arenas), straight from the kernel.
//
// Chunks are large (tens to hundreds of KiB), of a handful of sizes (one per format), and
// freed in LRU order from many threads. Through malloc, their freed memory stayed in its
// arenas: once a chunk above malloc's mmap threshold was freed, the threshold rose past every
// chunk size and later chunks came from arenas that fragment and never shrink (the daemon's
// RSS reached 3x its KV budget under load). Mapping each chunk on its own gives its pages back
// when it is freed, so resident KV memory is what the store's budget counts, plus at most a
// page per chunk of rounding and kHostCacheBytes of freed blocks kept for reuse (mapping and
// faulting in every loaded chunk anew made switch-in a third slower). Small chunks (tiny
// models, tests) stay on the heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace llmsvc::hal::host {

// Frees a block from host_alloc; carries its length (munmap needs it).
struct HostFree {
  size_t bytes = 0;
  void operator()(uint8_t* p) const noexcept;
};
using HostMem = std::unique_ptr<uint8_t[], HostFree>;

// `bytes` of memory aligned to at least 64 bytes, its pages already present; null when the
// system has none. bytes > 0.
HostMem host_alloc(size_t bytes);

// Blocks of at least this many bytes are mapped; smaller ones come from the heap.
inline constexpr size_t kHostMapThreshold = 16 * 1024;
// Freed mapped blocks kept for reuse, at most this many bytes in the process.
inline constexpr size_t kHostCacheBytes = 8u << 20;

}  // namespace llmsvc::hal::host
