// KV chunk memory: mapped blocks for chunks (a few recently freed kept for reuse), heap blocks
// for tiny ones.
#include "policy/kv_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

namespace llmsvc::policy {
namespace {

constexpr size_t kAlign = 64;  // cache line; SIMD loads of a row never straddle lines needlessly

// Freed blocks kept for reuse, by exact size (chunks come in one size per format). A switch-in
// frees evicted chunks and maps loaded ones of the same sizes; mapping, faulting in and
// unmapping each cost about a millisecond per switch-in of the trace benchmark (a third of
// it). Bounded, so resident memory stays the budget plus at most kKvCacheBytes.
class BlockCache {
 public:
  void* take(size_t bytes) {
    std::lock_guard lock(mu_);
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    held_ -= bytes;
    return p;
  }
  bool keep(void* p, size_t bytes) {
    std::lock_guard lock(mu_);
    if (held_ + bytes > kKvCacheBytes) return false;
    free_[bytes].push_back(p);
    held_ += bytes;
    return true;
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t held_ = 0;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: blocks may be freed during exit
  return *c;
}

}  // namespace

void KvFree::operator()(uint8_t* p) const noexcept {
  if (!p) return;
  if (bytes < kKvMapThreshold) {
    std::free(p);
    return;
  }
  bool kept = false;
  try {
    kept = cache().keep(p, bytes);
  } catch (...) {  // no room for the bookkeeping: give the block back instead
  }
  if (!kept) ::munmap(p, bytes);
}

KvMem kv_alloc(size_t bytes) {
  if (bytes >= kKvMapThreshold) {
    if (void* p = cache().take(bytes)) return KvMem(static_cast<uint8_t*>(p), KvFree{bytes});
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
