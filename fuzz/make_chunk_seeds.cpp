// SPDX-License-Identifier: Apache-2.0
// Writes the seed corpus of chunk_file_fuzzer (fuzz/corpus/chunk_file/): small real chunk
// files of every codec and KV format, with partial chunks and several shapes. tests/policy
// decodes the committed seeds, so they also pin format version 1.
// Usage: make_chunk_seeds OUT_DIR     (built with the fuzz preset: build/fuzz/fuzz/make_chunk_seeds)
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "policy/swap/chunk_file.h"
#include "tests/common/kv_synth.h"

using namespace llmsvc;
using namespace llmsvc::policy;

static bool write_seed(const std::string& path, const ChunkMeta& m, const std::vector<uint8_t>& payload,
                       ChunkCodec codec) {
  auto file = encode_chunk(m, payload, {codec, 3});
  if (!file.ok()) {
    std::fprintf(stderr, "encode: %s\n", file.status().message().c_str());
    return false;
  }
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(file->data()), static_cast<std::streamsize>(file->size()));
  return static_cast<bool>(out.flush());
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const hal::KvFormat formats[] = {hal::KvFormat::f16, hal::KvFormat::q8, hal::KvFormat::q4, hal::KvFormat::q3, hal::KvFormat::q2};
  const ChunkCodec codecs[] = {ChunkCodec::none, ChunkCodec::lz4, ChunkCodec::zstd};
  uint32_t seed = 1;
  for (ChunkCodec codec : codecs)
    for (hal::KvFormat f : formats) {
      ChunkMeta m;
      m.model_hash = 0x5eed000000000000ull + seed;
      m.tokens_hash = 0x70c0000000000000ull + seed;
      m.chunk_index = seed;
      m.n_tokens = seed % 3 == 0 ? 5 : 16;  // some partial (last) chunks
      m.first_pos = static_cast<int32_t>(seed * 16);
      m.format = f;
      m.n_layer = static_cast<uint16_t>(2 + seed % 2);
      m.n_head_kv = static_cast<uint16_t>(1 + seed % 2);
      m.head_dim = 8;
      const std::string name = std::string(chunk_codec_name(codec)) + "_" +
                               (f == hal::KvFormat::f16 ? "f16" : "q" + std::to_string(hal::kv_format_bits(f)));
      auto payload = test::synth_chunk_payload(m, seed);
      if (!write_seed(std::string(argv[1]) + "/" + name + ".kvc", m, payload, codec)) return 1;
      // Noisy K/V often compresses too little and is stored raw; a seed of runs makes sure
      // every decoder gets real compressed input.
      if (codec != ChunkCodec::none) {
        for (size_t i = 0; i < payload.size(); ++i)
          if ((i / 24) % 2 == 0) payload[i] = static_cast<uint8_t>(i / 96);
        if (!write_seed(std::string(argv[1]) + "/" + name + "_runs.kvc", m, payload, codec)) return 1;
      }
      ++seed;
    }
  return 0;
}
