// SPDX-License-Identifier: Apache-2.0
// KV chunk store: budgeted chunk memory, chunk addressing, LCTRU eviction.
#include "policy/kv_chunk_store.h"

#include "hal/host/host_pool.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <tuple>

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

KvSequence::Chunk::Chunk(Chunk&& o) noexcept
    : state(o.state),
      format(o.format),
      mem(std::move(o.mem)),
      bytes(o.bytes),
      mass(std::move(o.mass)),
      seen(std::move(o.seen)),
      version(o.version),
      disk_version(o.disk_version.load()) {
  o.bytes = 0;
}

KvSequence::KvSequence(KvChunkStore& store) : store_(store), geo_(store.geometry()) { store_.add(this); }

KvSequence::~KvSequence() {
  store_.remove(this);  // no eviction can reach it any more
  for (int c = 0; c < n_chunks(); ++c) install(c, Mem(), 0, chunks_[c].format, ChunkState::dropped);
}

void KvSequence::install(int c, Mem mem, size_t bytes, hal::KvFormat format, ChunkState state) {
  Mem old;
  {
    std::lock_guard<std::mutex> lock(store_.mu_);
    Chunk& ch = chunks_[c];
    uncharge_locked(ch.bytes);
    old = std::move(ch.mem);
    ch.mem = std::move(mem);
    ch.bytes = bytes;
    ch.format = format;
    ch.state = state;
    ch.version = store_.next_version();
  }
}

Status KvSequence::reserve(int n_tokens) {
  while (capacity() < n_tokens) {
    Chunk fresh;
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
  // Rows are written only into resident f16 chunks: a partly kept chunk of another kind would
  // take the next rows wrongly, so it is recomputed whole instead.
  const int whole = n_tokens / geo_.chunk_tokens;
  if (keep > whole && keep <= n_chunks() &&
      (chunks_[whole].state != ChunkState::resident || chunks_[whole].format != hal::KvFormat::f16)) {
    keep = whole;
    n_tokens = whole * geo_.chunk_tokens;
  }
  while (n_chunks() > keep) {
    install(n_chunks() - 1, Mem(), 0, chunks_.back().format, ChunkState::dropped);
    std::lock_guard<std::mutex> lock(store_.mu_);
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

void KvSequence::drop(int c) { install(c, Mem(), 0, chunks_[c].format, ChunkState::dropped); }

void KvSequence::release(int c) {
  Mem old;
  {
    std::lock_guard<std::mutex> lock(store_.mu_);
    Chunk& ch = chunks_[c];
    uncharge_locked(ch.bytes);
    old = std::move(ch.mem);
    ch.bytes = 0;
    // The content is kept by its file (version unchanged) or lost.
    ch.state = ch.disk_version.load() == ch.version ? ChunkState::swapped : ChunkState::dropped;
  }
}

void KvSequence::uncharge_locked(size_t bytes) {
  store_.used_ -= bytes;
  if (share_) share_->used_ -= bytes;
}

Status KvSequence::set_share(std::shared_ptr<KvShare> share) {
  std::lock_guard<std::mutex> lock(store_.mu_);
  for (const Chunk& ch : chunks_)
    if (ch.bytes != 0) return Status(Code::internal, "kv: a sequence's share changes only while it holds no memory");
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
  chunks_[c].disk_version.store(chunks_[c].version);
}

Status KvSequence::restore(std::span<const RestoredChunk> chunks) {
  if (!chunks_.empty()) return Status(Code::internal, "kv: restoring into a sequence that holds chunks");
  const size_t C = static_cast<size_t>(geo_.chunk_tokens);
  std::vector<Chunk> fresh(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    const RestoredChunk& r = chunks[i];
    if ((!r.mass.empty() && r.mass.size() != C) || (!r.seen.empty() && r.seen.size() != C))
      return Status(Code::internal, "kv: restored density of chunk " + std::to_string(i) + " has the wrong length");
    Chunk& ch = fresh[i];
    ch.format = r.format;
    ch.mass = r.mass.empty() ? std::vector<float>(C, 0.0f) : r.mass;
    ch.seen = r.seen.empty() ? std::vector<uint32_t>(C, 0) : r.seen;
    ch.state = r.on_disk ? ChunkState::swapped : ChunkState::dropped;
    ch.version = store_.next_version();
    if (r.on_disk) ch.disk_version.store(ch.version);
  }
  std::lock_guard<std::mutex> lock(store_.mu_);
  for (Chunk& ch : fresh) chunks_.push_back(std::move(ch));
  return Status::Ok();
}

uint64_t KvSequence::resident_bytes() const {
  std::lock_guard<std::mutex> lock(store_.mu_);
  uint64_t sum = 0;
  for (const Chunk& ch : chunks_) sum += ch.bytes;
  return sum;
}

int KvSequence::count(ChunkState s) const {
  std::lock_guard<std::mutex> lock(store_.mu_);
  return static_cast<int>(std::count_if(chunks_.begin(), chunks_.end(), [s](const Chunk& ch) { return ch.state == s; }));
}

KvSequence::Counts KvSequence::counts() const {
  std::lock_guard<std::mutex> lock(store_.mu_);
  Counts n;
  for (const Chunk& ch : chunks_) {
    n.resident_bytes += ch.bytes;
    if (ch.state == ChunkState::swapped) n.swapped++;
    else if (ch.state == ChunkState::dropped) n.dropped++;
    else if (ch.format == hal::KvFormat::q8) n.q8++;
    else if (ch.format == hal::KvFormat::q4) n.q4++;
    else if (ch.format == hal::KvFormat::q3) n.q3++;
    else if (ch.format == hal::KvFormat::q2) n.q2++;
    else n.f16++;
  }
  return n;
}

Status KvSequence::read_chunk(int c, size_t offset, std::span<uint8_t> out) const {
  if (chunks_[c].state != ChunkState::resident)
    return Status(Code::internal, "kv: reading a chunk that is not resident");
  return store_.memory().read(chunks_[c].mem, offset, out);
}

Status KvSequence::write_chunk(int c, size_t offset, std::span<const uint8_t> in) {
  if (chunks_[c].state != ChunkState::resident)
    return Status(Code::internal, "kv: writing a chunk that is not resident");
  return store_.memory().write(chunks_[c].mem, offset, in);
}

Result<std::span<const uint8_t>> KvSequence::host_bytes(int c, std::vector<uint8_t>& staged) const {
  const size_t bytes = geo_.chunk_bytes(chunks_[c].format);
  if (const uint8_t* mem = chunk_data(c)) return std::span<const uint8_t>(mem, bytes);
  staged.resize(bytes);
  LLMSVC_RETURN_IF_ERROR(read_chunk(c, 0, staged));
  return std::span<const uint8_t>(staged);
}

const void* KvSequence::block(int c, int layer, hal::KvPart part) const {
  const Chunk& ch = chunks_[c];
  const hal::KvBlockShape shape = geo_.shape();
  size_t off = size_t(layer) * geo_.layer_bytes(ch.format);
  if (part == hal::KvPart::value) off += hal::kv_block_bytes(ch.format, hal::KvPart::key, shape);
  return ch.mem.data() + off;
}

uint16_t* KvSequence::row(int layer, int pos, hal::KvPart part) {
  const int c = pos / geo_.chunk_tokens, t = pos % geo_.chunk_tokens;
  Chunk& ch = chunks_[c];
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
  const Chunk& ch = chunks_[c];
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
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= bytes;
    if (share) share->used_ -= bytes;
    return Status(Code::out_of_memory, "kv: a chunk of " + std::to_string(bytes) + " bytes: " + mem.status().message());
  }
  return mem;
}

uint64_t KvChunkStore::share_used(const KvShare& share) const {
  std::lock_guard<std::mutex> lock(mu_);
  return share.used_;
}

bool KvChunkStore::evict_one_locked(const KvSequence* requester, const KvShare* within) {
  KvSequence* victim_seq = nullptr;
  int victim = -1;
  std::tuple<bool, int, uint64_t> best{true, std::numeric_limits<int>::max(), 0};
  for (KvSequence* s : seqs_) {
    if (s->pinned_ || s == requester) continue;
    if (within && s->share_.get() != within) continue;
    for (int c = 0; c < s->n_chunks(); ++c) {
      const KvSequence::Chunk& ch = s->chunks_[c];
      if (ch.state != ChunkState::resident) continue;
      const int lvl = order_ == EvictionOrder::lctru ? level(ch.format) : 0;
      // Without a write-back hook (ahead-of-time swap-out), a chunk whose file is not current
      // would be dropped: its write is still queued (the call that changed it just ended) or
      // failed. Taking clean chunks first costs a load later instead of a recompute.
      const bool dirty = !s->write_back_ && ch.disk_version.load() != ch.version;
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
  for (int c = 0; c < victim_seq->n_chunks(); ++c)
    if (victim_seq->chunks_[c].state == ChunkState::resident) evict_chunk_locked(*victim_seq, c);
  return true;
}

void KvChunkStore::evict_chunk_locked(KvSequence& s, int c) {
  KvSequence::Chunk& ch = s.chunks_[c];
  bool current = ch.disk_version.load() == ch.version;
  if (!current && s.write_back_ && s.write_back_(c)) {
    ch.disk_version.store(ch.version);
    current = true;
  }
  ch.state = current ? ChunkState::swapped : ChunkState::dropped;
  ch.mem.reset();
  s.uncharge_locked(ch.bytes);
  ch.bytes = 0;
  evictions_++;
}

}  // namespace llmsvc::policy
