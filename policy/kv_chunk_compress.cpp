// SPDX-License-Identifier: Apache-2.0
// KvSequence::compress: re-encodes a resident chunk into a narrower format, layer by layer.
#include "policy/kv_chunk_store.h"

#include <vector>

#include "policy/compression/kv_codec.h"

namespace llmsvc::policy {

Status KvSequence::compress(int c, hal::KvFormat to) {
  Chunk& ch = *chunks_[c].chunk;
  if (chunks_[c].state != ChunkState::resident) return Status(Code::internal, "kv: compressing a chunk that is not resident");
  if (to == hal::KvFormat::f16 || hal::kv_format_bits(to) > hal::kv_format_bits(ch.format))
    return Status(Code::internal, "kv: compression can only narrow a chunk");
  if (to == ch.format) return Status::Ok();
  // The codecs run on the host: a chunk in a GPU's memory is copied out (before anything is
  // claimed, so a failed copy leaves the accounting as it was), encoded and copied into its
  // new memory.
  std::vector<uint8_t> from_host, to_host;
  const auto source = host_bytes(c, from_host);
  if (!source.ok()) return source.status();
  const uint8_t* from = source->data();
  const size_t bytes = geo_.chunk_bytes(to);
  auto mem = store_.claim(bytes, this);
  if (!mem.ok()) return mem.status();
  uint8_t* into = mem->data();
  if (!into) {
    to_host.resize(bytes);
    into = to_host.data();
  }
  const hal::KvBlockShape shape = geo_.shape();
  const size_t from_layer = geo_.layer_bytes(ch.format), to_layer = geo_.layer_bytes(to);
  const size_t from_k = hal::kv_block_bytes(ch.format, hal::KvPart::key, shape);
  const size_t to_k = hal::kv_block_bytes(to, hal::KvPart::key, shape);
  for (int l = 0; l < geo_.n_layer; ++l) {
    const uint8_t* src = from + l * from_layer;
    uint8_t* dst = into + l * to_layer;
    for (hal::KvPart part : {hal::KvPart::key, hal::KvPart::value}) {
      const uint8_t* s = part == hal::KvPart::key ? src : src + from_k;
      uint8_t* d = part == hal::KvPart::key ? dst : dst + to_k;
      if (ch.format == hal::KvFormat::f16) {
        kv_quantize(part, shape, reinterpret_cast<const uint16_t*>(s), to, d);
      } else {
        kv_requantize(part, shape, ch.format, s, to, d);
      }
    }
  }
  if (!to_host.empty()) {
    if (Status s = store_.memory().write(*mem, 0, to_host); !s.ok()) {
      store_.unclaim(bytes, this);  // its memory goes back with `mem`
      return s;
    }
  }
  install(c, std::move(mem).value(), bytes, to, ChunkState::resident);
  return Status::Ok();
}

}  // namespace llmsvc::policy
