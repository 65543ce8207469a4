// SPDX-License-Identifier: Apache-2.0
// RangeAllocator: ranges never overlap, freed neighbours merge back into one range, and a
// request larger than any free range is refused even when the free total would cover it.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "hal/range_allocator.h"

namespace llmsvc::hal {
namespace {

TEST(RangeAllocator, RangesAreAlignedAndDisjoint) {
  RangeAllocator a(1 << 16, 256);
  std::vector<std::pair<uint64_t, uint64_t>> taken;
  std::mt19937 rng(7);
  for (int i = 0; i < 40; ++i) {
    const uint64_t bytes = 1 + rng() % 2000;
    auto at = a.take(bytes);
    if (!at) break;
    EXPECT_EQ(*at % 256, 0u);
    for (const auto& [o, b] : taken) EXPECT_TRUE(*at + bytes <= o || o + b <= *at) << *at << " overlaps " << o;
    taken.push_back({*at, bytes});
  }
  EXPECT_GT(taken.size(), 20u);
  for (const auto& [o, b] : taken) a.give(o, b);
  EXPECT_EQ(a.free_bytes(), uint64_t(1) << 16);
  EXPECT_EQ(a.largest_free(), uint64_t(1) << 16);  // everything merged back
}

TEST(RangeAllocator, FragmentationRefusesALargeRange) {
  RangeAllocator a(4096, 256);
  std::vector<uint64_t> at;
  for (int i = 0; i < 16; ++i) at.push_back(*a.take(256));
  EXPECT_FALSE(a.take(1).has_value());  // full
  for (int i = 0; i < 16; i += 2) a.give(at[i], 256);
  EXPECT_EQ(a.free_bytes(), 2048u);
  EXPECT_FALSE(a.take(512).has_value());  // half free, but in 256-byte holes
  a.give(at[1], 256);                      // joins holes 0..2
  auto big = a.take(768);
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(*big, at[0]);
}

}  // namespace
}  // namespace llmsvc::hal
