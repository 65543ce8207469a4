// SPDX-License-Identifier: Apache-2.0
// Chunk swap files: round trips for every codec and format, byte-level layout, and every
// kind of damage (bit flips, truncations, forged fields with a valid checksum).
#include "policy/swap/chunk_file.h"

#include <gtest/gtest.h>
#include <lz4.h>
#include <xxhash.h>
#include <zstd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "policy/swap/le_bytes.h"
#include "tests/common/kv_synth.h"
#include "tests/policy/swap_test_util.h"

namespace llmsvc::policy {
namespace {

using hal::KvFormat;
using test::make_meta;
using test::synth_chunk_payload;

constexpr ChunkCodec kCodecs[] = {ChunkCodec::none, ChunkCodec::lz4, ChunkCodec::zstd};
constexpr KvFormat kFormats[] = {KvFormat::f16, KvFormat::q8, KvFormat::q4, KvFormat::q3, KvFormat::q2};

std::vector<uint8_t> encode_ok(const ChunkMeta& m, const std::vector<uint8_t>& payload, ChunkEncoding enc) {
  auto r = encode_chunk(m, payload, enc);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : std::vector<uint8_t>{};
}

// Parses and decodes every layer; the first failure, or OK.
Status parse_and_decode(std::span<const uint8_t> file, std::vector<uint8_t>* payload = nullptr) {
  auto idx = parse_chunk_file(file);
  if (!idx.ok()) return idx.status();
  std::vector<uint8_t> out(idx->layer_bytes() * idx->frames.size());
  for (size_t l = 0; l < idx->frames.size(); ++l) {
    Status s = decode_layer_from_file(*idx, static_cast<int>(l), file,
                                      std::span<uint8_t>(out).subspan(l * idx->layer_bytes(), idx->layer_bytes()));
    if (!s.ok()) return s;
  }
  if (payload) *payload = std::move(out);
  return Status::Ok();
}

// Rewrites the header checksum after a deliberate edit: a forged file that passes it.
void reseal(std::vector<uint8_t>& file) {
  const uint16_t n_layer = le::load<uint16_t>(file.data() + 14);
  const size_t checked = kChunkHeaderBytes + size_t{n_layer} * kChunkFrameEntryBytes;
  ASSERT_LE(checked + 8, file.size());
  le::store<uint64_t>(file.data() + checked, XXH3_64bits(file.data(), checked));
}

uint8_t* entry(std::vector<uint8_t>& file, size_t layer) {
  return file.data() + kChunkHeaderBytes + layer * kChunkFrameEntryBytes;
}

void expect_io(const Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), Code::io) << s.message();
  EXPECT_NE(s.message().find(needle), std::string::npos) << "message: " << s.message() << "\nexpected: " << needle;
}

class ChunkRoundTrip : public ::testing::TestWithParam<std::tuple<ChunkCodec, KvFormat>> {};

TEST_P(ChunkRoundTrip, EveryLayerDecodesAlone) {
  const auto [codec, format] = GetParam();
  for (auto [n_layer, heads, dim, tokens] : {std::tuple{30, 3, 64, 16}, std::tuple{2, 1, 8, 5}, std::tuple{7, 8, 128, 16}}) {
    ChunkMeta m = make_meta(3, format, n_layer, heads, dim, tokens);
    const auto payload = synth_chunk_payload(m, 7);
    ASSERT_EQ(payload.size(), chunk_payload_bytes(m));
    const auto file = encode_ok(m, payload, {codec, 3});
    auto idx = parse_chunk_file(file);
    ASSERT_TRUE(idx.ok()) << idx.status().message();
    EXPECT_EQ(idx->meta, m);
    EXPECT_EQ(idx->codec, codec);
    EXPECT_EQ(idx->file_size, file.size());
    ASSERT_EQ(idx->frames.size(), n_layer);
    const size_t layer = chunk_layer_bytes(m);
    EXPECT_EQ(idx->layer_bytes(), layer);
    // Layers in reverse order: each decodes without the others.
    for (int l = n_layer - 1; l >= 0; --l) {
      std::vector<uint8_t> out(layer, 0xAA);
      const FrameEntry& f = idx->frames[l];
      ASSERT_TRUE(decode_layer(*idx, l, std::span(file).subspan(f.offset, f.stored_size), out).ok());
      EXPECT_EQ(0, std::memcmp(out.data(), payload.data() + size_t(l) * layer, layer)) << "layer " << l;
    }
    std::vector<uint8_t> all;
    ASSERT_TRUE(parse_and_decode(file, &all).ok());
    EXPECT_EQ(all, payload);
    if (codec == ChunkCodec::none) {
      EXPECT_EQ(file.size(), chunk_index_bytes(m.n_layer) + payload.size());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllCodecsAndFormats, ChunkRoundTrip,
                         ::testing::Combine(::testing::ValuesIn(kCodecs), ::testing::ValuesIn(kFormats)),
                         [](const auto& info) {
                           return std::string(chunk_codec_name(std::get<0>(info.param))) + "_q" +
                                  std::to_string(hal::kv_format_bits(std::get<1>(info.param)));
                         });

TEST(ChunkFile, CompressibleFramesShrinkIncompressibleStayRaw) {
  const ChunkMeta m = make_meta(0, KvFormat::f16, 3, 2, 64);
  const size_t layer = chunk_layer_bytes(m);
  std::vector<uint8_t> payload(chunk_payload_bytes(m), 0);
  const auto noise = test::pattern_bytes(layer, 5);
  std::copy(noise.begin(), noise.end(), payload.begin() + layer);  // layer 1: random bytes
  for (ChunkCodec codec : {ChunkCodec::lz4, ChunkCodec::zstd}) {
    const auto file = encode_ok(m, payload, {codec, 5});
    auto idx = parse_chunk_file(file);
    ASSERT_TRUE(idx.ok());
    EXPECT_LT(idx->frames[0].stored_size, layer / 10) << chunk_codec_name(codec);
    EXPECT_EQ(idx->frames[1].stored_size, layer) << chunk_codec_name(codec);  // stored raw
    EXPECT_EQ(idx->frames[1].stored_hash, idx->frames[1].raw_hash);
    std::vector<uint8_t> back;
    ASSERT_TRUE(parse_and_decode(file, &back).ok());
    EXPECT_EQ(back, payload);
  }
}

TEST(ChunkFile, LayoutIsLittleEndianAsDocumented) {
  ChunkMeta m = make_meta(0x01020304, KvFormat::q4, 2, 1, 8, 4);
  m.first_pos = 0x0A0B0C0D;
  m.model_hash = 0x1112131415161718ull;
  m.tokens_hash = 0x2122232425262728ull;
  const auto payload = synth_chunk_payload(m, 1);
  const auto f = encode_ok(m, payload, {ChunkCodec::none});
  ASSERT_EQ(f.size(), 64u + 2 * 32 + 8 + payload.size());
  const uint8_t head[] = {'L', 'L', 'M', 'S', 'V', 'K', 'V', 'C', 1, 0, 0, 4, 4, 0, 2, 0, 1, 0, 8, 0,
                          4,   3,   2,   1,   0x0D, 0x0C, 0x0B, 0x0A, 0, 0, 0, 0};
  EXPECT_EQ(0, std::memcmp(f.data(), head, sizeof head));
  EXPECT_EQ(f[32], 0x18);
  EXPECT_EQ(f[39], 0x11);
  EXPECT_EQ(f[40], 0x28);
  const uint64_t layer = chunk_layer_bytes(m);
  EXPECT_EQ(le::load<uint64_t>(f.data() + 48), layer);
  EXPECT_EQ(le::load<uint64_t>(f.data() + 56), f.size());
  // Frame table: offset, stored, raw, stored hash, raw hash.
  EXPECT_EQ(le::load<uint64_t>(f.data() + 64), 136u);
  EXPECT_EQ(le::load<uint32_t>(f.data() + 72), layer);
  EXPECT_EQ(le::load<uint32_t>(f.data() + 76), layer);
  EXPECT_EQ(le::load<uint64_t>(f.data() + 80), XXH3_64bits(payload.data(), layer));
  EXPECT_EQ(le::load<uint64_t>(f.data() + 64 + 32), 136u + layer);
  EXPECT_EQ(le::load<uint64_t>(f.data() + 128), XXH3_64bits(f.data(), 128));
  EXPECT_EQ(0, std::memcmp(f.data() + 136, payload.data(), payload.size()));
}

TEST(ChunkFile, EncodeIntoCallerBuffer) {
  const ChunkMeta m = make_meta(1, KvFormat::q2);
  const auto payload = synth_chunk_payload(m, 2);
  std::vector<uint8_t> buf(max_encoded_chunk_bytes(m));
  auto n = encode_chunk(m, payload, {ChunkCodec::zstd, 1}, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_LE(*n, buf.size());
  std::vector<uint8_t> back;
  ASSERT_TRUE(parse_and_decode(std::span(buf).first(*n), &back).ok());
  EXPECT_EQ(back, payload);
  auto small = encode_chunk(m, payload, {}, std::span(buf).first(buf.size() - 1));
  EXPECT_EQ(small.status().code(), Code::invalid_argument);
}

// The swap store encodes into reused buffers that still hold other contexts' bytes (possibly
// another app's): every byte of the file must be written by the encoder, none left over.
TEST(ChunkFile, EncodeWritesEveryByteOfTheFile) {
  for (ChunkCodec codec : {ChunkCodec::none, ChunkCodec::lz4, ChunkCodec::zstd}) {
    for (KvFormat format : {KvFormat::f16, KvFormat::q4}) {
      const ChunkMeta m = make_meta(7, format, 3, 2, 64);
      const auto payload = synth_chunk_payload(m, 11);
      std::vector<uint8_t> zeroed(max_encoded_chunk_bytes(m), 0x00), dirty(max_encoded_chunk_bytes(m), 0xA5);
      auto a = encode_chunk(m, payload, {codec, 3}, zeroed);
      auto b = encode_chunk(m, payload, {codec, 3}, dirty);
      ASSERT_TRUE(a.ok() && b.ok());
      ASSERT_EQ(*a, *b);
      EXPECT_EQ(0, std::memcmp(zeroed.data(), dirty.data(), *a)) << chunk_codec_name(codec);
    }
  }
}

TEST(ChunkFile, BadArgumentsAreRefused) {
  const ChunkMeta good = make_meta(0);
  const auto payload = synth_chunk_payload(good, 0);
  auto refused = [&](ChunkMeta m, const std::string& needle) {
    auto r = encode_chunk(m, payload, {});
    EXPECT_EQ(r.status().code(), Code::invalid_argument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  ChunkMeta m = good;
  m.n_layer = 0;
  refused(m, "n_layer");
  m = good, m.n_tokens = 0;
  refused(m, "n_tokens");
  m = good, m.head_dim = 3;
  refused(m, "multiple of 8");
  m = good, m.n_head_kv = 65535, m.head_dim = 65535;
  refused(m, "kv_dim");
  m = good, m.format = static_cast<KvFormat>(5);
  refused(m, "format");
  m = good, m.first_pos = -1;
  refused(m, "positions");
  m = good, m.first_pos = INT32_MAX - 3;
  refused(m, "positions");
  m = good, m.n_tokens = 65535, m.n_head_kv = 64, m.head_dim = 1024;
  refused(m, "exceeds the limit");
  auto r = encode_chunk(good, std::span(payload).first(payload.size() - 1), {});
  EXPECT_EQ(r.status().code(), Code::invalid_argument);
  EXPECT_EQ(encode_chunk(good, payload, {ChunkCodec::zstd, 99}).status().code(), Code::invalid_argument);
  EXPECT_EQ(encode_chunk(good, payload, {static_cast<ChunkCodec>(9)}).status().code(), Code::invalid_argument);
}

// A small file per codec whose frames really are compressed (so flips hit codec input).
std::vector<uint8_t> small_file(ChunkCodec codec) {
  const ChunkMeta m = make_meta(9, KvFormat::q4, 3, 1, 8, 4);
  std::vector<uint8_t> payload(chunk_payload_bytes(m));
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>((i % 40) < 20 ? 0 : i % 7);
  auto f = encode_chunk(m, payload, {codec, 3});
  return f.ok() ? std::move(f).value() : std::vector<uint8_t>{};
}

TEST(ChunkFile, EverySingleBitFlipIsDetected) {
  for (ChunkCodec codec : kCodecs) {
    const auto file = small_file(codec);
    ASSERT_FALSE(file.empty());
    auto idx = parse_chunk_file(file);
    ASSERT_TRUE(idx.ok());
    if (codec != ChunkCodec::none) {
      for (const FrameEntry& f : idx->frames) ASSERT_LT(f.stored_size, f.raw_size) << "frames must be compressed";
    }
    std::set<std::string> kinds;
    for (size_t bit = 0; bit < file.size() * 8; ++bit) {
      auto bad = file;
      bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      Status s = parse_and_decode(bad);
      ASSERT_FALSE(s.ok()) << chunk_codec_name(codec) << ": flip of bit " << bit << " (byte " << bit / 8 << ") undetected";
      ASSERT_EQ(s.code(), Code::io) << s.message();
      ASSERT_EQ(s.message().rfind("chunk file: ", 0), 0u) << s.message();
      kinds.insert(s.message().substr(0, s.message().find_first_of("(0123456789")));
    }
    // Header and table flips fail the header checksum; frame flips the frame checksum.
    EXPECT_TRUE(kinds.count("chunk file: header checksum mismatch")) << chunk_codec_name(codec);
    EXPECT_TRUE(kinds.count("chunk file: layer ")) << chunk_codec_name(codec);
  }
}

TEST(ChunkFile, EveryTruncationAndExtensionIsDetected) {
  for (ChunkCodec codec : kCodecs) {
    auto file = small_file(codec);
    for (size_t n = 0; n < file.size(); ++n) {
      auto r = parse_chunk_file(std::span(file).first(n));
      ASSERT_FALSE(r.ok()) << chunk_codec_name(codec) << ": truncated to " << n << " bytes";
      ASSERT_EQ(r.status().code(), Code::io);
    }
    const auto index_bytes = chunk_index_bytes(3);
    expect_io(parse_chunk_file(std::span(file).first(10)).status(), "truncated header");
    expect_io(parse_chunk_file(std::span(file).first(index_bytes - 1)).status(), "truncated frame table");
    expect_io(parse_chunk_file(std::span(file).first(file.size() - 1)).status(), "(truncated)");
    file.push_back(0);
    expect_io(parse_chunk_file(file).status(), "(trailing bytes)");
  }
}

TEST(ChunkFile, ForgedHeadersAreRefusedByName) {
  const auto good = small_file(ChunkCodec::lz4);
  auto forged = [&](const std::function<void(std::vector<uint8_t>&)>& edit, const std::string& needle, bool seal = true) {
    auto f = good;
    edit(f);
    if (seal) reseal(f);
    expect_io(parse_chunk_file(f).status(), needle);
  };
  forged([](auto& f) { f[0] = 'X'; }, "bad magic", false);
  forged([](auto& f) { f[8] = 2; }, "unsupported version 2", false);
  forged([](auto& f) { f[20] ^= 1; }, "header checksum mismatch", false);
  forged([](auto& f) { f[10] = 7; }, "unknown codec 7");
  forged([](auto& f) { f[11] = 5; }, "unknown KV format 5");
  forged([](auto& f) { f[29] = 1; }, "reserved");
  forged([](auto& f) { le::store<uint16_t>(f.data() + 18, 12); }, "multiple of 8");
  forged([](auto& f) { le::store<uint16_t>(f.data() + 16, 65535), le::store<uint16_t>(f.data() + 18, 65535); },
         "kv_dim");
  forged([](auto& f) { le::store<uint16_t>(f.data() + 12, 0); }, "n_tokens is 0");
  forged([](auto& f) { le::store<uint32_t>(f.data() + 24, 0x80000000u); }, "out of range");
  forged([](auto& f) { le::store<uint64_t>(f.data() + 48, 12345); }, "layer size 12345");
  forged([](auto& f) { le::store<uint64_t>(f.data() + 56, f.size() + 1); }, "(truncated)");
  forged([](auto& f) { le::store<uint64_t>(f.data() + 56, UINT64_MAX); }, "(truncated)");
  // n_layer raised: the table would run past the end of the file.
  forged([](auto& f) { le::store<uint16_t>(f.data() + 14, 65535); }, "truncated frame table", false);
  // n_layer lowered: the checksum is sought elsewhere.
  forged([](auto& f) { le::store<uint16_t>(f.data() + 14, 2); }, "header checksum mismatch", false);
  // n_layer 0 with a valid checksum over the 64-byte header.
  forged([](auto& f) {
    le::store<uint16_t>(f.data() + 14, 0);
    le::store<uint64_t>(f.data() + 64, XXH3_64bits(f.data(), 64));
  }, "n_layer is 0", false);
}

TEST(ChunkFile, ForgedFrameTablesAreRefusedByName) {
  const auto good = small_file(ChunkCodec::lz4);
  auto idx = parse_chunk_file(good);
  ASSERT_TRUE(idx.ok());
  const uint32_t raw = idx->frames[0].raw_size, s0 = idx->frames[0].stored_size;
  auto forged = [&](const std::function<void(std::vector<uint8_t>&)>& edit, const std::string& needle) {
    auto f = good;
    edit(f);
    reseal(f);
    expect_io(parse_chunk_file(f).status(), needle);
  };
  forged([](auto& f) { le::store<uint64_t>(entry(f, 0), UINT64_MAX); }, "layer 0: frame offset");
  forged([](auto& f) { le::store<uint64_t>(entry(f, 1), le::load<uint64_t>(entry(f, 1)) - 1); }, "layer 1: frame offset");
  forged([](auto& f) { le::store<uint32_t>(entry(f, 0) + 12, 0xFFFFFFFFu); }, "layer 0: raw size");
  forged([&](auto& f) { le::store<uint32_t>(entry(f, 0) + 8, raw + 1); }, "layer 0: stored size");
  forged([](auto& f) { le::store<uint32_t>(entry(f, 2) + 8, 0); }, "layer 2: stored size 0");
  forged([&](auto& f) { le::store<uint32_t>(entry(f, 2) + 8, 0xFFFFFFFFu); }, "layer 2: stored size");
  // Frame 0 one byte longer, frame 1 moved along: the last frame now runs past the end.
  forged([&](auto& f) {
    le::store<uint32_t>(entry(f, 0) + 8, s0 + 1);
    for (size_t l = 1; l < 3; ++l) le::store<uint64_t>(entry(f, l), le::load<uint64_t>(entry(f, l)) + 1);
  }, "layer 2: frame of");
  // Frame 2 one byte shorter: a byte nobody owns at the end.
  forged([](auto& f) { le::store<uint32_t>(entry(f, 2) + 8, le::load<uint32_t>(entry(f, 2) + 8) - 1); }, "frames end at");
  // A raw frame must carry one checksum twice.
  forged([&](auto& f) { le::store<uint32_t>(entry(f, 2) + 8, raw); }, "layer 2: uncompressed frame with two different checksums");
  // Codec none with a compressed frame.
  forged([](auto& f) { f[10] = 0; }, "compressed frame in an uncompressed file");
}

// Replaces layer 0's frame with `frame` (hashes made valid, offsets moved), as a forger would.
std::vector<uint8_t> with_frame0(const std::vector<uint8_t>& good, const std::vector<uint8_t>& frame, uint64_t raw_hash) {
  auto idx = parse_chunk_file(good);
  const FrameEntry f0 = idx->frames[0];
  std::vector<uint8_t> f(good.begin(), good.begin() + f0.offset);
  f.insert(f.end(), frame.begin(), frame.end());
  f.insert(f.end(), good.begin() + f0.offset + f0.stored_size, good.end());
  const int64_t delta = int64_t(frame.size()) - int64_t(f0.stored_size);
  le::store<uint32_t>(entry(f, 0) + 8, static_cast<uint32_t>(frame.size()));
  le::store<uint64_t>(entry(f, 0) + 16, XXH3_64bits(frame.data(), frame.size()));
  le::store<uint64_t>(entry(f, 0) + 24, raw_hash);
  for (size_t l = 1; l < idx->frames.size(); ++l)
    le::store<uint64_t>(entry(f, l), uint64_t(int64_t(le::load<uint64_t>(entry(f, l))) + delta));
  le::store<uint64_t>(f.data() + 56, f.size());
  reseal(f);
  return f;
}

TEST(ChunkFile, ForgedFramesCannotOverrunTheOutput) {
  for (ChunkCodec codec : {ChunkCodec::lz4, ChunkCodec::zstd}) {
    const auto good = small_file(codec);
    auto idx = parse_chunk_file(good);
    const uint32_t raw = idx->frames[0].raw_size;
    // Valid streams of 4x, and of fewer, bytes than the layer holds (compressed below raw).
    for (size_t n : {size_t{raw} * 4, size_t{raw} / 2}) {
      std::vector<uint8_t> big(n, 0x5A), frame(std::max<size_t>(ZSTD_compressBound(n), LZ4_compressBound(int(n))));
      const size_t len = codec == ChunkCodec::lz4
                             ? size_t(LZ4_compress_default(reinterpret_cast<const char*>(big.data()),
                                                           reinterpret_cast<char*>(frame.data()), int(n), int(frame.size())))
                             : ZSTD_compress(frame.data(), frame.size(), big.data(), n, 3);
      frame.resize(len);
      ASSERT_LT(len, raw);
      const auto f = with_frame0(good, frame, XXH3_64bits(big.data(), std::min<size_t>(n, raw)));
      auto forged = parse_chunk_file(f);
      ASSERT_TRUE(forged.ok()) << forged.status().message();
      std::vector<uint8_t> out(raw);
      Status s = decode_layer_from_file(*forged, 0, f, out);  // ASan: no write past `out`
      expect_io(s, "layer 0: " + std::string(chunk_codec_name(codec)) + " frame");
      // The other layers still decode: damage stays in its layer.
      EXPECT_TRUE(decode_layer_from_file(*forged, 1, f, out).ok());
    }
    // Garbage that passes the frame checksum.
    const auto f = with_frame0(good, test::pattern_bytes(idx->frames[0].stored_size, 3), 0);
    auto forged = parse_chunk_file(f);
    ASSERT_TRUE(forged.ok());
    std::vector<uint8_t> out(raw);
    EXPECT_EQ(decode_layer_from_file(*forged, 0, f, out).code(), Code::io);
  }
}

TEST(ChunkFile, PayloadChecksumCatchesWhatTheCodecAccepts) {
  const auto good = small_file(ChunkCodec::zstd);
  auto idx = parse_chunk_file(good);
  const uint32_t raw = idx->frames[0].raw_size;
  std::vector<uint8_t> other(raw, 1), frame(ZSTD_compressBound(raw));
  frame.resize(ZSTD_compress(frame.data(), frame.size(), other.data(), raw, 3));
  auto f = with_frame0(good, frame, idx->frames[0].raw_hash);  // a valid frame of the wrong data
  auto forged = parse_chunk_file(f);
  ASSERT_TRUE(forged.ok());
  std::vector<uint8_t> out(raw);
  expect_io(decode_layer_from_file(*forged, 0, f, out), "layer 0: payload checksum mismatch");
}

TEST(ChunkFile, DecodeChecksItsArguments) {
  const auto file = small_file(ChunkCodec::lz4);
  auto idx = parse_chunk_file(file);
  const FrameEntry f = idx->frames[1];
  std::vector<uint8_t> out(f.raw_size);
  const auto frame = std::span(file).subspan(f.offset, f.stored_size);
  EXPECT_EQ(decode_layer(*idx, 3, frame, out).code(), Code::invalid_argument);
  EXPECT_EQ(decode_layer(*idx, -1, frame, out).code(), Code::invalid_argument);
  EXPECT_EQ(decode_layer(*idx, 1, frame, std::span(out).first(f.raw_size - 1)).code(), Code::invalid_argument);
  EXPECT_EQ(decode_layer(*idx, 1, frame.first(f.stored_size - 1), out).code(), Code::invalid_argument);
  // A compressed frame cannot be decoded over itself.
  std::vector<uint8_t> both(f.raw_size);
  std::memcpy(both.data(), frame.data(), f.stored_size);
  EXPECT_EQ(decode_layer(*idx, 1, std::span(both).first(f.stored_size), both).code(), Code::invalid_argument);
  EXPECT_TRUE(decode_layer(*idx, 1, frame, out).ok());
  // parse_chunk_index given too few bytes for the table is the caller's error.
  EXPECT_EQ(parse_chunk_index(std::span(file).first(70), file.size()).status().code(), Code::invalid_argument);
}

TEST(ChunkFile, UncompressedFrameDecodesInPlace) {
  const ChunkMeta m = make_meta(2, KvFormat::f16, 2, 1, 8, 16);
  const auto payload = synth_chunk_payload(m, 4);
  const auto file = encode_ok(m, payload, {ChunkCodec::none});
  auto idx = parse_chunk_file(file);
  const FrameEntry f = idx->frames[1];
  std::vector<uint8_t> buf(file.begin() + f.offset, file.begin() + f.offset + f.stored_size);
  ASSERT_TRUE(decode_layer(*idx, 1, buf, buf).ok());
  EXPECT_EQ(0, std::memcmp(buf.data(), payload.data() + f.raw_size, f.raw_size));
  buf[3] ^= 4;
  expect_io(decode_layer(*idx, 1, buf, buf), "layer 1: frame checksum mismatch");
}

// The committed fuzz seeds are files of format version 1: they must keep parsing and
// decoding, and cover every codec and KV format.
TEST(ChunkFile, CommittedSeedFilesDecode) {
  std::set<ChunkCodec> codecs;
  std::set<KvFormat> formats;
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(LLMSVC_CHUNK_SEEDS)) {
    const auto bytes = test::read_file(e.path().string());
    auto idx = parse_chunk_file(bytes);
    ASSERT_TRUE(idx.ok()) << e.path() << ": " << idx.status().message();
    ASSERT_TRUE(parse_and_decode(bytes).ok()) << e.path();
    codecs.insert(idx->codec);
    formats.insert(idx->meta.format);
    ++n;
  }
  EXPECT_GE(n, 12u);
  EXPECT_EQ(codecs.size(), 3u);
  EXPECT_EQ(formats.size(), 5u);  // f16, q8, q4, q3, q2
}

TEST(ChunkFile, FileNames) { EXPECT_EQ(chunk_file_name(42), "42.kvc"); }

}  // namespace
}  // namespace llmsvc::policy
