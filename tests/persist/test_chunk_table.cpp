// SPDX-License-Identifier: Apache-2.0
// ChunkTable: round trip, and damaged or inconsistent tables are refused.
#include <gtest/gtest.h>

#include <xxhash.h>

#include "runtime/core/persist/chunk_table.h"

namespace llmsvc::persist {
namespace {

ChunkTable sample() {
  ChunkTable t;
  t.chunk_tokens = 4;
  t.model_hash = 0xabcdef;
  t.n_evaluated = 6;
  t.chunks.resize(2);
  t.chunks[0] = {8, 30, {0.5f, 1, 2, 0}, {4, 3, 2, 1}};
  t.chunks[1] = {16, 100, {0, 0, 0, 0}, {1, 1, 0, 0}};
  return t;
}

TEST(ChunkTable, RoundTrip) {
  auto bytes = encode_chunk_table(sample());
  ASSERT_TRUE(bytes.ok());
  auto t = parse_chunk_table(*bytes);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->chunk_tokens, 4);
  EXPECT_EQ(t->model_hash, 0xabcdefu);
  EXPECT_EQ(t->n_evaluated, 6);
  ASSERT_EQ(t->chunks.size(), 2u);
  EXPECT_EQ(t->chunks[0].format, 8);
  EXPECT_EQ(t->chunks[0].mass, sample().chunks[0].mass);
  EXPECT_EQ(t->chunks[0].seen, sample().chunks[0].seen);
  EXPECT_EQ(t->chunks[1].format, 16);
  EXPECT_EQ(t->chunks[0].level, 30);
  EXPECT_EQ(t->chunks[1].level, 100);
}

// The layout after the header: per chunk format, level, mass, seen; then the checksum.
constexpr size_t kHeader = 24;

void reseal(std::vector<uint8_t>& b) {
  b.resize(b.size() - 8);
  const uint64_t h = XXH3_64bits(b.data(), b.size());
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(h >> (8 * i)));
}

// A version-1 table (before chunks recorded their level) still reads, every chunk at 100.
TEST(ChunkTable, VersionOneReadsAsTheFullLevel) {
  std::vector<uint8_t> b = *encode_chunk_table(sample());
  b[4] = 1;
  const size_t entry = 2 + 8 * 4;
  b.erase(b.begin() + kHeader + entry + 1);  // the second chunk's level first: offsets before it hold
  b.erase(b.begin() + kHeader + 1);
  reseal(b);
  auto t = parse_chunk_table(b);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->chunks[0].format, 8);
  EXPECT_EQ(t->chunks[0].level, 100);
  EXPECT_EQ(t->chunks[0].mass, sample().chunks[0].mass);
  EXPECT_EQ(t->chunks[1].level, 100);
}

TEST(ChunkTable, ALevelOutsideOneToAHundredIsRefused) {
  for (uint8_t level : {0, 101, 255}) {
    std::vector<uint8_t> b = *encode_chunk_table(sample());
    b[kHeader + 1] = level;
    reseal(b);
    auto t = parse_chunk_table(b);
    ASSERT_FALSE(t.ok()) << int(level);
    EXPECT_NE(t.status().message().find("chunk 0: bad level"), std::string::npos) << t.status().message();
    ChunkTable s = sample();
    s.chunks[0].level = level;
    EXPECT_FALSE(encode_chunk_table(s).ok()) << int(level);
  }
}

TEST(ChunkTable, EveryKvFormatRoundTrips) {
  for (uint8_t f : {16, 8, 4, 3, 2}) {
    ChunkTable in = sample();
    in.chunks[0].format = f;
    auto bytes = encode_chunk_table(in);
    ASSERT_TRUE(bytes.ok()) << int(f) << ": " << bytes.status().message();
    auto out = parse_chunk_table(*bytes);
    ASSERT_TRUE(out.ok()) << int(f);
    EXPECT_EQ(out->chunks[0].format, f);
  }
}

TEST(ChunkTable, DamageIsRefused) {
  const std::vector<uint8_t> good = *encode_chunk_table(sample());
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<uint8_t> bad = good;
    bad[i] ^= 0x01;
    EXPECT_FALSE(parse_chunk_table(bad).ok()) << "byte " << i;
  }
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_FALSE(parse_chunk_table(std::span(good).first(n)).ok()) << "length " << n;
  EXPECT_EQ(read_chunk_table("/nonexistent/chunks.table").status().code(), Code::not_found);
}

TEST(ChunkTable, InconsistentTablesAreNotWritten) {
  ChunkTable t = sample();
  t.n_evaluated = 9;  // 3 chunks
  EXPECT_FALSE(encode_chunk_table(t).ok());
  t = sample();
  t.chunks[1].format = 5;
  EXPECT_FALSE(encode_chunk_table(t).ok());
  t = sample();
  t.chunks[0].mass.pop_back();
  EXPECT_FALSE(encode_chunk_table(t).ok());
}

}  // namespace
}  // namespace llmsvc::persist
