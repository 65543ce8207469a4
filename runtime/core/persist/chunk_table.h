// SPDX-License-Identifier: Apache-2.0
// ChunkTable: a context's KV chunk table on storage (contexts/<id>/chunks.table): how many
// positions were evaluated, and each chunk's format and density bookkeeping, so a context
// reopened in a fresh process keeps its bit allocation and finds its chunk files' formats.
//
// Written after each call, atomically, by the swap writer after the chunk files queued
// before it. It is a hint: the token history is the source of truth and every chunk file
// checks itself against it; a missing, damaged or foreign table only means recomputing.
//
// Layout (little-endian): "LLKT" u16 version u16 chunk_tokens u64 model_hash i32 n_evaluated
// u32 n_chunks, then per chunk u8 format, u8 level (version 2; 1..100), f32 mass[chunk_tokens],
// u32 seen[chunk_tokens]; then the XXH3-64 of everything before it. Version 1 (no level) is
// read with every chunk at level 100.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/safe_dir.h"
#include "base/status.h"

namespace llmsvc::persist {

struct ChunkTable {
  static constexpr uint16_t kVersion = 2;
  static constexpr int kMaxChunkTokens = 4096;
  static constexpr uint32_t kMaxChunks = 1u << 20;

  struct Entry {
    uint8_t format = 16;         // hal::KvFormat's value (its bits per code)
    uint8_t level = 100;         // the elastic level that computed it (KvSequence::level)
    std::vector<float> mass;     // chunk_tokens entries
    std::vector<uint32_t> seen;  // chunk_tokens entries
  };
  int32_t chunk_tokens = 16;
  uint64_t model_hash = 0;
  int32_t n_evaluated = 0;
  std::vector<Entry> chunks;
};

// Code::invalid_argument for an inconsistent table (entry lengths, counts).
Result<std::vector<uint8_t>> encode_chunk_table(const ChunkTable& t);
// Parses untrusted bytes; Code::io names what is wrong (masses must be finite and >= 0,
// formats 16/8/4/3/2, levels 1..100, n_chunks == ceil(n_evaluated / chunk_tokens)).
Result<ChunkTable> parse_chunk_table(std::span<const uint8_t> bytes);
// Code::not_found when there is no table.
Result<ChunkTable> read_chunk_table(const std::string& path);
// The table `rel` below `dir` (the state root), reached through no symbolic link.
Result<ChunkTable> read_chunk_table(const fileio::SafeDir& dir, std::string_view rel);

}  // namespace llmsvc::persist
