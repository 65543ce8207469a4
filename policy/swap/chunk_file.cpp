// SPDX-License-Identifier: Apache-2.0
// Chunk swap file encoding and validation (layout: docs/swap-format.md).
#include "policy/swap/chunk_file.h"

#include <xxhash.h>

#include <bit>
#include <climits>
#include <cstring>

#include "policy/swap/frame_codec.h"
#include "policy/swap/le_bytes.h"

namespace llmsvc::policy {
namespace {

constexpr uint8_t kMagic[8] = {'L', 'L', 'M', 'S', 'V', 'K', 'V', 'C'};

// Header field offsets.
constexpr size_t kOffVersion = 8, kOffCodec = 10, kOffFormat = 11, kOffTokens = 12, kOffLayers = 14,
                 kOffHeads = 16, kOffHeadDim = 18, kOffChunk = 20, kOffFirstPos = 24, kOffReserved = 28,
                 kOffModelHash = 32, kOffTokensHash = 40, kOffLayerBytes = 48, kOffFileSize = 56;

Status io_error(const std::string& what) { return Status(Code::io, "chunk file: " + what); }

uint64_t xxh3(std::span<const uint8_t> b) { return XXH3_64bits(b.data(), b.size()); }


std::string layer_name(size_t l) { return "layer " + std::to_string(l) + ": "; }

}  // namespace

const char* chunk_codec_name(ChunkCodec c) {
  switch (c) {
    case ChunkCodec::none: return "none";
    case ChunkCodec::lz4: return "lz4";
    case ChunkCodec::zstd: return "zstd";
  }
  return "unknown";
}

Status check_chunk_meta(const ChunkMeta& m, Code code) {
  auto bad = [code](const std::string& what) {
    return Status(code, std::string(code == Code::io ? "chunk file: " : "chunk meta: ") + what);
  };
  if (!hal::kv_format_valid(static_cast<uint8_t>(m.format)))
    return bad("unknown KV format " + std::to_string(static_cast<unsigned>(m.format)));
  if (m.n_tokens == 0) return bad("n_tokens is 0");
  if (m.n_layer == 0) return bad("n_layer is 0");
  if (m.n_head_kv == 0 || m.head_dim == 0) return bad("n_head_kv or head_dim is 0");
  // Checked in 64 bits before anything computes kv_dim as an int (hal::KvBlockShape).
  const uint64_t kv_dim = uint64_t{m.n_head_kv} * m.head_dim;
  if (kv_dim > kMaxChunkKvDim) return bad("kv_dim " + std::to_string(kv_dim) + " exceeds the limit");
  if (kv_dim % 8 != 0) return bad("kv_dim " + std::to_string(kv_dim) + " is not a multiple of 8");
  if (m.first_pos < 0 || int64_t{m.first_pos} + m.n_tokens > INT32_MAX)
    return bad("positions [" + std::to_string(m.first_pos) + ", +" + std::to_string(m.n_tokens) + ") out of range");
  const hal::KvBlockShape s{m.n_tokens, m.n_head_kv, m.head_dim};
  const uint64_t layer = hal::kv_block_bytes(m.format, hal::KvPart::key, s) + hal::kv_block_bytes(m.format, hal::KvPart::value, s);
  if (layer > kMaxChunkLayerBytes) return bad("layer of " + std::to_string(layer) + " bytes exceeds the limit");
  return Status::Ok();
}

uint64_t chunk_layer_bytes(const ChunkMeta& m) {
  if (!check_chunk_meta(m).ok()) return 0;
  const hal::KvBlockShape s{m.n_tokens, m.n_head_kv, m.head_dim};
  return hal::kv_block_bytes(m.format, hal::KvPart::key, s) + hal::kv_block_bytes(m.format, hal::KvPart::value, s);
}

uint64_t chunk_payload_bytes(const ChunkMeta& m) { return chunk_layer_bytes(m) * m.n_layer; }

uint64_t max_encoded_chunk_bytes(const ChunkMeta& m) {
  const uint64_t payload = chunk_payload_bytes(m);
  return payload == 0 ? 0 : chunk_index_bytes(m.n_layer) + payload;
}

Result<size_t> encode_chunk(const ChunkMeta& m, std::span<const uint8_t> payload, const ChunkEncoding& enc,
                            std::span<uint8_t> out) {
  LLMSVC_RETURN_IF_ERROR(check_chunk_meta(m));
  if (enc.codec != ChunkCodec::none && enc.codec != ChunkCodec::lz4 && enc.codec != ChunkCodec::zstd)
    return Status(Code::invalid_argument, "chunk encoding: unknown codec");
  const size_t layer = chunk_layer_bytes(m);
  if (payload.size() != layer * m.n_layer)
    return Status(Code::invalid_argument, "chunk payload is " + std::to_string(payload.size()) + " bytes, expected " +
                                              std::to_string(layer * m.n_layer));
  if (out.size() < max_encoded_chunk_bytes(m))
    return Status(Code::invalid_argument, "chunk encode buffer too small");

  const size_t table = kChunkHeaderBytes, index_bytes = chunk_index_bytes(m.n_layer);
  size_t pos = index_bytes;
  for (size_t l = 0; l < m.n_layer; ++l) {
    const auto raw = payload.subspan(l * layer, layer);
    size_t stored = 0;
    if (enc.codec != ChunkCodec::none) {
      // Capacity one byte short of raw: a frame that does not get smaller is stored raw, which
      // keeps "stored_size == raw_size" an unambiguous marker of an uncompressed frame.
      auto r = compress_frame(enc.codec, enc.zstd_level, raw, out.subspan(pos, layer - 1));
      if (!r.ok()) return r.status();
      stored = *r;
    }
    if (stored == 0) {
      std::memcpy(out.data() + pos, raw.data(), layer);
      stored = layer;
    }
    uint8_t* e = out.data() + table + l * kChunkFrameEntryBytes;
    const uint64_t raw_hash = xxh3(raw);
    le::store<uint64_t>(e, pos);
    le::store<uint32_t>(e + 8, static_cast<uint32_t>(stored));
    le::store<uint32_t>(e + 12, static_cast<uint32_t>(layer));
    le::store<uint64_t>(e + 16, stored == layer ? raw_hash : xxh3(out.subspan(pos, stored)));
    le::store<uint64_t>(e + 24, raw_hash);
    pos += stored;
  }

  uint8_t* h = out.data();
  std::memset(h, 0, kChunkHeaderBytes);
  std::memcpy(h, kMagic, sizeof kMagic);
  le::store<uint16_t>(h + kOffVersion, kChunkFileVersion);
  h[kOffCodec] = static_cast<uint8_t>(enc.codec);
  h[kOffFormat] = static_cast<uint8_t>(m.format);
  le::store<uint16_t>(h + kOffTokens, m.n_tokens);
  le::store<uint16_t>(h + kOffLayers, m.n_layer);
  le::store<uint16_t>(h + kOffHeads, m.n_head_kv);
  le::store<uint16_t>(h + kOffHeadDim, m.head_dim);
  le::store<uint32_t>(h + kOffChunk, m.chunk_index);
  le::store<uint32_t>(h + kOffFirstPos, std::bit_cast<uint32_t>(m.first_pos));
  le::store<uint64_t>(h + kOffModelHash, m.model_hash);
  le::store<uint64_t>(h + kOffTokensHash, m.tokens_hash);
  le::store<uint64_t>(h + kOffLayerBytes, layer);
  le::store<uint64_t>(h + kOffFileSize, pos);
  const size_t checked = index_bytes - sizeof(uint64_t);
  le::store<uint64_t>(h + checked, xxh3(out.first(checked)));
  return pos;
}

Result<std::vector<uint8_t>> encode_chunk(const ChunkMeta& m, std::span<const uint8_t> payload,
                                          const ChunkEncoding& enc) {
  LLMSVC_RETURN_IF_ERROR(check_chunk_meta(m));
  std::vector<uint8_t> out(max_encoded_chunk_bytes(m));
  auto n = encode_chunk(m, payload, enc, out);
  if (!n.ok()) return n.status();
  out.resize(*n);
  return out;
}

Result<size_t> chunk_index_size(std::span<const uint8_t> head) {
  if (head.size() < kChunkHeaderBytes)
    return io_error("truncated header (" + std::to_string(head.size()) + " bytes, need " +
                    std::to_string(kChunkHeaderBytes) + ")");
  if (std::memcmp(head.data(), kMagic, sizeof kMagic) != 0) return io_error("bad magic (not a chunk file)");
  const uint16_t version = le::load<uint16_t>(head.data() + kOffVersion);
  if (version != kChunkFileVersion) return io_error("unsupported version " + std::to_string(version));
  return chunk_index_bytes(le::load<uint16_t>(head.data() + kOffLayers));
}

Result<ChunkIndex> parse_chunk_index(std::span<const uint8_t> head, uint64_t file_size) {
  auto need = chunk_index_size(head);
  if (!need.ok()) return need.status();
  const size_t index_bytes = *need;
  if (file_size < index_bytes)
    return io_error("truncated frame table (file is " + std::to_string(file_size) + " bytes, index needs " +
                    std::to_string(index_bytes) + ")");
  if (head.size() < index_bytes)
    return Status(Code::invalid_argument, "chunk file: parse_chunk_index given " + std::to_string(head.size()) +
                                              " bytes, the index needs " + std::to_string(index_bytes));
  const uint8_t* h = head.data();
  const size_t checked = index_bytes - sizeof(uint64_t);
  // The checksum comes first so that random damage is reported as such; the field checks
  // below still hold for a forged file with a valid checksum.
  if (xxh3(head.first(checked)) != le::load<uint64_t>(h + checked)) return io_error("header checksum mismatch");
  const uint64_t stated_size = le::load<uint64_t>(h + kOffFileSize);
  if (stated_size != file_size)
    return io_error("file is " + std::to_string(file_size) + " bytes, header says " + std::to_string(stated_size) +
                    (file_size < stated_size ? " (truncated)" : " (trailing bytes)"));

  ChunkIndex idx;
  idx.file_size = file_size;
  const uint8_t codec = h[kOffCodec];
  if (codec > static_cast<uint8_t>(ChunkCodec::zstd)) return io_error("unknown codec " + std::to_string(codec));
  idx.codec = static_cast<ChunkCodec>(codec);
  if (le::load<uint32_t>(h + kOffReserved) != 0) return io_error("reserved header bytes are not zero");
  ChunkMeta& m = idx.meta;
  m.format = static_cast<hal::KvFormat>(h[kOffFormat]);
  m.n_tokens = le::load<uint16_t>(h + kOffTokens);
  m.n_layer = le::load<uint16_t>(h + kOffLayers);
  m.n_head_kv = le::load<uint16_t>(h + kOffHeads);
  m.head_dim = le::load<uint16_t>(h + kOffHeadDim);
  m.chunk_index = le::load<uint32_t>(h + kOffChunk);
  m.first_pos = std::bit_cast<int32_t>(le::load<uint32_t>(h + kOffFirstPos));
  m.model_hash = le::load<uint64_t>(h + kOffModelHash);
  m.tokens_hash = le::load<uint64_t>(h + kOffTokensHash);
  LLMSVC_RETURN_IF_ERROR(check_chunk_meta(m, Code::io));
  const uint64_t layer = chunk_layer_bytes(m);
  if (le::load<uint64_t>(h + kOffLayerBytes) != layer)
    return io_error("layer size " + std::to_string(le::load<uint64_t>(h + kOffLayerBytes)) + " does not match the shape (" +
                    std::to_string(layer) + ")");

  // Frames are contiguous and in layer order, from the end of the index to the end of the
  // file: each offset is known before it is read, so no arithmetic below can overflow
  // (pos <= file_size throughout).
  idx.frames.resize(m.n_layer);
  uint64_t pos = index_bytes;
  for (size_t l = 0; l < m.n_layer; ++l) {
    const uint8_t* e = h + kChunkHeaderBytes + l * kChunkFrameEntryBytes;
    FrameEntry& f = idx.frames[l];
    f.offset = le::load<uint64_t>(e);
    f.stored_size = le::load<uint32_t>(e + 8);
    f.raw_size = le::load<uint32_t>(e + 12);
    f.stored_hash = le::load<uint64_t>(e + 16);
    f.raw_hash = le::load<uint64_t>(e + 24);
    if (f.offset != pos)
      return io_error(layer_name(l) + "frame offset " + std::to_string(f.offset) + ", expected " + std::to_string(pos));
    if (f.raw_size != layer)
      return io_error(layer_name(l) + "raw size " + std::to_string(f.raw_size) + ", expected " + std::to_string(layer));
    if (f.stored_size == 0 || f.stored_size > f.raw_size)
      return io_error(layer_name(l) + "stored size " + std::to_string(f.stored_size) + " out of range (1.." +
                      std::to_string(f.raw_size) + ")");
    if (idx.codec == ChunkCodec::none && f.stored_size != f.raw_size)
      return io_error(layer_name(l) + "compressed frame in an uncompressed file");
    if (f.stored_size == f.raw_size && f.stored_hash != f.raw_hash)
      return io_error(layer_name(l) + "uncompressed frame with two different checksums");
    if (f.stored_size > file_size - pos)
      return io_error(layer_name(l) + "frame of " + std::to_string(f.stored_size) + " bytes at " + std::to_string(pos) +
                      " runs past the end of the file");
    pos += f.stored_size;
  }
  if (pos != file_size)
    return io_error("frames end at " + std::to_string(pos) + ", file is " + std::to_string(file_size) + " bytes");
  return idx;
}

Status decode_layer(const ChunkIndex& idx, int layer, std::span<const uint8_t> frame, std::span<uint8_t> out) {
  if (layer < 0 || static_cast<size_t>(layer) >= idx.frames.size())
    return Status(Code::invalid_argument, "decode_layer: layer " + std::to_string(layer) + " out of range");
  return decode_frame(idx.codec, idx.frames[layer], layer, frame, out);
}

Status decode_frame(ChunkCodec codec, const FrameEntry& f, int layer, std::span<const uint8_t> frame,
                    std::span<uint8_t> out) {
  if (frame.size() != f.stored_size || out.size() != f.raw_size)
    return Status(Code::invalid_argument, "decode_layer: buffer sizes do not match the frame");
  const bool raw = f.stored_size == f.raw_size;
  const auto fb = reinterpret_cast<uintptr_t>(frame.data()), ob = reinterpret_cast<uintptr_t>(out.data());
  const bool overlap = fb < ob + out.size() && ob < fb + frame.size();
  if (overlap && !(raw && fb == ob)) return Status(Code::invalid_argument, "decode_layer: frame and output overlap");
  if (xxh3(frame) != f.stored_hash) return io_error(layer_name(layer) + "frame checksum mismatch");
  if (raw) {
    if (fb != ob) std::memcpy(out.data(), frame.data(), frame.size());
    return Status::Ok();  // the stored checksum is the payload's
  }
  Status s = decompress_frame(codec, frame, out);
  if (!s.ok()) return io_error(layer_name(layer) + s.message());
  if (xxh3(out) != f.raw_hash) return io_error(layer_name(layer) + "payload checksum mismatch");
  return Status::Ok();
}

Status decode_layer_from_file(const ChunkIndex& idx, int layer, std::span<const uint8_t> file, std::span<uint8_t> out) {
  if (layer < 0 || static_cast<size_t>(layer) >= idx.frames.size())
    return Status(Code::invalid_argument, "decode_layer: layer " + std::to_string(layer) + " out of range");
  const FrameEntry& f = idx.frames[layer];
  if (file.size() != idx.file_size) return Status(Code::invalid_argument, "decode_layer: file size differs from the index");
  return decode_layer(idx, layer, file.subspan(f.offset, f.stored_size), out);
}

std::string chunk_file_name(uint32_t chunk_index) { return std::to_string(chunk_index) + ".kvc"; }

}  // namespace llmsvc::policy
