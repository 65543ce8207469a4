// SPDX-License-Identifier: Apache-2.0
// KV swap of a sequence's chunks: chunk file metas, swap-out of changed chunks, loading.
#include "policy/swap/kv_swap.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include <xxhash.h>

namespace llmsvc::policy {
namespace {

// Chunks read per batch: each holds its whole file in memory until decoded.
constexpr size_t kLoadBatch = 16;

int tokens_in_chunk(const KvGeometry& geo, int c, int n_valid) {
  return std::clamp(n_valid - c * geo.chunk_tokens, 0, geo.chunk_tokens);
}

// Bytes of rows [0, n) of a C-token f16 block.
size_t f16_rows_bytes(const KvGeometry& geo, int n) { return size_t(n) * geo.kv_dim() * sizeof(uint16_t); }

// A partial f16 chunk's file payload (per layer: K rows [0, n), then V rows [0, n)) from
// the chunk's memory, and back.
std::vector<uint8_t> pack_partial(const KvGeometry& geo, const uint8_t* mem, int n) {
  const size_t block = f16_rows_bytes(geo, geo.chunk_tokens), rows = f16_rows_bytes(geo, n);
  std::vector<uint8_t> out(size_t(geo.n_layer) * 2 * rows);
  for (int l = 0; l < geo.n_layer; ++l)
    for (int part = 0; part < 2; ++part)
      std::memcpy(out.data() + (size_t(l) * 2 + part) * rows, mem + (size_t(l) * 2 + part) * block, rows);
  return out;
}

void unpack_partial(const KvGeometry& geo, std::span<const uint8_t> payload, uint8_t* mem, int n) {
  const size_t block = f16_rows_bytes(geo, geo.chunk_tokens), rows = f16_rows_bytes(geo, n);
  for (int l = 0; l < geo.n_layer; ++l)
    for (int part = 0; part < 2; ++part)
      std::memcpy(mem + (size_t(l) * 2 + part) * block, payload.data() + (size_t(l) * 2 + part) * rows, rows);
}

// A loaded file's payload that was read into `staged` (n_tokens of a chunk: a partial one, or
// a whole one the host cannot write in place) put into resident chunk c; nothing to do when
// the read went into the chunk itself (staged empty).
Status place_staged(KvSequence& seq, int c, int n_tokens, std::span<const uint8_t> staged) {
  if (staged.empty()) return Status::Ok();
  const KvGeometry& geo = seq.geometry();
  if (n_tokens == geo.chunk_tokens) return seq.write_chunk(c, 0, staged);
  if (uint8_t* mem = seq.chunk_data(c)) {
    unpack_partial(geo, staged, mem, n_tokens);
    return Status::Ok();
  }
  std::vector<uint8_t> whole(geo.chunk_bytes(hal::KvFormat::f16));
  unpack_partial(geo, staged, whole.data(), n_tokens);
  return seq.write_chunk(c, 0, whole);
}

}  // namespace

std::vector<uint64_t> chunk_token_hashes(std::span<const int32_t> tokens, int chunk_tokens) {
  std::vector<uint64_t> out;
  uint64_t h = 0;
  for (size_t p = 0; p < tokens.size(); p += static_cast<size_t>(chunk_tokens)) {
    const size_t n = std::min(tokens.size() - p, static_cast<size_t>(chunk_tokens));
    h = XXH3_64bits_withSeed(tokens.data() + p, n * sizeof(int32_t), h);
    out.push_back(h);
  }
  return out;
}

ChunkMeta chunk_file_meta(const KvGeometry& geo, uint64_t model_hash, std::span<const uint64_t> hashes, int c,
                          int n_valid, hal::KvFormat format) {
  ChunkMeta m;
  m.model_hash = model_hash;
  m.tokens_hash = static_cast<size_t>(c) < hashes.size() ? hashes[c] : 0;
  m.chunk_index = static_cast<uint32_t>(c);
  m.first_pos = c * geo.chunk_tokens;
  m.n_tokens = static_cast<uint16_t>(tokens_in_chunk(geo, c, n_valid));
  m.format = format;
  m.n_layer = static_cast<uint16_t>(geo.n_layer);
  m.n_head_kv = static_cast<uint16_t>(geo.n_head_kv);
  m.head_dim = static_cast<uint16_t>(geo.head_dim);
  return m;
}

namespace {

// What chunk c's file holds: its meta and payload (a partial f16 chunk packed into `packed`;
// a chunk the host cannot read in place copied into `staged` first).
struct ChunkPayload {
  ChunkMeta meta;
  std::span<const uint8_t> bytes;
};
Result<ChunkPayload> chunk_payload(const KvSequence& seq, uint64_t model_hash, std::span<const uint64_t> hashes, int c,
                                   int n_valid, std::vector<uint8_t>& staged, std::vector<uint8_t>& packed) {
  const KvGeometry& geo = seq.geometry();
  const auto mem = seq.host_bytes(c, staged);
  if (!mem.ok()) return mem.status();
  ChunkPayload p{chunk_file_meta(geo, model_hash, hashes, c, n_valid, seq.format(c)), *mem};
  if (p.meta.n_tokens < geo.chunk_tokens) {
    packed = pack_partial(geo, mem->data(), p.meta.n_tokens);
    p.bytes = packed;
  }
  return p;
}

}  // namespace

Result<SwapOutQueued> store_changed_chunks(KvSequence& seq, SwapStore& store, uint64_t model_hash,
                                           std::span<const int32_t> tokens, int n_valid, const ChunkStored& done,
                                           uint64_t max_pending) {
  const KvGeometry& geo = seq.geometry();
  const int C = geo.chunk_tokens;
  n_valid = std::min(n_valid, static_cast<int>(tokens.size()));
  const std::vector<uint64_t> hashes = chunk_token_hashes(tokens.first(static_cast<size_t>(n_valid)), C);
  SwapOutQueued q;
  Status first_error = Status::Ok();
  for (int c = 0; c < seq.n_chunks() && c * C < n_valid; ++c) {
    if (seq.state(c) != ChunkState::resident || seq.disk_current(c)) continue;
    const int n = tokens_in_chunk(geo, c, n_valid);
    if (n < C && seq.format(c) != hal::KvFormat::f16) continue;  // only full chunks are ever compressed
    if (store.pending_write_bytes() >= max_pending) {
      q.deferred++;
      continue;
    }
    std::vector<uint8_t> staged, packed;
    const Result<ChunkPayload> payload = chunk_payload(seq, model_hash, hashes, c, n_valid, staged, packed);
    if (!payload.ok()) {
      if (first_error.ok()) first_error = payload.status();
      continue;
    }
    const ChunkPayload& p = *payload;
    const uint64_t version = seq.version(c);
    Status s = store.store_async(p.meta, p.bytes, [&seq, c, version, done](Result<ChunkIndex> r) {
      if (r.ok()) seq.mark_stored(c, version);
      if (done) done(c, r.ok() ? r->file_size : 0, r.ok() ? Status::Ok() : r.status());
    });
    if (s.code() == Code::quota_exceeded) {
      q.over_quota++;  // stays without a file: dropped if evicted, as a deferred one
      continue;
    }
    if (!s.ok()) {
      if (first_error.ok()) first_error = s;
      continue;
    }
    q.chunks++;
    q.payload_bytes += p.bytes.size();
  }
  if (!first_error.ok()) return first_error;
  return q;
}

Status store_chunk_now(const KvSequence& seq, SwapStore& store, uint64_t model_hash, std::span<const int32_t> tokens,
                       int n_valid, int c) {
  const KvGeometry& geo = seq.geometry();
  n_valid = std::min(n_valid, static_cast<int>(tokens.size()));
  if (c * geo.chunk_tokens >= n_valid) return Status(Code::invalid_argument, "kv swap: chunk holds no evaluated position");
  if (tokens_in_chunk(geo, c, n_valid) < geo.chunk_tokens && seq.format(c) != hal::KvFormat::f16)
    return Status(Code::invalid_argument, "kv swap: a partial chunk is always f16");
  // Only the hashes up to chunk c: each covers every token before it.
  const size_t upto = std::min(static_cast<size_t>(n_valid), static_cast<size_t>(c + 1) * geo.chunk_tokens);
  const std::vector<uint64_t> hashes = chunk_token_hashes(tokens.first(upto), geo.chunk_tokens);
  std::vector<uint8_t> staged, packed;
  const Result<ChunkPayload> p = chunk_payload(seq, model_hash, hashes, c, n_valid, staged, packed);
  if (!p.ok()) return p.status();
  return store.store(p->meta, p->bytes).status();
}

std::vector<Status> load_chunks(KvSequence& seq, SwapStore& store, uint64_t model_hash,
                                std::span<const int32_t> tokens, int n_valid, std::span<const int> chunks) {
  const KvGeometry& geo = seq.geometry();
  const int C = geo.chunk_tokens;
  n_valid = std::min(n_valid, static_cast<int>(tokens.size()));
  const std::vector<uint64_t> hashes = chunk_token_hashes(tokens.first(static_cast<size_t>(n_valid)), C);
  std::vector<Status> out(chunks.size());
  // One batch of files in flight while the one before is decoded.
  struct Batch {
    size_t first = 0;
    std::vector<ChunkMeta> metas;
    std::vector<std::span<uint8_t>> outs;
    // A partial chunk's tokens before unpacking, or a whole chunk the host cannot write in
    // place (a GPU's) before its copy into the chunk.
    std::vector<std::vector<uint8_t>> staged;
    ChunkRead read;
  };
  auto start = [&](size_t b0) {
    auto b = std::make_unique<Batch>();
    b->first = b0;
    const size_t nb = std::min(kLoadBatch, chunks.size() - b0);
    b->staged.resize(nb);
    for (size_t i = 0; i < nb; ++i) {
      const int c = chunks[b0 + i];
      const ChunkMeta meta = chunk_file_meta(geo, model_hash, hashes, c, n_valid, seq.format(c));
      b->metas.push_back(meta);
      if (meta.n_tokens < C && meta.format != hal::KvFormat::f16) {
        b->outs.emplace_back();  // refused by read_chunks: no such file is ever written
      } else if (meta.n_tokens == C && seq.chunk_data(c)) {
        b->outs.emplace_back(seq.chunk_data(c), geo.chunk_bytes(seq.format(c)));
      } else {
        b->staged[i].resize(chunk_payload_bytes(meta));
        b->outs.emplace_back(b->staged[i]);
      }
    }
    b->read = store.read_chunks_async(b->metas, b->outs);
    return b;
  };
  std::unique_ptr<Batch> cur = chunks.empty() ? nullptr : start(0);
  while (cur) {
    std::unique_ptr<Batch> next = cur->first + kLoadBatch < chunks.size() ? start(cur->first + kLoadBatch) : nullptr;
    std::vector<Result<ChunkIndex>> res = cur->read.wait();
    for (size_t i = 0; i < res.size(); ++i) {
      const int c = chunks[cur->first + i];
      if (!res[i].ok()) {
        out[cur->first + i] = res[i].status();
        continue;
      }
      if (Status s = place_staged(seq, c, cur->metas[i].n_tokens, cur->staged[i]); !s.ok()) {
        out[cur->first + i] = s;
        continue;
      }
      seq.mark_loaded(c);
    }
    cur = std::move(next);
  }
  return out;
}

}  // namespace llmsvc::policy
