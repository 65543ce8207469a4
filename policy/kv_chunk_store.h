// SPDX-License-Identifier: Apache-2.0
// KV chunk store (LLMS): every context's KV cache as a list of chunks of C tokens under one
// global memory budget, with exact accounting and LCTRU eviction.
//
// A chunk holds C consecutive positions of every layer. In memory it is one allocation:
// for each layer, the K block then the V block, in the chunk's format (hal/kv_format.h)
// for a block shape of C tokens. States:
//   resident  in memory: f16 (being filled, or not compressed) or q8/q4/q3/q2 (full chunks only)
//   swapped   only in its swap file (brought back by loading it)
//   dropped   nowhere; recomputed from its tokens when needed
//
// Working sets: a sequence inside a call is pinned; the store never takes its chunks.
// When a claim would exceed the budget, the store evicts resident chunks of unpinned
// sequences in LCTRU order: least compressed first (f16, then q8, q4, q3, q2), least recently
// used within a level (or, for the baselines the benchmarks compare with, plain LRU, or whole
// sequences at a time). Without a write-back hook, chunks whose swap file is current go
// before all others: an ahead-of-time write still queued must not turn into a recompute. An
// evicted chunk whose swap file is current becomes swapped; any other is written back first
// when its sequence has a write-back hook, else dropped. Thread-safety: the store's mutex
// guards its accounting and every
// unpinned sequence's chunks; a pinned sequence's chunks belong to its call's thread.
//
// Sharing (forks): a sequence may start as a fork of another, holding the same memory for
// their common full chunks (share_prefix). A shared chunk is never written (rows go only into
// a sequence's last, partial chunk; truncate does not keep a shared chunk partly); its bytes
// are charged once, to the share that claimed them, and return to the budget when its last
// holder lets it go. Eviction takes a shared chunk only when no holder is pinned, for every
// holder at once (each holder's state then follows its own swap file). Bringing a shared
// chunk back, or dropping it, detaches the slot first: that holder gets its own chunk and the
// others keep theirs. Compression narrows a shared chunk in place for every holder, so a
// caller compresses one only while no other holder reads it (no other holder pinned, and the
// engine's compute turn held).
//
// Swap currency: a chunk's version changes whenever its content may change (a row handed
// out for writing, new memory); versions are unique in the store, so a version recorded
// for a chunk that was since truncated away never matches the chunk that replaces it. The
// swap writer records the version a file holds (mark_stored); the file is current while
// that equals the chunk's version.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "hal/kv_format.h"
#include "hal/buffer.h"

namespace llmsvc::policy {

struct KvGeometry {
  int n_layer = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int chunk_tokens = 16;

  int kv_dim() const { return n_head_kv * head_dim; }
  hal::KvBlockShape shape() const { return {chunk_tokens, n_head_kv, head_dim}; }
  // Bytes of one layer (K block + V block) and of a whole chunk, in format f.
  size_t layer_bytes(hal::KvFormat f) const {
    return hal::kv_block_bytes(f, hal::KvPart::key, shape()) + hal::kv_block_bytes(f, hal::KvPart::value, shape());
  }
  size_t chunk_bytes(hal::KvFormat f = hal::KvFormat::f16) const { return size_t(n_layer) * layer_bytes(f); }
};

enum class ChunkState : uint8_t { resident, swapped, dropped };

// Which resident chunks leave memory first when a claim exceeds the budget.
enum class EvictionOrder : uint8_t {
  lctru,           // least compressed first, least recently used sequence within a level (LLMS)
  lru,             // least recently used sequence first, whatever the format
  whole_sequence,  // every resident chunk of the least recently used sequence at once
};

class KvChunkStore;

// A share of the budget (a per-app quota): the sequences that carry one hold at most `limit`
// resident bytes together. A claim past it evicts chunks of those sequences only (never
// another owner's); when none is evictable it fails with Code::quota_exceeded. Made by
// KvChunkStore::make_share; its figures are guarded by the store's lock.
class KvShare {
 public:
  explicit KvShare(uint64_t limit) : limit_(limit) {}
  uint64_t limit() const { return limit_; }

 private:
  friend class KvChunkStore;
  friend class KvSequence;
  const uint64_t limit_;
  uint64_t used_ = 0;
};

// A context's KV cache: chunk i holds positions [i*C, (i+1)*C).
class KvSequence {
 public:
  explicit KvSequence(KvChunkStore& store);
  ~KvSequence();
  KvSequence(const KvSequence&) = delete;
  KvSequence& operator=(const KvSequence&) = delete;

  const KvGeometry& geometry() const { return geo_; }
  int n_chunks() const { return static_cast<int>(chunks_.size()); }
  int capacity() const { return n_chunks() * geo_.chunk_tokens; }

  // Makes positions [0, n_tokens) addressable: appends f16 resident chunks as needed (claimed
  // from the budget, evicting other sequences' chunks). Code::out_of_memory when the budget
  // cannot hold them even after eviction.
  Status reserve(int n_tokens);
  // Forgets positions >= n_tokens: chunks wholly past it are freed. A chunk the cut falls
  // inside keeps its rows before the cut only where its later rows can be written over (it is
  // resident f16); otherwise (compressed, swapped or dropped) it goes too. Returns the
  // positions still held: n_tokens, or the start of that chunk.
  int truncate(int n_tokens);

  ChunkState state(int c) const { return chunks_[c].state; }
  hal::KvFormat format(int c) const { return chunks_[c].chunk->format; }
  // The elastic level (per cent; 100: the full model) of the sub-model that computed chunk c's
  // rows: the smallest, where several did. It follows the content (through swap and forks).
  int level(int c) const { return chunks_[c].chunk->level; }
  // Rows [p0, p0 + n) were just computed at level `percent`: a chunk whose rows all came from
  // this computation takes that level, one with older rows the smaller of the two.
  void note_level(int p0, int n, int percent);
  // Bytes this sequence holds in memory, and its chunks in a state. Safe from any thread
  // (they take the store's lock): what a context's description reads while it is in a call.
  uint64_t resident_bytes() const;
  int count(ChunkState s) const;
  // Every count at once (one consistent snapshot), resident chunks by format.
  struct Counts {
    int f16 = 0, q8 = 0, q4 = 0, q3 = 0, q2 = 0, swapped = 0, dropped = 0;
    int shared = 0;  // resident chunks held by another sequence too (counted in resident_bytes)
    uint64_t resident_bytes = 0;
    int resident() const { return f16 + q8 + q4 + q3 + q2; }
  };
  Counts counts() const;
  // The bytes of this sequence's resident chunks not yet in `seen`, which gains them: summed
  // over several sequences, a chunk they share counts once.
  uint64_t resident_bytes_once(std::unordered_set<const void*>& seen) const;

  // Brings a swapped or dropped chunk back as claimed, uninitialized f16 memory, to be
  // recomputed (or filled from its swap file) by the caller.
  Status make_resident(int c, hal::KvFormat format = hal::KvFormat::f16);
  // Frees chunk c's memory and marks it dropped (recomputed when needed).
  void drop(int c);
  // Frees resident chunk c's memory: swapped when its swap file is current, else dropped.
  void release(int c);

  // Swap currency (see the file comment). version / disk_current: the owning thread.
  uint64_t version(int c) const { return chunks_[c].chunk->version; }
  bool disk_current(int c) const { return chunks_[c].disk_version.load() == chunks_[c].chunk->version; }
  // The swap file of chunk c now holds `version` (the writer's callback; any thread; a chunk
  // index that no longer exists is ignored). The sequence must outlive the writes queued
  // for it: its owner flushes the swap writer before destroying it.
  void mark_stored(int c, uint64_t version);
  // Resident chunk c was just filled from its swap file: the file holds what memory holds.
  void mark_loaded(int c);

  // A chunk as a sequence restored from storage starts: not in memory; `on_disk`: its swap
  // file is believed current (swapped), else dropped; its density bookkeeping (C entries
  // each, or empty for none).
  struct RestoredChunk {
    hal::KvFormat format = hal::KvFormat::f16;
    bool on_disk = false;
    int level = 100;  // KvSequence::level
    std::vector<float> mass;
    std::vector<uint32_t> seen;
  };
  // Appends `chunks` to an empty sequence (Code::internal otherwise, or on a bad entry).
  Status restore(std::span<const RestoredChunk> chunks);
  // Chunk c's density bookkeeping (C entries each), e.g. to persist it.
  std::span<const float> token_mass(int c) const { return chunks_[c].mass; }
  std::span<const uint32_t> token_seen(int c) const { return chunks_[c].seen; }
  // Raw memory of a resident chunk (chunk_bytes(format(c)) bytes); null where the store's
  // memory is not host-visible (a GPU's): read_chunk / write_chunk copy it instead.
  uint8_t* chunk_data(int c) { return chunks_[c].chunk->mem.data(); }
  const uint8_t* chunk_data(int c) const { return chunks_[c].chunk->mem.data(); }
  // Bytes [offset, offset + size) of resident chunk c copied to or from host memory, wherever
  // the chunk lives (hal::MemoryPool::read / write).
  Status read_chunk(int c, size_t offset, std::span<uint8_t> out) const;
  Status write_chunk(int c, size_t offset, std::span<const uint8_t> in);
  // Resident chunk c's bytes (chunk_bytes(format(c))) where the host can read them: in place,
  // or copied into `staged` when the chunk has no host pointer.
  Result<std::span<const uint8_t>> host_bytes(int c, std::vector<uint8_t>& staged) const;
  // Resident chunk c's buffer (in the store's pool, which a GPU's attention reads directly);
  // null when not resident.
  const hal::Buffer* chunk_memory(int c) const {
    return chunks_[c].state == ChunkState::resident ? &chunks_[c].chunk->mem : nullptr;
  }

  // Forks: this (empty) sequence takes `parent`'s first n_chunks chunks, which must be full.
  // Resident ones are shared (the same memory, charged once); the others start dropped here
  // (their files are the parent's). Density bookkeeping is copied. Code::internal when this
  // sequence is not empty or the parent holds fewer chunks.
  Status share_prefix(const KvSequence& parent, int n_chunks);
  // Whether chunk c is held by another sequence too (under the store's lock).
  bool shared(int c) const;
  // Chunk c is shared and another holder is pinned (inside a call): it must not change.
  bool held_elsewhere(int c) const;

  // Block of `part` for `layer` of resident chunk c, in format(c).
  const void* block(int c, int layer, hal::KvPart part) const;
  // Key / value row (kv_dim halves) of `layer` at `pos`; its chunk must be resident f16.
  uint16_t* k(int layer, int pos) { return row(layer, pos, hal::KvPart::key); }
  uint16_t* v(int layer, int pos) { return row(layer, pos, hal::KvPart::value); }

  // Attention mass received per token of chunk c (C floats), and how many query rows have
  // seen each token; their ratio is the token's information density.
  float* mass(int c) { return chunks_[c].mass.data(); }
  // Records that queries at positions [p0, p0 + n) attended (with mass tracking) to every
  // key at or before their position.
  void note_queries(int p0, int n);
  // Mean density of chunk c's tokens (0 when never seen).
  double density(int c) const;

  // Re-encodes resident chunk c into `to` (a q format no wider than its current one; the
  // chunk must be full). Memory is claimed for the new form before the old is freed.
  Status compress(int c, hal::KvFormat to);

  // LRU clock: the store stamps a sequence when it is pinned.
  bool pinned() const { return pinned_; }

  // Charges this sequence's memory to `share` from now on (null: none). Only while it holds
  // no memory (Code::internal otherwise).
  Status set_share(std::shared_ptr<KvShare> share);

  // Eviction's write-back (no ahead-of-time swap-out): called with the store's lock held, on
  // the evicting thread, for a resident chunk whose file is not current, before its memory
  // is freed; returns true once the file holds the chunk (it then becomes swapped, else
  // dropped). It must not call back into the store (mark_stored, counts, ...). Clearing it
  // (null) waits for a write-back in progress: its owner clears it before what it uses dies.
  using WriteBack = std::function<bool(int c)>;
  void set_write_back(WriteBack fn);

 private:
  friend class KvChunkStore;
  using Mem = hal::Buffer;
  // The memory of a chunk: one sequence's, or shared by forks of one another.
  struct Chunk {
    bool resident = false;
    hal::KvFormat format = hal::KvFormat::f16;
    uint8_t level = 100;              // elastic level of the rows (per cent)
    Mem mem;
    size_t bytes = 0;
    uint64_t version = 0;             // changes (store-unique) with the content
    std::shared_ptr<KvShare> charged;  // the share its bytes are charged to
  };
  // A sequence's view of chunk i: the chunk, and what is this sequence's own.
  struct Slot {
    std::shared_ptr<Chunk> chunk = std::make_shared<Chunk>();
    ChunkState state = ChunkState::dropped;  // resident iff chunk->resident
    std::vector<float> mass;     // per token
    std::vector<uint32_t> seen;  // query rows that saw each token
    std::atomic<uint64_t> disk_version{~0ull};  // version this sequence's swap file holds
    Slot() = default;
    Slot(Slot&& o) noexcept;
  };
  uint16_t* row(int layer, int pos, hal::KvPart part);
  // Gives chunk c new memory (already claimed; may be null), format and state under the
  // store's lock, returning its old bytes to the budget; the old memory is freed after. A
  // shared chunk is detached first unless it stays resident (compression).
  void install(int c, Mem mem, size_t bytes, hal::KvFormat format, ChunkState state);
  // Slot c takes a chunk of its own (store lock held) when it shares one.
  void detach_locked(int c);
  // Slot c lets its chunk go (store lock held): the last holder's memory is moved into `freed`
  // (freed after the lock) and its bytes return to the budget.
  void let_go_locked(Slot& slot, std::vector<Mem>& freed);

  KvChunkStore& store_;
  KvGeometry geo_;
  std::vector<Slot> chunks_;
  bool pinned_ = false;
  uint64_t last_use_ = 0;
  WriteBack write_back_;  // guarded by the store's lock
  std::shared_ptr<KvShare> share_;  // new claims are charged to it
};

// Owns the budget and accounting shared by every sequence.
class KvChunkStore {
 public:
  // budget_bytes == 0: no limit beyond the allocator. memory: the pool chunks live in, the
  // memory space of the device that runs attention (null: the process's host memory).
  // Compression and swap read host-visible chunks in place and copy the others through the
  // pool (a GPU's transfer queue).
  KvChunkStore(const KvGeometry& geometry, uint64_t budget_bytes, EvictionOrder order = EvictionOrder::lctru,
               hal::MemoryPool* memory = nullptr);
  const hal::MemoryPool& memory() const { return *memory_; }
  hal::MemoryPool& memory() { return *memory_; }

  const KvGeometry& geometry() const { return geo_; }
  uint64_t budget_bytes() const { return budget_; }
  uint64_t used_bytes() const;
  // The most bytes ever held at once (never above a non-zero budget).
  uint64_t peak_bytes() const;
  uint64_t evictions() const;

  // A share of `limit` bytes for the sequences of one owner (KvSequence::set_share).
  std::shared_ptr<KvShare> make_share(uint64_t limit) const { return std::make_shared<KvShare>(limit); }
  uint64_t share_used(const KvShare& share) const;

  // Working-set locks: chunks of a pinned sequence are never evicted.
  void pin(KvSequence& seq);
  void unpin(KvSequence& seq);

 private:
  friend class KvSequence;
  using Mem = KvSequence::Mem;
  // Claims `bytes` for `requester` (charged to its share too), evicting others' chunks as
  // needed: first its share's, to stay within the share, then anyone's, for the budget.
  Result<Mem> claim(size_t bytes, const KvSequence* requester);
  // Gives back a claim whose memory was not used.
  void unclaim(size_t bytes, const KvSequence* requester);
  uint64_t next_version() { return version_clock_.fetch_add(1, std::memory_order_relaxed) + 1; }
  void add(KvSequence* s);
  void remove(KvSequence* s);
  // Evicts one chunk, or one sequence's chunks (mu_ held), of sequences other than the
  // requester, of share `within` only when given; false when nothing is evictable.
  bool evict_one_locked(const KvSequence* requester, const KvShare* within = nullptr);
  // Frees resident chunk c of s, for every holder: each holder's slot becomes swapped if its
  // file is current (after a write-back), else dropped.
  void evict_chunk_locked(KvSequence& s, int c);
  // Returns a chunk's bytes to the budget and to the share charged (mu_ held).
  void uncharge_locked(KvSequence::Chunk& ch);

  KvGeometry geo_;
  uint64_t budget_;
  EvictionOrder order_;
  hal::MemoryPool* memory_;
  mutable std::mutex mu_;
  uint64_t used_ = 0;
  uint64_t peak_ = 0;
  uint64_t evictions_ = 0;
  std::atomic<uint64_t> version_clock_{0};
  uint64_t clock_ = 0;
  std::vector<KvSequence*> seqs_;
};

}  // namespace llmsvc::policy
