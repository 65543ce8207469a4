// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for chunk swap files: any byte string must either be refused with a
// named Code::io, or parse into an index whose every frame lies inside the input and whose
// layers decode (or fail with Code::io) without touching a byte outside their buffers.
// A decoded chunk re-encodes to a file that decodes to the same payload.
//
// Random mutations almost never keep the header checksum valid, so each input is also run
// "resealed": its frame checksums and header checksum recomputed, as a forger would. That
// copy reaches the field checks and hands arbitrary frames to the decompressors.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include <xxhash.h>

#include "policy/swap/chunk_file.h"
#include "policy/swap/le_bytes.h"

namespace {

using namespace llmsvc;
using namespace llmsvc::policy;

void check(bool ok) {
  if (!ok) std::abort();
}

void check_refusal(const Status& s) {
  check(s.code() == Code::io);
  check(s.message().rfind("chunk file: ", 0) == 0);
}

// Decoding allocates the declared raw size; a tiny forged file may declare up to 1 GiB per
// layer, which says nothing new about the decoder and would only slow the fuzzer down.
constexpr uint64_t kMaxDecodeBytes = 4u << 20;

// The input with valid checksums wherever its table lets them be computed; empty if the
// header is too damaged to say where they go.
std::vector<uint8_t> reseal(std::span<const uint8_t> in) {
  auto need = chunk_index_size(in);
  if (!need.ok() || *need > in.size()) return {};
  std::vector<uint8_t> f(in.begin(), in.end());
  const size_t n_layer = (*need - kChunkHeaderBytes - 8) / kChunkFrameEntryBytes;
  for (size_t l = 0; l < n_layer; ++l) {
    uint8_t* e = f.data() + kChunkHeaderBytes + l * kChunkFrameEntryBytes;
    const uint64_t off = le::load<uint64_t>(e), stored = le::load<uint32_t>(e + 8), raw = le::load<uint32_t>(e + 12);
    if (off > f.size() || stored > f.size() - off) continue;
    const uint64_t h = XXH3_64bits(f.data() + off, stored);
    le::store<uint64_t>(e + 16, h);
    if (stored == raw) le::store<uint64_t>(e + 24, h);
  }
  const size_t checked = *need - 8;
  le::store<uint64_t>(f.data() + checked, XXH3_64bits(f.data(), checked));
  return f;
}

void exercise(std::span<const uint8_t> file) {
  const uint8_t* data = file.data();
  const size_t size = file.size();
  auto r = parse_chunk_file(file);
  // The two-step form (index prefix, then the file size) agrees with the whole-file form.
  if (auto need = chunk_index_size(file); need.ok() && *need <= size) {
    auto r2 = parse_chunk_index(file.first(*need), size);
    check(r2.ok() == r.ok());
    if (!r.ok()) check(r2.status().message() == r.status().message());
  }
  if (!r.ok()) {
    check_refusal(r.status());
    return;
  }
  const ChunkIndex& idx = *r;
  const uint64_t layer = chunk_layer_bytes(idx.meta);
  check(layer > 0 && layer == idx.layer_bytes() && idx.file_size == size);
  check(idx.frames.size() == idx.meta.n_layer);
  uint64_t pos = chunk_index_bytes(idx.meta.n_layer);
  for (const FrameEntry& f : idx.frames) {
    check(f.offset == pos && f.raw_size == layer && f.stored_size >= 1 && f.stored_size <= f.raw_size);
    pos += f.stored_size;
  }
  check(pos == size);
  if (layer * idx.meta.n_layer > kMaxDecodeBytes) return;

  std::vector<uint8_t> payload(layer * idx.meta.n_layer);
  bool all_ok = true;
  for (size_t l = 0; l < idx.frames.size(); ++l) {
    const FrameEntry& f = idx.frames[l];
    // Exact-size heap copies: ASan sees any access past the frame or the output.
    auto frame = std::make_unique<uint8_t[]>(f.stored_size);
    std::memcpy(frame.get(), data + f.offset, f.stored_size);
    auto out = std::make_unique<uint8_t[]>(f.raw_size);
    Status s = decode_layer(idx, static_cast<int>(l), {frame.get(), f.stored_size}, {out.get(), f.raw_size});
    if (!s.ok()) {
      check_refusal(s);
      all_ok = false;
      continue;
    }
    std::memcpy(payload.data() + l * layer, out.get(), layer);
  }
  if (!all_ok) return;
  auto again = encode_chunk(idx.meta, payload, {idx.codec, 1});
  check(again.ok());
  auto idx2 = parse_chunk_file(*again);
  check(idx2.ok() && idx2->meta == idx.meta && idx2->codec == idx.codec);
  std::vector<uint8_t> out(layer);
  for (size_t l = 0; l < idx2->frames.size(); ++l) {
    check(decode_layer_from_file(*idx2, static_cast<int>(l), *again, out).ok());
    check(std::memcmp(out.data(), payload.data() + l * layer, layer) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> file(data, size);
  exercise(file);
  const std::vector<uint8_t> sealed = reseal(file);
  if (!sealed.empty()) exercise(sealed);
  return 0;
}
