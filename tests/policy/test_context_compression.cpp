// SPDX-License-Identifier: Apache-2.0
// compress_context: a young context keeps 8 bits; from the horizon on the allocation meets
// the ratio, a dense chunk (the attention sink) keeping 8 bits paid by 3-bit chunks; chunks
// only narrow; the chunk holding the last evaluated position stays f16.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "policy/compression/context_compression.h"
#include "policy/kv_chunk_store.h"

namespace llmsvc::policy {
namespace {
namespace context_compression {  // its own names beside the other files of its unity batch

const KvGeometry kGeo{2, 2, 8, 16};  // 2 layers, 2 kv heads of 8, chunks of 16 tokens

// A context of n_tokens evaluated in one causal pass: chunk c's tokens get mass weight(c) per
// observing query, so its density is weight(c) exactly.
void fill(KvSequence& seq, int n_tokens, const std::vector<double>& weight) {
  ASSERT_TRUE(seq.reserve(n_tokens).ok());
  seq.note_queries(0, n_tokens);
  for (int c = 0; c < seq.n_chunks(); ++c)
    for (int t = 0; t < kGeo.chunk_tokens && c * kGeo.chunk_tokens + t < n_tokens; ++t)
      seq.mass(c)[t] = static_cast<float>(weight[c] * (n_tokens - (c * kGeo.chunk_tokens + t)));
}

std::vector<int> bits_of(const KvSequence& seq) {
  std::vector<int> b;
  for (int c = 0; c < seq.n_chunks(); ++c) b.push_back(hal::kv_format_bits(seq.format(c)));
  return b;
}

TEST(ContextCompression, YoungContextKeepsEightBits) {
  KvChunkStore store(kGeo, 0);
  KvSequence seq(store);
  std::vector<double> w(8, 1.0);
  w[0] = 20.0;
  fill(seq, 8 * 16, w);  // 8 chunks; 7 compressible (the last holds the last position)
  ASSERT_TRUE(compress_context(seq, 8 * 16, 0.5).ok());
  EXPECT_EQ(bits_of(seq), (std::vector<int>{8, 8, 8, 8, 8, 8, 8, 16}));
}

TEST(ContextCompression, FromTheHorizonTheRatioHoldsAndTheSinkKeepsEightBits) {
  KvChunkStore store(kGeo, 0);
  KvSequence seq(store);
  const int n = kAllocationHorizonChunks + 1;
  std::vector<double> w(n, 1.0);
  w[0] = 20.0;  // ~ the sink's measured 11x the median, against payers at ~0.6x
  for (int c = 1; c < n; ++c) w[c] = 1.0 + 0.01 * c;  // chunk 1 the sparsest, and so on
  fill(seq, n * 16, w);
  ASSERT_TRUE(compress_context(seq, n * 16, 0.5).ok());
  const std::vector<int> b = bits_of(seq);
  EXPECT_EQ(b[0], 8);
  EXPECT_EQ(b.back(), 16);  // holds the last evaluated position
  const std::vector<int> compressed(b.begin(), b.end() - 1);
  EXPECT_EQ(std::count(compressed.begin(), compressed.end(), 3), 4);
  EXPECT_EQ(b[1], 3);  // the sparsest pay
  int total = 0;
  for (int x : compressed) total += x;
  EXPECT_LE(total, 4 * static_cast<int>(compressed.size()));
  // A later call never widens: with chunk 0 now as sparse as the rest, it stays at 8 only if
  // it was 8 (caps), and nothing exceeds its current width.
  ASSERT_TRUE(compress_context(seq, n * 16, 0.5).ok());
  const std::vector<int> again = bits_of(seq);
  for (size_t c = 0; c < b.size(); ++c) EXPECT_LE(again[c], b[c]) << c;
}

}  // namespace context_compression
}  // namespace
}  // namespace llmsvc::policy
