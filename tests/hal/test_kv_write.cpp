// SPDX-License-Identifier: Apache-2.0
// kv_write: rows land in the right slots of a chunk, converted exactly as fp32_to_fp16.
#include <gtest/gtest.h>

#include <vector>

#include "hal/cpu/kv_write.h"

namespace llmsvc::hal::cpu {
namespace {

TEST(KvWrite, WritesSlotsInPlace) {
  const int row = 3 * 64, cap = 16;
  std::vector<uint16_t> chunk(static_cast<size_t>(row) * cap, 0xFFFF);
  std::vector<float> src(static_cast<size_t>(row) * 5);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 0.001f * static_cast<float>(i) - 0.3f;
  kv_write(src.data(), 5, row, chunk.data(), 7);  // slots 7..11
  for (int slot = 0; slot < cap; ++slot)
    for (int i = 0; i < row; ++i) {
      const uint16_t got = chunk[static_cast<size_t>(slot) * row + i];
      if (slot < 7 || slot >= 12)
        ASSERT_EQ(got, 0xFFFF) << slot;
      else
        ASSERT_EQ(got, fp32_to_fp16(src[static_cast<size_t>(slot - 7) * row + i])) << slot << " " << i;
    }
}

}  // namespace
}  // namespace llmsvc::hal::cpu
