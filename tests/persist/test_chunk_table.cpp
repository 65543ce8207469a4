// SPDX-License-Identifier: Apache-2.0
// ChunkTable: round trip, and damaged or inconsistent tables are refused.
#include <gtest/gtest.h>

#include "runtime/core/persist/chunk_table.h"

namespace llmsvc::persist {
namespace {

ChunkTable sample() {
  ChunkTable t;
  t.chunk_tokens = 4;
  t.model_hash = 0xabcdef;
  t.n_evaluated = 6;
  t.chunks.resize(2);
  t.chunks[0] = {8, {0.5f, 1, 2, 0}, {4, 3, 2, 1}};
  t.chunks[1] = {16, {0, 0, 0, 0}, {1, 1, 0, 0}};
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
