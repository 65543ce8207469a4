// KV chunk memory: mapped blocks for chunks, heap blocks for tiny ones.
#include "policy/kv_memory.h"

#include <sys/mman.h>

#include <cstdlib>

namespace llmsvc::policy {
namespace {

constexpr size_t kAlign = 64;  // cache line; SIMD loads of a row never straddle lines needlessly

}  // namespace

void KvFree::operator()(uint8_t* p) const noexcept {
  if (!p) return;
  if (bytes >= kKvMapThreshold)
    ::munmap(p, bytes);
  else
    std::free(p);
}

KvMem kv_alloc(size_t bytes) {
  if (bytes >= kKvMapThreshold) {
    // Populated: the chunk is written at once (filled, loaded or compressed into), and one
    // call faulting every page costs less than a trap per page.
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) return KvMem(nullptr, KvFree{});
    return KvMem(static_cast<uint8_t*>(p), KvFree{bytes});
  }
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  return KvMem(static_cast<uint8_t*>(std::aligned_alloc(kAlign, rounded)), KvFree{bytes});
}

}  // namespace llmsvc::policy
