// SPDX-License-Identifier: Apache-2.0
// Host memory: mapped blocks (a few recently freed kept for reuse), heap blocks for small ones.
#include "hal/host/host_memory.h"

#include <sys/mman.h>

#include <cstdlib>

#include "base/mapping_pool.h"

namespace llmsvc::hal::host {
namespace {

constexpr size_t kAlign = 64;  // cache line; SIMD loads of a row never straddle lines needlessly

// Freed blocks kept for reuse, by exact size (chunks come in one size per format). A switch-in
// frees evicted chunks and maps loaded ones of the same sizes; mapping, faulting in and
// unmapping each cost about a millisecond per switch-in of the trace benchmark (a third of
// it). Bounded, so resident memory stays the budget plus at most kHostCacheBytes.
MappingPool& cache() {
  static MappingPool* c = new MappingPool(kHostCacheBytes, 0);  // never destroyed: blocks may be freed during exit
  return *c;
}

}  // namespace

void HostFree::operator()(uint8_t* p) const noexcept {
  if (!p) return;
  if (bytes < kHostMapThreshold) {
    std::free(p);
    return;
  }
  if (!cache().keep(p, bytes)) ::munmap(p, bytes);
}

HostMem host_alloc(size_t bytes) {
  if (bytes >= kHostMapThreshold) {
    size_t got = 0;
    if (void* p = cache().take(bytes, &got)) return HostMem(static_cast<uint8_t*>(p), HostFree{got});
    // Populated: the chunk is written at once (filled, loaded or compressed into), and one
    // call faulting every page costs less than a trap per page.
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) return HostMem(nullptr, HostFree{});
    return HostMem(static_cast<uint8_t*>(p), HostFree{bytes});
  }
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  return HostMem(static_cast<uint8_t*>(std::aligned_alloc(kAlign, rounded)), HostFree{bytes});
}

}  // namespace llmsvc::hal::host
