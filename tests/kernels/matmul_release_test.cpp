// SPDX-License-Identifier: Apache-2.0
// Releasing a prepared weight's row or column tail (CpuWeight::release_rows / release_cols, the
// same through CpuDevice): the pages go back to the system (mincore says so), a view of what is
// kept computes the same bits throughout, and restoring (part of the tail, then all) gives back
// the weight's own bits.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hal/cpu/cpu_device.h"
#include "hal/cpu/quant/matmul.h"
#include "tests/kernels/random_weights.h"

namespace llmsvc::hal::cpu {
namespace {

constexpr WeightType kPanelTypes[] = {WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1,
                                      WeightType::Q8_0, WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K};

// Pages of [p, p + n) the process holds in memory.
size_t resident_pages(const void* p, size_t n) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t b = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n + page - 1) / page * page;
  std::vector<unsigned char> in((e - b) / page);
  EXPECT_EQ(::mincore(reinterpret_cast<void*>(b), e - b, in.data()), 0);
  size_t count = 0;
  for (unsigned char c : in) count += c & 1;
  return count;
}

std::vector<float> product(const CpuWeight& w, const std::vector<float>& x, int n_tokens) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  std::vector<float> y(static_cast<size_t>(n_tokens * w.ref().rows), std::nanf(""));
  matmul(w, x.data(), n_tokens, y.data(), pool, scratch);
  return y;
}

std::unique_ptr<CpuWeight> view(const CpuWeight& w, int64_t rows) {
  auto v = slice_cpu_weight(w, rows, w.ref().cols);
  EXPECT_TRUE(v.ok()) << v.status().message();
  return std::move(v).value();
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(MatmulRelease, TheTailGoesBackAndComesBackWithTheSameBits) {
  const int64_t rows = 1000, cols = 1024;  // 63 panels (the last partial) of several pages each
  uint32_t seed = 11;
  for (WeightType t : kPanelTypes) {
    SCOPED_TRACE("type " + std::to_string(static_cast<int>(t)));
    const auto bytes = random_weight(t, rows, cols, seed++);
    auto made = prepare_cpu_weight({t, bytes.data(), rows, cols, row_bytes(t, cols)});
    ASSERT_TRUE(made.ok()) << made.status().message();
    CpuWeight& w = **made;
    const auto x = random_acts(3 * cols, seed++);
    const auto whole = product(w, x, 3);
    const auto small = view(w, 200), middle = view(w, 600);
    const auto y_small = product(*small, x, 3), y_middle = product(*middle, x, 3);
    const size_t held = resident_pages(w.panels(), w.owned_bytes());

    const size_t given = w.release_rows(200);
    ASSERT_GT(given, 0u);
    EXPECT_GE(w.resident_rows(), 200);
    EXPECT_LT(w.resident_rows(), rows);
    EXPECT_LE(resident_pages(w.panels(), w.owned_bytes()), held - given / static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
    EXPECT_TRUE(same_bits(product(*small, x, 3), y_small));  // the kept rows are untouched
    EXPECT_EQ(w.release_rows(300), 0u);  // less than is given back already: nothing more

    // Part of the tail, then the rest.
    auto back = w.restore_rows(600);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_GT(*back, 0u);
    EXPECT_GE(w.resident_rows(), 600);
    EXPECT_LT(w.resident_rows(), rows);
    EXPECT_TRUE(same_bits(product(*middle, x, 3), y_middle));
    back = w.restore_rows(rows);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(w.resident_rows(), rows);
    EXPECT_TRUE(same_bits(product(w, x, 3), whole));
    EXPECT_EQ(*w.restore_rows(rows), 0u);  // nothing left to restore

    // Released further in two steps, then restored at once.
    const auto least = view(w, 100);
    const auto y_least = product(*least, x, 3);
    ASSERT_GT(w.release_rows(600), 0u);
    ASSERT_GT(w.release_rows(100), 0u);
    EXPECT_GE(w.resident_rows(), 100);
    EXPECT_LT(w.resident_rows(), 600);
    EXPECT_TRUE(same_bits(product(*least, x, 3), y_least));
    ASSERT_TRUE(w.restore_rows(rows).ok());
    EXPECT_TRUE(same_bits(product(w, x, 3), whole));
  }
}

std::unique_ptr<CpuWeight> col_view(const CpuWeight& w, int64_t cols) {
  auto v = slice_cpu_weight(w, w.ref().rows, cols);
  EXPECT_TRUE(v.ok()) << v.status().message();
  return std::move(v).value();
}

// The column tail (down's and O's cuts): the kept columns are laid out together in place, the
// pages after them go back, views of the kept columns compute the same bits throughout, and
// restoring (to a middle prefix, then all; from the weight's bytes or from another copy of
// them) gives back the weight's own bits.
TEST(MatmulRelease, TheColumnTailGoesBackAndComesBackWithTheSameBits) {
  const int64_t rows = 200, cols = 4096;  // 13 panels (the last partial) of 5-36 pages each
  uint32_t seed = 31;
  for (WeightType t : kPanelTypes) {
    SCOPED_TRACE("type " + std::to_string(static_cast<int>(t)));
    auto bytes = random_weight(t, rows, cols, seed++);
    const auto copy = bytes;
    auto made = prepare_cpu_weight({t, bytes.data(), rows, cols, row_bytes(t, cols)});
    ASSERT_TRUE(made.ok()) << made.status().message();
    CpuWeight& w = **made;
    const auto x = random_acts(3 * cols, seed++);
    const auto whole = product(w, x, 3);
    const auto small = col_view(w, 1024), middle = col_view(w, 2560);
    auto in_prefix = [&](int64_t c) {  // x's first c columns of each token, contiguous
      std::vector<float> v;
      for (int tk = 0; tk < 3; ++tk) v.insert(v.end(), x.begin() + tk * cols, x.begin() + tk * cols + c);
      return v;
    };
    const auto x_small = in_prefix(1024), x_middle = in_prefix(2560);
    const auto y_small = product(*small, x_small, 3), y_middle = product(*middle, x_middle, 3);
    const size_t held = resident_pages(w.panels(), w.owned_bytes());

    const size_t given = w.release_cols(1000);  // rounded up to the block: 1024
    ASSERT_GT(given, 0u);
    EXPECT_EQ(w.resident_cols(), 1024);
    EXPECT_EQ(w.resident_rows(), rows);
    EXPECT_EQ(small->layout_cols(), 1024);  // views follow their base's layout
    EXPECT_LE(resident_pages(w.panels(), w.owned_bytes()), held - given / static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
    EXPECT_TRUE(same_bits(product(*small, x_small, 3), y_small));
    EXPECT_EQ(w.release_cols(2048), 0u);  // less than is given back already: nothing more
    EXPECT_EQ(w.release_rows(16), 0u);    // not both at once
    EXPECT_EQ(*w.restore_rows(rows), 0u);

    auto back = w.restore_cols(2560);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_GT(*back, 0u);
    EXPECT_EQ(w.resident_cols(), 2560);
    EXPECT_TRUE(same_bits(product(*middle, x_middle, 3), y_middle));
    EXPECT_TRUE(same_bits(product(*small, x_small, 3), y_small));
    back = w.restore_cols(cols);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(w.resident_cols(), cols);
    EXPECT_TRUE(same_bits(product(w, x, 3), whole));
    EXPECT_EQ(*w.restore_cols(cols), 0u);  // nothing left to restore

    // Released in two steps, then restored at once from another copy of the bytes (those
    // behind ref() overwritten: a model whose own copy was moved and dropped).
    ASSERT_GT(w.release_cols(2560), 0u);
    ASSERT_GT(w.release_cols(1024), 0u);
    EXPECT_TRUE(same_bits(product(*small, x_small, 3), y_small));
    std::fill(bytes.begin(), bytes.end(), uint8_t{0x5a});
    ASSERT_TRUE(w.restore_cols(cols, nullptr, copy.data()).ok());
    EXPECT_TRUE(same_bits(product(w, x, 3), whole));
    // Rows too restore from another copy.
    ASSERT_GT(w.release_rows(64), 0u);
    ASSERT_TRUE(w.restore_rows(rows, nullptr, copy.data()).ok());
    EXPECT_TRUE(same_bits(product(w, x, 3), whole));
  }
}

TEST(MatmulRelease, WeightsWithoutACopyOfTheirOwnGiveNothingBack) {
  const int64_t rows = 512, cols = 512;
  for (WeightType t : {WeightType::F32, WeightType::F16, WeightType::BF16}) {
    const auto bytes = random_weight(t, rows, cols, 5);
    auto w = prepare_cpu_weight({t, bytes.data(), rows, cols, row_bytes(t, cols)});
    ASSERT_TRUE(w.ok());
    EXPECT_EQ((*w)->release_rows(16), 0u);  // read in place: the file's pages are the kernel's
    EXPECT_EQ((*w)->resident_rows(), rows);
  }
  const auto bytes = random_weight(WeightType::Q4_0, rows, cols, 6);
  auto w = prepare_cpu_weight({WeightType::Q4_0, bytes.data(), rows, cols, row_bytes(WeightType::Q4_0, cols)});
  ASSERT_TRUE(w.ok());
  auto v = view(**w, 64);
  EXPECT_EQ(v->release_rows(16), 0u);            // a view owns nothing
  EXPECT_EQ((*w)->release_rows(rows), 0u);       // keeps every row
  EXPECT_EQ((*w)->release_rows(rows - 1), 0u);   // less than a page past the row
  EXPECT_EQ(v->release_cols(32), 0u);
  EXPECT_EQ((*w)->release_cols(cols), 0u);
  const auto one = random_weight(WeightType::Q4_0, 16, cols, 7);  // one panel: under a page
  auto small = prepare_cpu_weight({WeightType::Q4_0, one.data(), 16, cols, row_bytes(WeightType::Q4_0, cols)});
  ASSERT_TRUE(small.ok());
  EXPECT_EQ((*small)->release_cols(32), 0u);
  EXPECT_EQ((*small)->resident_cols(), cols);  // the layout unchanged
}

TEST(MatmulRelease, ThroughCpuDevice) {
  CpuDevice dev(2);
  const int64_t rows = 640, cols = 2048;
  const auto bytes = random_weight(WeightType::Q4_1, rows, cols, 9);
  auto w = dev.prepare_weight({WeightType::Q4_1, bytes.data(), rows, cols, row_bytes(WeightType::Q4_1, cols)});
  ASSERT_TRUE(w.ok());
  auto v = dev.slice_weight(**w, 128, cols);
  ASSERT_TRUE(v.ok());
  const auto x = random_acts(cols, 10);
  std::vector<float> before(128), after(128), full(rows), full_after(rows);
  dev.matmul(**v, x.data(), 1, before.data());
  dev.matmul(**w, x.data(), 1, full.data());
  EXPECT_GT(dev.release_rows(**w, 128), 0u);
  dev.matmul(**v, x.data(), 1, after.data());
  EXPECT_EQ(before, after);
  auto back = dev.restore_rows(**w, rows, nullptr);
  ASSERT_TRUE(back.ok());
  EXPECT_GT(*back, 0u);
  dev.matmul(**w, x.data(), 1, full_after.data());
  EXPECT_EQ(full, full_after);

  auto c = dev.slice_weight(**w, rows, 512);
  ASSERT_TRUE(c.ok());
  std::vector<float> narrow(rows), narrow_after(rows);
  dev.matmul(**c, x.data(), 1, narrow.data());
  EXPECT_GT(dev.release_cols(**w, 512), 0u);
  dev.matmul(**c, x.data(), 1, narrow_after.data());
  EXPECT_EQ(narrow, narrow_after);
  back = dev.restore_cols(**w, cols, nullptr);
  ASSERT_TRUE(back.ok());
  EXPECT_GT(*back, 0u);
  dev.matmul(**w, x.data(), 1, full_after.data());
  EXPECT_EQ(full, full_after);
}

}  // namespace
}  // namespace llmsvc::hal::cpu
