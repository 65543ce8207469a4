// SPDX-License-Identifier: Apache-2.0
// KV chunk store: budgeted chunk memory, chunk addressing, LCTRU eviction.
#include "policy/kv_chunk_store.h"

#include "hal/host/host_pool.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <tuple>
#include <unordered_set>

namespace llmsvc::policy {
namespace {

// LCTRU level: the least compressed chunks leave memory first.
int level(hal::KvFormat f) {
  switch (f) {
    case hal::KvFormat::f16: return 0;
    case hal::KvFormat::q8: return 1;
    case hal::KvFormat::q4: return 2;
    case hal::KvFormat::q3: return 3;
    case hal::KvFormat::q2: return 4;
  }
  return 0;
}

}  // namespace

KvSequence::Slot::Slot(Slot&& o) noexcept
    : chunk(std::move(o.chunk)),
      state(o.state),
      mass(std::move(o.mass)),
      seen(std::move(o.seen)),
      disk_version(o.disk_version.load()) {}

KvSequence::KvSequence(KvChunkStore& store) : store_(store), geo_(store.geometry()) { store_.add(this); }

KvSequence::~KvSequence() {
  store_.remove(this);  // no eviction can reach it any more
  std::vector<Mem> freed;
  std::lock_guard<std::mutex> lock(store_.mu_);
  for (Slot& slot : chunks_) let_go_locked(slot, freed);
}

void KvSequence::let_go_locked(Slot& slot, std::vector<Mem>& freed) {
  if (slot.chunk && slot.chunk.use_count() == 1) {
    store_.uncharge_locked(*slot.chunk);
    freed.push_back(std::move(slot.chunk->mem));
  }
  slot.chunk.reset();
}

void KvSequence::detach_locked(int c) {
  Slot& slot = chunks_[c];
  if (slot.chunk.use_count() <= 1) return;
  auto own = std::make_shared<Chunk>();
  own->format = slot.chunk->format;
  own->level = slot.chunk->level;
  own->version = store_.next_version();  // what this slot's file holds stays checkable by version
  if (slot.disk_version.load() == slot.chunk->version) slot.disk_version.store(own->version);
  slot.chunk = std::move(own);
  if (slot.state == ChunkState::resident) slot.state = ChunkState::dropped;
}

void KvSequence::install(int c, Mem mem, size_t bytes, hal::KvFormat format, ChunkState state) {
  Mem old;
  {
    std::lock_guard<std::mutex> lock(store_.mu_);
    Slot& slot = chunks_[c];
    // Only compression changes a shared chunk in place (for every holder); anything else
    // gives this slot a chunk of its own first.
    if (!(state == ChunkState::resident && slot.chunk->resident)) detach_locked(c);
    Chunk& ch = *slot.chunk;
    store_.uncharge_locked(ch);
    old = std::move(ch.mem);
    ch.mem = std::move(mem);
    ch.bytes = bytes;
    ch.format = format;
    ch.resident = state == ChunkState::resident;
    ch.charged = bytes != 0 ? share_ : nullptr;
    ch.version = store_.next_version();
    slot.state = state;
  }
}

Status KvSequence::reserve(int n_tokens) {
  while (capacity() < n_tokens) {
    Slot fresh;
    fresh.mass.assign(geo_.chunk_tokens, 0.0f);
    fresh.seen.assign(geo_.chunk_tokens, 0);
    {
      std::lock_guard<std::mutex> lock(store_.mu_);
      chunks_.push_back(std::move(fresh));
    }
    Status s = make_resident(n_chunks() - 1);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(store_.mu_);
      chunks_.pop_back();  // holds no memory: the claim failed
      return s;
    }
  }
  return Status::Ok();
}

int KvSequence::truncate(int n_tokens) {
  n_tokens = std::max(0, n_tokens);
  int keep = (n_tokens + geo_.chunk_tokens - 1) / geo_.chunk_tokens;
  // Rows are written only into resident f16 chunks of this sequence's own: a partly kept
  // chunk of another kind, or one shared with a fork, would take the next rows wrongly (or
  // change under the other holders), so it is recomputed whole instead.
  const int whole = n_tokens / geo_.chunk_tokens;
  if (keep > whole && keep <= n_chunks() &&
      (chunks_[whole].state != ChunkState::resident || chunks_[whole].chunk->format != hal::KvFormat::f16 ||
       shared(whole))) {
    keep = whole;
    n_tokens = whole * geo_.chunk_tokens;
  }
  std::vector<Mem> freed;
  std::lock_guard<std::mutex> lock(store_.mu_);
  while (n_chunks() > keep) {
    let_go_locked(chunks_.back(), freed);
    chunks_.pop_back();
  }
  return n_tokens;
}

Status KvSequence::make_resident(int c, hal::KvFormat format) {
  const size_t bytes = geo_.chunk_bytes(format);
  auto mem = store_.claim(bytes, this);
  if (!mem.ok()) return mem.status();
  install(c, std::move(mem).value(), bytes, format, ChunkState::resident);
  return Status::Ok();
}

void KvSequence::note_level(int p0, int n, int percent) {
  if (n <= 0) return;
  const int C = geo_.chunk_tokens;
  const auto level = static_cast<uint8_t>(std::clamp(percent, 1, 100));
  std::lock_guard<std::mutex> lock(store_.mu_);
  for (int c = p0 / C; c <= (p0 + n - 1) / C && c < n_chunks(); ++c) {
    uint8_t& l = chunks_[c].chunk->level;
    l = p0 <= c * C ? level : std::min(l, level);
  }
}

void KvSequence::drop(int c) { install(c, Mem(), 0, chunks_[c].chunk->format, ChunkState::dropped); }

void KvSequence::release(int c) {
  Mem old;
  {
    std::lock_guard<std::mutex> lock(store_.mu_);
    detach_locked(c);
    Slot& slot = chunks_[c];
    Chunk& ch = *slot.chunk;
    store_.uncharge_locked(ch);
    old = std::move(ch.mem);
    ch.resident = false;
    // The content is kept by its file (version unchanged) or lost.
    slot.state = slot.disk_version.load() == ch.version ? ChunkState::swapped : ChunkState::dropped;
  }
}

Status KvSequence::share_prefix(const KvSequence& parent, int n_chunks) {
  if (&parent.store_ != &store_) return Status(Code::internal, "kv: sharing chunks across stores");
  std::lock_guard<std::mutex> lock(store_.mu_);
  if (!chunks_.empty()) return Status(Code::internal, "kv: sharing into a sequence that holds chunks");
  if (n_chunks < 0 || n_chunks > parent.n_chunks()) return Status(Code::internal, "kv: sharing more chunks than the parent holds");
  chunks_.reserve(static_cast<size_t>(n_chunks));
  for (int c = 0; c < n_chunks; ++c) {
    const Slot& from = parent.chunks_[c];
    Slot slot;
    slot.mass = from.mass;
    slot.seen = from.seen;
    if (from.state == ChunkState::resident) {
      slot.chunk = from.chunk;
      slot.state = ChunkState::resident;
    } else {
      slot.chunk->version = store_.next_version();  // nothing here: recomputed at switch-in
    }
    chunks_.push_back(std::move(slot));
  }
  return Status::Ok();
}

bool KvSequence::shared(int c) const {
  std::lock_guard<std::mutex> lock(store_.mu_);
  return chunks_[c].chunk.use_count() > 1;
}

bool KvSequence::held_elsewhere(int c) const {
  std::lock_guard<std::mutex> lock(store_.mu_);
  const Chunk* ch = chunks_[c].chunk.get();
  if (chunks_[c].chunk.use_count() <= 1) return false;
  for (const KvSequence* s : store_.seqs_) {
    if (s == this || !s->pinned_) continue;
    for (const Slot& slot : s->chunks_)
      if (slot.chunk.get() == ch) return true;
  }
  return false;
}

Status KvSequence::set_share(std::shared_ptr<KvShare> share) {
  std::lock_guard<std::mutex> lock(store_.mu_);
  for (const Slot& slot : chunks_)
    if (slot.chunk->bytes != 0) return Status(Code::internal, "kv: a sequence's share changes only while it holds no memory");
  share_ = std::move(share);
  return Status::Ok();
}

void KvSequence::set_write_back(WriteBack fn) {
  std::lock_guard<std::mutex> lock(store_.mu_);
  write_back_ = std::move(fn);
}

void KvSequence::mark_stored(int c, uint64_t version) {
  std::lock_guard<std::mutex> lock(store_.mu_);
  if (c >= 0 && c < n_chunks()) chunks_[c].disk_version.store(version);
}

void KvSequence::mark_loaded(int c) {
  std::lock_guard<std::mutex> lock(store_.mu_);
  chunks_[c].disk_version.store(chunks_[c].chunk->version);
}

Status KvSequence::restore(std::span<const RestoredChunk> chunks) {
  if (!chunks_.empty()) return Status(Code::internal, "kv: restoring into a sequence that holds chunks");
  const size_t C = static_cast<size_t>(geo_.chunk_tokens);
  std::vector<Slot> fresh(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    const RestoredChunk& r = chunks[i];
    if ((!r.mass.empty() && r.mass.size() != C) || (!r.seen.empty() && r.seen.size() != C))
      return Status(Code::internal, "kv: restored density of chunk " + std::to_string(i) + " has the wrong length");
    Slot& slot = fresh[i];
    slot.chunk->format = r.format;
    slot.chunk->level = static_cast<uint8_t>(std::clamp(r.level, 1, 100));
    slot.mass = r.mass.empty() ? std::vector<float>(C, 0.0f) : r.mass;
    slot.seen = r.seen.empty() ? std::vector<uint32_t>(C, 0) : r.seen;
    slot.state = r.on_disk ? ChunkState::swapped : ChunkState::dropped;
    slot.chunk->version = store_.next_version();
    if (r.on_disk) slot.disk_version.store(slot.chunk->version);
  }
  std::lock_guard<std::mutex> lock(store_.mu_);
  for (Slot& slot : fresh) chunks_.push_back(std::move(slot));
  return Status::Ok();
}

uint64_t KvSequence::resident_bytes() const {
  std::lock_guard<std::mutex> lock(store_.mu_);
  uint64_t sum = 0;
  for (const Slot& slot : chunks_) sum += slot.chunk->bytes;
  return sum;
}

int KvSequence::count(ChunkState s) const {
  std::lock_guard<std::mutex> lock(store_.mu_);
  return static_cast<int>(std::count_if(chunks_.begin(), chunks_.end(), [s](const Slot& slot) { return slot.state == s; }));
}

KvSequence::Counts KvSequence::counts() const {
  std::lock_guard<std::mutex> lock(store_.mu_);
  Counts n;
  for (const Slot& slot : chunks_) {
    n.resident_bytes += slot.chunk->bytes;
    if (slot.state == ChunkState::swapped) n.swapped++;
    else if (slot.state == ChunkState::dropped) n.dropped++;
    else {
      if (slot.chunk.use_count() > 1) n.shared++;
      switch (slot.chunk->format) {
        case hal::KvFormat::q8: n.q8++; break;
        case hal::KvFormat::q4: n.q4++; break;
        case hal::KvFormat::q3: n.q3++; break;
        case hal::KvFormat::q2: n.q2++; break;
        case hal::KvFormat::f16: n.f16++; break;
      }
    }
  }
  return n;
}

uint64_t KvSequence::resident_bytes_once(std::unordered_set<const void*>& seen) const {
  std::lock_guard<std::mutex> lock(store_.mu_);
  uint64_t sum = 0;
  for (const Slot& slot : chunks_)
    if (slot.state != ChunkState::swapped && slot.state != ChunkState::dropped && seen.insert(slot.chunk.get()).second)
      sum += slot.chunk->bytes;
  return sum;
}

Status KvSequence::read_chunk(int c, size_t offset, std::span<uint8_t> out) const {
  if (chunks_[c].state != ChunkState::resident)
    return Status(Code::internal, "kv: reading a chunk that is not resident");
  return store_.memory().read(chunks_[c].chunk->mem, offset, out);
}

Status KvSequence::write_chunk(int c, size_t offset, std::span<const uint8_t> in) {
  if (chunks_[c].state != ChunkState::resident)
    return Status(Code::internal, "kv: writing a chunk that is not resident");
  return store_.memory().write(chunks_[c].chunk->mem, offset, in);
}

Result<std::span<const uint8_t>> KvSequence::host_bytes(int c, std::vector<uint8_t>& staged) const {
  const size_t bytes = geo_.chunk_bytes(chunks_[c].chunk->format);
  if (const uint8_t* mem = chunk_data(c)) return std::span<const uint8_t>(mem, bytes);
  staged.resize(bytes);
  LLMSVC_RETURN_IF_ERROR(read_chunk(c, 0, staged));
  return std::span<const uint8_t>(staged);
}

const void* KvSequence::block(int c, int layer, hal::KvPart part) const {
  const Chunk& ch = *chunks_[c].chunk;
  const hal::KvBlockShape shape = geo_.shape();
  size_t off = size_t(layer) * geo_.layer_bytes(ch.format);
  if (part == hal::KvPart::value) off += hal::kv_block_bytes(ch.format, hal::KvPart::key, shape);
  return ch.mem.data() + off;
}

uint16_t* KvSequence::row(int layer, int pos, hal::KvPart part) {
  const int c = pos / geo_.chunk_tokens, t = pos % geo_.chunk_tokens;
  // Never a shared chunk: forks share full chunks only and truncate keeps no shared one partly.
  Chunk& ch = *chunks_[c].chunk;
  ch.version = store_.next_version();  // the caller writes through the pointer
  auto* base = static_cast<uint16_t*>(const_cast<void*>(block(c, layer, part)));
  return base + size_t(t) * geo_.kv_dim();
}

void KvSequence::note_queries(int p0, int n) {
  if (n <= 0) return;
  const int C = geo_.chunk_tokens, end = p0 + n;
  for (int c = 0; c < n_chunks() && c * C < end; ++c) {
    for (int t = 0; t < C; ++t) {
      const int pos = c * C + t;
      if (pos >= end) break;
      chunks_[c].seen[t] += static_cast<uint32_t>(end - std::max(pos, p0));  // queries at or after pos
    }
  }
}

double KvSequence::density(int c) const {
  const Slot& ch = chunks_[c];
  double m = 0, s = 0;
  for (size_t t = 0; t < ch.mass.size(); ++t) {
    m += ch.mass[t];
    s += ch.seen[t];
  }
  return s > 0 ? m / s : 0.0;
}

KvChunkStore::KvChunkStore(const KvGeometry& geometry, uint64_t budget_bytes, EvictionOrder order,
                           hal::MemoryPool* memory)
    : geo_(geometry), budget_(budget_bytes), order_(order), memory_(memory ? memory : &hal::host::shared_host_pool()) {}

uint64_t KvChunkStore::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

uint64_t KvChunkStore::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

uint64_t KvChunkStore::evictions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evictions_;
}

void KvChunkStore::add(KvSequence* s) {
  std::lock_guard<std::mutex> lock(mu_);
  seqs_.push_back(s);
}

void KvChunkStore::remove(KvSequence* s) {
  std::lock_guard<std::mutex> lock(mu_);
  seqs_.erase(std::remove(seqs_.begin(), seqs_.end(), s), seqs_.end());
}

void KvChunkStore::pin(KvSequence& seq) {
  std::lock_guard<std::mutex> lock(mu_);
  seq.pinned_ = true;
  seq.last_use_ = ++clock_;
}

void KvChunkStore::unpin(KvSequence& seq) {
  std::lock_guard<std::mutex> lock(mu_);
  seq.pinned_ = false;
}

Result<KvChunkStore::Mem> KvChunkStore::claim(size_t bytes, const KvSequence* requester) {
  KvShare* share = requester ? requester->share_.get() : nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (share && share->used_ + bytes > share->limit_) {
      if (!evict_one_locked(requester, share))
        return Status(Code::quota_exceeded, "kv: this app's share of the KV budget (" + std::to_string(share->limit_) +
                                                " bytes) is held by its contexts inside calls");
    }
    while (budget_ != 0 && used_ + bytes > budget_) {
      if (!evict_one_locked(requester))
        return Status(Code::out_of_memory, "kv: budget of " + std::to_string(budget_) + " bytes exhausted (" +
                                               std::to_string(used_) + " held by contexts inside calls)");
    }
    used_ += bytes;
    if (share) share->used_ += bytes;
    peak_ = std::max(peak_, used_);
  }
  auto mem = memory_->alloc(bytes);
  if (!mem.ok()) {
    unclaim(bytes, requester);
    return Status(Code::out_of_memory, "kv: a chunk of " + std::to_string(bytes) + " bytes: " + mem.status().message());
  }
  return mem;
}

void KvChunkStore::unclaim(size_t bytes, const KvSequence* requester) {
  std::lock_guard<std::mutex> lock(mu_);
  used_ -= bytes;
  if (KvShare* share = requester ? requester->share_.get() : nullptr) share->used_ -= bytes;
}

uint64_t KvChunkStore::share_used(const KvShare& share) const {
  std::lock_guard<std::mutex> lock(mu_);
  return share.used_;
}

void KvChunkStore::uncharge_locked(KvSequence::Chunk& ch) {
  used_ -= ch.bytes;
  if (ch.charged) ch.charged->used_ -= ch.bytes;
  ch.bytes = 0;
  ch.charged = nullptr;
}

bool KvChunkStore::evict_one_locked(const KvSequence* requester, const KvShare* within) {
  // Shared chunks that a pinned holder (or the requester) holds stay, whoever else holds them.
  std::unordered_set<const KvSequence::Chunk*> held;
  for (const KvSequence* s : seqs_) {
    if (!s->pinned_ && s != requester) continue;
    for (const KvSequence::Slot& slot : s->chunks_)
      if (slot.chunk.use_count() > 1) held.insert(slot.chunk.get());
  }
  KvSequence* victim_seq = nullptr;
  int victim = -1;
  std::tuple<bool, int, uint64_t> best{true, std::numeric_limits<int>::max(), 0};
  for (KvSequence* s : seqs_) {
    if (s->pinned_ || s == requester) continue;
    for (int c = 0; c < s->n_chunks(); ++c) {
      const KvSequence::Slot& slot = s->chunks_[c];
      const KvSequence::Chunk& ch = *slot.chunk;
      if (slot.state != ChunkState::resident) continue;
      if (within && ch.charged.get() != within) continue;
      if (!held.empty() && held.count(&ch)) continue;
      const int lvl = order_ == EvictionOrder::lctru ? level(ch.format) : 0;
      // Without a write-back hook (ahead-of-time swap-out), a chunk whose file is not current
      // would be dropped: its write is still queued (the call that changed it just ended) or
      // failed. Taking clean chunks first costs a load later instead of a recompute.
      const bool dirty = !s->write_back_ && slot.disk_version.load() != ch.version;
      const std::tuple<bool, int, uint64_t> key{dirty, lvl, s->last_use_};
      if (victim < 0 || key < best) {
        best = key;
        victim_seq = s;
        victim = c;
      }
    }
  }
  if (victim < 0) return false;
  if (order_ != EvictionOrder::whole_sequence) {
    evict_chunk_locked(*victim_seq, victim);
    return true;
  }
  for (int c = 0; c < victim_seq->n_chunks(); ++c) {
    const KvSequence::Slot& slot = victim_seq->chunks_[c];
    if (slot.state == ChunkState::resident && !held.count(slot.chunk.get()) &&
        (!within || slot.chunk->charged.get() == within))
      evict_chunk_locked(*victim_seq, c);
  }
  return true;
}

void KvChunkStore::evict_chunk_locked(KvSequence& s, int c) {
  std::shared_ptr<KvSequence::Chunk> ch = s.chunks_[c].chunk;
  // Every holder's slot (one, unless shared): each keeps the content through its own file.
  auto leave = [&](KvSequence& h, int i) {
    KvSequence::Slot& slot = h.chunks_[i];
    bool current = slot.disk_version.load() == ch->version;
    if (!current && h.write_back_ && h.write_back_(i)) {
      slot.disk_version.store(ch->version);
      current = true;
    }
    slot.state = current ? ChunkState::swapped : ChunkState::dropped;
  };
  if (ch.use_count() > 2) {  // s's slot, `ch`, and another holder's
    for (KvSequence* h : seqs_)
      for (int i = 0; i < h->n_chunks(); ++i)
        if (h->chunks_[i].chunk == ch) leave(*h, i);
  } else {
    leave(s, c);
  }
  ch->resident = false;
  ch->mem.reset();
  uncharge_locked(*ch);
  evictions_++;
}

}  // namespace llmsvc::policy
