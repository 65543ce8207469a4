// KV chunk store: budgeted chunk allocation and chunk addressing.
#include "policy/kv_chunk_store.h"

#include <cstdlib>
#include <new>

namespace llmsvc::policy {
namespace {
constexpr size_t kAlign = 64;  // cache line; SIMD loads of a row never straddle lines needlessly
void free_chunk(uint16_t* p) { std::free(p); }
}  // namespace

KvChunk::~KvChunk() { store_->release(store_->geometry().chunk_bytes()); }

KvSequence::KvSequence(KvChunkStore& store) : store_(store), geo_(store.geometry()) {}

Status KvSequence::reserve(int n_tokens) {
  while (capacity() < n_tokens) {
    auto chunk = store_.claim();
    if (!chunk.ok()) return chunk.status();
    chunks_.push_back(std::move(chunk).value());
  }
  return Status::Ok();
}

void KvSequence::truncate(int n_tokens) {
  const int keep = (n_tokens + geo_.chunk_tokens - 1) / geo_.chunk_tokens;
  if (keep < n_chunks()) chunks_.resize(keep);
}

const uint16_t* KvSequence::chunk_base(int c, int layer, int kv) const {
  const size_t per_layer = size_t{2} * geo_.chunk_tokens * geo_.kv_dim;
  return chunks_[c]->data() + layer * per_layer + kv * static_cast<size_t>(geo_.chunk_tokens) * geo_.kv_dim;
}

uint16_t* KvSequence::slot(int layer, int pos, int kv) {
  const int c = pos / geo_.chunk_tokens, t = pos % geo_.chunk_tokens;
  return const_cast<uint16_t*>(chunk_base(c, layer, kv)) + size_t(t) * geo_.kv_dim;
}

KvChunkStore::KvChunkStore(const KvGeometry& geometry, uint64_t budget_bytes) : geo_(geometry), budget_(budget_bytes) {}

uint64_t KvChunkStore::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

Result<std::unique_ptr<KvChunk>> KvChunkStore::claim() {
  const size_t bytes = geo_.chunk_bytes();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (budget_ != 0 && used_ + bytes > budget_)
      return Status(Code::out_of_memory, "kv: budget of " + std::to_string(budget_) + " bytes exhausted (" +
                                             std::to_string(used_) + " used)");
    used_ += bytes;
  }
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  auto* mem = static_cast<uint16_t*>(std::aligned_alloc(kAlign, rounded));
  if (!mem) {
    release(bytes);
    return Status(Code::out_of_memory, "kv: cannot allocate a chunk of " + std::to_string(bytes) + " bytes");
  }
  return std::make_unique<KvChunk>(this, std::unique_ptr<uint16_t[], void (*)(uint16_t*)>(mem, free_chunk));
}

void KvChunkStore::release(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  used_ -= bytes;
}

}  // namespace llmsvc::policy
