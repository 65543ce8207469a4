// SPDX-License-Identifier: Apache-2.0
// Releasing a prepared weight's row tail (CpuWeight::release_rows, CpuDevice::release_rows):
// the pages go back to the system (mincore says so), a view of the rows kept computes the same
// bits throughout, and restoring (part of the tail, then all) gives back the weight's own bits.
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
  auto back = dev.restore_rows(**w, rows);
  ASSERT_TRUE(back.ok());
  EXPECT_GT(*back, 0u);
  dev.matmul(**w, x.data(), 1, full_after.data());
  EXPECT_EQ(full, full_after);
}

}  // namespace
}  // namespace llmsvc::hal::cpu
