// SPDX-License-Identifier: Apache-2.0
// ChunkTable <-> bytes, validated.
#include "runtime/core/persist/chunk_table.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include <xxhash.h>

#include "base/file_io.h"
#include "hal/kv_format.h"

namespace llmsvc::persist {
namespace {

constexpr char kTableMagic[4] = {'L', 'L', 'K', 'T'};
constexpr size_t kTableHeaderBytes = 4 + 2 + 2 + 8 + 4 + 4;

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  if constexpr (std::endian::native == std::endian::big) std::reverse(b, b + sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

template <class T>
T get(const uint8_t* p) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, p, sizeof(T));
  if constexpr (std::endian::native == std::endian::big) std::reverse(b, b + sizeof(T));
  T v;
  std::memcpy(&v, b, sizeof(T));
  return v;
}

Status bad(const std::string& what) { return Status(Code::io, "chunk table: " + what); }

}  // namespace

Result<std::vector<uint8_t>> encode_chunk_table(const ChunkTable& t) {
  if (t.chunk_tokens <= 0 || t.chunk_tokens > ChunkTable::kMaxChunkTokens || t.n_evaluated < 0 ||
      t.chunks.size() > ChunkTable::kMaxChunks ||
      t.chunks.size() != static_cast<size_t>((int64_t{t.n_evaluated} + t.chunk_tokens - 1) / t.chunk_tokens))
    return Status(Code::invalid_argument, "chunk table: inconsistent counts");
  const size_t C = static_cast<size_t>(t.chunk_tokens);
  std::vector<uint8_t> out;
  out.reserve(kTableHeaderBytes + t.chunks.size() * (2 + 8 * C) + 8);
  out.insert(out.end(), kTableMagic, kTableMagic + 4);
  put<uint16_t>(out, ChunkTable::kVersion);
  put<uint16_t>(out, static_cast<uint16_t>(t.chunk_tokens));
  put<uint64_t>(out, t.model_hash);
  put<int32_t>(out, t.n_evaluated);
  put<uint32_t>(out, static_cast<uint32_t>(t.chunks.size()));
  for (const ChunkTable::Entry& e : t.chunks) {
    if (!hal::kv_format_valid(e.format) || e.level < 1 || e.level > 100 || e.mass.size() != C || e.seen.size() != C)
      return Status(Code::invalid_argument, "chunk table: bad entry");
    out.push_back(e.format);
    out.push_back(e.level);
    for (float m : e.mass) put<float>(out, m);
    for (uint32_t s : e.seen) put<uint32_t>(out, s);
  }
  put<uint64_t>(out, XXH3_64bits(out.data(), out.size()));
  return out;
}

Result<ChunkTable> parse_chunk_table(std::span<const uint8_t> b) {
  if (b.size() < kTableHeaderBytes + 8) return bad("truncated");
  if (std::memcmp(b.data(), kTableMagic, 4) != 0) return bad("bad magic");
  const size_t body = b.size() - 8;
  if (XXH3_64bits(b.data(), body) != get<uint64_t>(b.data() + body)) return bad("checksum mismatch");
  const uint16_t version = get<uint16_t>(b.data() + 4);
  if (version != 1 && version != ChunkTable::kVersion) return bad("unsupported version");
  ChunkTable t;
  t.chunk_tokens = get<uint16_t>(b.data() + 6);
  t.model_hash = get<uint64_t>(b.data() + 8);
  t.n_evaluated = get<int32_t>(b.data() + 16);
  const uint32_t n = get<uint32_t>(b.data() + 20);
  if (t.chunk_tokens <= 0 || t.chunk_tokens > ChunkTable::kMaxChunkTokens) return bad("bad chunk_tokens");
  if (t.n_evaluated < 0 || n > ChunkTable::kMaxChunks ||
      n != static_cast<uint32_t>((int64_t{t.n_evaluated} + t.chunk_tokens - 1) / t.chunk_tokens))
    return bad("bad counts");
  const size_t C = static_cast<size_t>(t.chunk_tokens), entry = (version == 1 ? 1 : 2) + 8 * C;
  if (body - kTableHeaderBytes != size_t{n} * entry) return bad("size does not match its counts");
  t.chunks.resize(n);
  const uint8_t* p = b.data() + kTableHeaderBytes;
  for (uint32_t c = 0; c < n; ++c) {
    ChunkTable::Entry& e = t.chunks[c];
    e.format = *p++;
    if (!hal::kv_format_valid(e.format)) return bad("chunk " + std::to_string(c) + ": bad format");
    if (version > 1) {
      e.level = *p++;
      if (e.level < 1 || e.level > 100) return bad("chunk " + std::to_string(c) + ": bad level");
    }
    e.mass.resize(C);
    e.seen.resize(C);
    for (size_t i = 0; i < C; ++i, p += 4) {
      e.mass[i] = get<float>(p);
      if (!std::isfinite(e.mass[i]) || e.mass[i] < 0) return bad("chunk " + std::to_string(c) + ": bad mass");
    }
    for (size_t i = 0; i < C; ++i, p += 4) e.seen[i] = get<uint32_t>(p);
  }
  return t;
}

namespace {

constexpr size_t kMaxTableBytes = kTableHeaderBytes + 8 + size_t{ChunkTable::kMaxChunks} * 64;

Result<ChunkTable> parse_read(const Result<std::string>& text, const std::string& name) {
  if (!text.ok()) return text.status();
  auto t = parse_chunk_table(std::span(reinterpret_cast<const uint8_t*>(text->data()), text->size()));
  if (!t.ok()) return Status(t.status().code(), name + ": " + t.status().message());
  return t;
}

}  // namespace

Result<ChunkTable> read_chunk_table(const std::string& path) {
  return parse_read(fileio::read_file(path, kMaxTableBytes), path);
}

Result<ChunkTable> read_chunk_table(const fileio::SafeDir& dir, std::string_view rel) {
  return parse_read(dir.read_file(rel, kMaxTableBytes), dir.name_of(rel));
}

}  // namespace llmsvc::persist
