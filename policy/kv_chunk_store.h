// KV chunk store: every context's KV cache as a list of fixed-size chunks under one
// global memory budget (LLMS). A chunk holds C consecutive tokens' keys and values for
// all layers, f16, laid out per layer as [token][kv_head][head_dim].
//
// This is the resident state only; compression, swap and recompute build on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"

namespace llmsvc::policy {

struct KvGeometry {
  int n_layer = 0;
  int kv_dim = 0;        // n_head_kv * head_dim, for K and for V
  int chunk_tokens = 16;

  // Bytes of one chunk: K and V, all layers.
  size_t chunk_bytes() const { return size_t{2} * n_layer * chunk_tokens * kv_dim * sizeof(uint16_t); }
};

class KvChunkStore;

// One chunk's memory; freed (and returned to the budget) on destruction.
class KvChunk {
 public:
  KvChunk(KvChunkStore* store, std::unique_ptr<uint16_t[], void (*)(uint16_t*)> mem) : store_(store), mem_(std::move(mem)) {}
  ~KvChunk();
  KvChunk(const KvChunk&) = delete;
  KvChunk& operator=(const KvChunk&) = delete;
  uint16_t* data() { return mem_.get(); }
  const uint16_t* data() const { return mem_.get(); }

 private:
  KvChunkStore* store_;
  std::unique_ptr<uint16_t[], void (*)(uint16_t*)> mem_;
};

// A context's KV cache: chunk i holds positions [i*C, (i+1)*C).
class KvSequence {
 public:
  explicit KvSequence(KvChunkStore& store);
  KvSequence(const KvSequence&) = delete;
  KvSequence& operator=(const KvSequence&) = delete;

  // Makes room for positions [0, n_tokens): claims chunks from the store's budget.
  // Code::out_of_memory when the budget (or the allocator) cannot give them.
  Status reserve(int n_tokens);
  // Forgets positions >= n_tokens (their chunks return to the budget).
  void truncate(int n_tokens);

  int n_chunks() const { return static_cast<int>(chunks_.size()); }
  int capacity() const { return n_chunks() * geo_.chunk_tokens; }
  const KvGeometry& geometry() const { return geo_; }

  // Key / value rows of `layer` at position `pos` (kv_dim halves each); pos < capacity().
  uint16_t* k(int layer, int pos) { return slot(layer, pos, 0); }
  uint16_t* v(int layer, int pos) { return slot(layer, pos, 1); }
  // First key / value row of chunk `c` for `layer`.
  const uint16_t* chunk_k(int c, int layer) const { return chunk_base(c, layer, 0); }
  const uint16_t* chunk_v(int c, int layer) const { return chunk_base(c, layer, 1); }

 private:
  uint16_t* slot(int layer, int pos, int kv);
  const uint16_t* chunk_base(int c, int layer, int kv) const;

  KvChunkStore& store_;
  KvGeometry geo_;
  std::vector<std::unique_ptr<KvChunk>> chunks_;
};

// Owns the budget and accounting shared by every sequence. Thread-safe.
class KvChunkStore {
 public:
  // budget_bytes == 0: no limit beyond the allocator.
  KvChunkStore(const KvGeometry& geometry, uint64_t budget_bytes);

  const KvGeometry& geometry() const { return geo_; }
  uint64_t budget_bytes() const { return budget_; }
  uint64_t used_bytes() const;

  // Claims one chunk; Code::out_of_memory if over budget.
  Result<std::unique_ptr<KvChunk>> claim();

 private:
  friend class KvChunk;
  void release(size_t bytes);

  KvGeometry geo_;
  uint64_t budget_;
  mutable std::mutex mu_;
  uint64_t used_ = 0;
};

}  // namespace llmsvc::policy
