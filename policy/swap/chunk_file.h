// SPDX-License-Identifier: Apache-2.0
// Chunk swap files: one KV chunk (all layers) as a self-checking file whose layers can be
// read and decoded one at a time (the swap-in pipeline loads layer l+1 while layer l is
// recomputed). The byte layout is documented in docs/swap-format.md.
//
// A chunk's payload is contiguous: for each layer in order, the K block then the V block
// (hal/kv_format.h); every layer has the same size. Each layer is one frame, compressed on
// its own. Every byte of a file is untrusted when read back: the parser checks every
// field against the file size (overflow-safe) and a checksum over header + frame table;
// decode_layer checks a frame's checksum before decompressing and the payload's after.
// Malformed input is Code::io with a message naming what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "hal/kv_format.h"

namespace llmsvc::policy {

struct ChunkMeta {
  uint64_t model_hash = 0;   // identifies the model the K/V came from
  uint64_t tokens_hash = 0;  // hash of the chunk's token ids: a file never pairs with another history
  uint32_t chunk_index = 0;  // chunk i holds positions [first_pos, first_pos + n_tokens)
  int32_t first_pos = 0;
  uint16_t n_tokens = 0;
  hal::KvFormat format = hal::KvFormat::f16;
  uint16_t n_layer = 0, n_head_kv = 0, head_dim = 0;

  bool operator==(const ChunkMeta&) const = default;
};

enum class ChunkCodec : uint8_t { none = 0, lz4 = 1, zstd = 2 };
const char* chunk_codec_name(ChunkCodec c);

struct ChunkEncoding {
  ChunkCodec codec = ChunkCodec::lz4;
  int zstd_level = 3;  // ZSTD_minCLevel()..ZSTD_maxCLevel(); zstd only
};

// One layer's frame. A frame whose stored size equals its raw size holds the payload
// uncompressed, whatever the file's codec (the encoder stores a layer raw when compressing
// does not make it smaller), so stored_size <= raw_size always.
struct FrameEntry {
  uint64_t offset = 0;       // from the start of the file
  uint32_t stored_size = 0;  // bytes in the file
  uint32_t raw_size = 0;     // bytes of the layer's payload (K block + V block)
  uint64_t stored_hash = 0;  // xxh3-64 of the stored bytes
  uint64_t raw_hash = 0;     // xxh3-64 of the payload
};

// A validated header + frame table.
struct ChunkIndex {
  ChunkMeta meta;
  ChunkCodec codec = ChunkCodec::none;
  uint64_t file_size = 0;
  std::vector<FrameEntry> frames;  // one per layer

  size_t layer_bytes() const { return frames.empty() ? 0 : frames[0].raw_size; }
};

inline constexpr uint16_t kChunkFileVersion = 1;
inline constexpr size_t kChunkHeaderBytes = 64;
inline constexpr size_t kChunkFrameEntryBytes = 32;
inline constexpr uint32_t kMaxChunkKvDim = 1u << 16;        // n_head_kv * head_dim
inline constexpr uint64_t kMaxChunkLayerBytes = 1u << 30;   // one layer's K + V

// Payload bytes of one layer / of the whole chunk. Both 0 when `meta` is invalid.
uint64_t chunk_layer_bytes(const ChunkMeta& meta);
uint64_t chunk_payload_bytes(const ChunkMeta& meta);
// Checks the meta's fields (formats, non-zero dims, kv_dim % 8 == 0, limits above, positions
// within int32); failures carry `code`.
Status check_chunk_meta(const ChunkMeta& meta, Code code = Code::invalid_argument);

// Bytes of header + frame table + checksum for n_layer layers: where frame 0 starts.
constexpr size_t chunk_index_bytes(uint16_t n_layer) {
  return kChunkHeaderBytes + size_t{n_layer} * kChunkFrameEntryBytes + sizeof(uint64_t);
}
// The most bytes encode_chunk can produce for `meta` (frames never exceed their raw size).
uint64_t max_encoded_chunk_bytes(const ChunkMeta& meta);

// Encodes `payload` (chunk_payload_bytes(meta) bytes) into `out` (at least
// max_encoded_chunk_bytes(meta)); returns the file's size. Bad arguments: invalid_argument.
Result<size_t> encode_chunk(const ChunkMeta& meta, std::span<const uint8_t> payload, const ChunkEncoding& enc,
                            std::span<uint8_t> out);
Result<std::vector<uint8_t>> encode_chunk(const ChunkMeta& meta, std::span<const uint8_t> payload,
                                          const ChunkEncoding& enc = {});

// How many leading bytes of a file parse_chunk_index needs, read from the first
// kChunkHeaderBytes (fewer, or a bad magic / version: Code::io).
Result<size_t> chunk_index_size(std::span<const uint8_t> head);
// Validates the header and frame table of a file of `file_size` bytes whose first bytes are
// `head` (at least chunk_index_size(head), else invalid_argument; more is ignored).
Result<ChunkIndex> parse_chunk_index(std::span<const uint8_t> head, uint64_t file_size);
// The same over a whole file in memory.
inline Result<ChunkIndex> parse_chunk_file(std::span<const uint8_t> file) { return parse_chunk_index(file, file.size()); }

// Decodes layer `layer` from its stored bytes `frame` (frames[layer].stored_size bytes) into
// `out` (raw_size bytes), checking both checksums; decompression never writes past raw_size.
// For an uncompressed frame `frame` may be `out` itself (read straight into the destination).
Status decode_layer(const ChunkIndex& index, int layer, std::span<const uint8_t> frame, std::span<uint8_t> out);
// decode_layer for one frame entry of a file of codec `codec` (the frame's layer only names it in messages).
Status decode_frame(ChunkCodec codec, const FrameEntry& entry, int layer, std::span<const uint8_t> frame,
                    std::span<uint8_t> out);
// decode_layer, taking the frame from a whole file in memory.
Status decode_layer_from_file(const ChunkIndex& index, int layer, std::span<const uint8_t> file,
                              std::span<uint8_t> out);

// "<chunk_index>.kvc": the file name of a chunk in its swap directory.
std::string chunk_file_name(uint32_t chunk_index);

}  // namespace llmsvc::policy
