// SPDX-License-Identifier: Apache-2.0
// Prefix views of prepared weights (slice_cpu_weight, CpuDevice::slice_weight): matmul on a
// view of the first rows and columns of a weight gives, bit for bit, matmul on a weight
// prepared from those rows and columns of the GGUF bytes (same data, full row stride), for
// every weight type, SIMD target, thread count and token count (decode, prefill tiles, several
// token groups, several unpacked chunks).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hal/cpu/cpu_device.h"
#include "hal/cpu/quant/matmul.h"
#include "hal/host/dequantize.h"
#include "tests/common/simd_targets.h"
#include "tests/kernels/random_weights.h"

namespace llmsvc::hal::cpu {
namespace {

constexpr WeightType kAllTypes[] = {WeightType::F32,  WeightType::F16,  WeightType::BF16, WeightType::Q4_0,
                                    WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::Q8_0,
                                    WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K};

std::string type_trace(WeightType t, int64_t rows, int64_t cols) {
  return "type " + std::to_string(static_cast<int>(t)) + " view " + std::to_string(rows) + "x" + std::to_string(cols);
}

// The weight a view should behave as: prepared from the first rows x cols of `full`'s bytes.
std::unique_ptr<CpuWeight> prepare_prefix(const CpuWeight& full, int64_t rows, int64_t cols) {
  const WeightRef& f = full.ref();
  auto w = prepare_cpu_weight({f.type, f.data, rows, cols, f.row_bytes});
  EXPECT_TRUE(w.ok()) << w.status().message();
  return w.ok() ? std::move(w).value() : nullptr;
}

std::unique_ptr<CpuWeight> slice(const CpuWeight& w, int64_t rows, int64_t cols) {
  auto v = slice_cpu_weight(w, rows, cols);
  EXPECT_TRUE(v.ok()) << v.status().message();
  return v.ok() ? std::move(v).value() : nullptr;
}

// matmul of the view and of the directly prepared prefix, on every SIMD target and on 1 and 3
// threads, must agree to the bit (NaN-filled outputs: a row not written shows).
void expect_same_bits(const CpuWeight& view, const CpuWeight& direct, int n_tokens, uint32_t seed) {
  const int64_t rows = direct.ref().rows, cols = direct.ref().cols;
  const auto x = random_acts(n_tokens * cols, seed);
  test::for_each_simd_target([&] {
    for (int threads : {1, 3}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + " tokens " + std::to_string(n_tokens));
      ThreadPool pool(threads);
      MatmulScratch scratch;
      std::vector<float> yv(n_tokens * rows, std::nanf("")), yd(n_tokens * rows, std::nanf(""));
      matmul(view, x.data(), n_tokens, yv.data(), pool, scratch);
      matmul(direct, x.data(), n_tokens, yd.data(), pool, scratch);
      ASSERT_EQ(std::memcmp(yv.data(), yd.data(), yv.size() * sizeof(float)), 0);
      for (float v : yv) ASSERT_FALSE(std::isnan(v));
    }
  });
}

// Column prefixes: one block, two blocks, a count that is not a power of two (float types: a
// GEMM-step tail too), all.
std::vector<int64_t> col_prefixes(WeightType t, int64_t cols) {
  switch (block_elems(t)) {
    case 1: return {1, 2, 100, 512, cols};
    case 32: return {32, 64, 352, cols};
    default: return {256, 512, cols};
  }
}

TEST(MatmulSlice, ViewMatchesPrefixWeightBitForBit) {
  const int64_t rows = 70, cols = 768;  // 5 panels (the last partial), 3 K-superblocks
  uint32_t seed = 1;
  for (WeightType t : kAllTypes) {
    const auto bytes = random_weight(t, rows, cols, seed++);
    auto full = prepare_cpu_weight({t, bytes.data(), rows, cols, row_bytes(t, cols)});
    ASSERT_TRUE(full.ok()) << full.status().message();
    for (int64_t vr : {16, 17, 33, 70}) {
      for (int64_t vc : col_prefixes(t, cols)) {
        SCOPED_TRACE(type_trace(t, vr, vc));
        const auto view = slice(**full, vr, vc);
        const auto direct = prepare_prefix(**full, vr, vc);
        ASSERT_TRUE(view && direct);
        for (int n_tokens : {1, 3, 37}) expect_same_bits(*view, *direct, n_tokens, seed++);
      }
    }
  }
}

// Prefill over weights wide enough that their panels are unpacked in several chunks (the
// legacy types) and the next chunk is prefetched while the first token group passes.
TEST(MatmulSlice, WideViewsAcrossUnpackChunks) {
  const int64_t rows = 100, cols = 8192;
  uint32_t seed = 300;
  for (WeightType t : {WeightType::Q4_0, WeightType::Q5_1, WeightType::Q8_0, WeightType::Q4_K, WeightType::Q6_K}) {
    const auto bytes = random_weight(t, rows, cols, seed++);
    auto full = prepare_cpu_weight({t, bytes.data(), rows, cols, row_bytes(t, cols)});
    ASSERT_TRUE(full.ok());
    for (const auto& [vr, vc] : {std::pair<int64_t, int64_t>{100, 4096}, {81, 2048}, {100, 8192}}) {
      SCOPED_TRACE(type_trace(t, vr, vc));
      const auto view = slice(**full, vr, vc);
      const auto direct = prepare_prefix(**full, vr, vc);
      ASSERT_TRUE(view && direct);
      for (int n_tokens : {1, 20}) expect_same_bits(*view, *direct, n_tokens, seed++);
    }
  }
}

TEST(MatmulSlice, ViewSharesMemoryAndReportsThePrefix) {
  for (WeightType t : kAllTypes) {
    SCOPED_TRACE(static_cast<int>(t));
    const int64_t rows = 40, cols = 512, vc = block_elems(t) == 1 ? 100 : 256;
    const auto bytes = random_weight(t, rows, cols, 7);
    auto full = prepare_cpu_weight({t, bytes.data(), rows, cols, row_bytes(t, cols)});
    ASSERT_TRUE(full.ok());
    const auto view = slice(**full, 33, vc);
    ASSERT_TRUE(view);
    const WeightRef& r = view->ref();
    EXPECT_EQ(r.type, t);
    EXPECT_EQ(r.data, bytes.data());
    EXPECT_EQ(r.rows, 33);
    EXPECT_EQ(r.cols, vc);
    EXPECT_EQ(r.row_bytes, row_bytes(t, cols));  // the stride, not the prefix's size
    EXPECT_EQ(view->panels(), (*full)->panels());
    EXPECT_EQ(view->layout_cols(), cols);
    EXPECT_EQ(view->repacked(), (*full)->repacked());
    EXPECT_EQ(view->view_of(), full->get());
    EXPECT_FALSE(view->owns_copy());
    EXPECT_EQ(view->owned_bytes(), 0u);
    EXPECT_EQ((*full)->owns_copy(), (*full)->repacked());
    // A view of a view reads the same base, and is the prefix of the prefix.
    const auto inner = slice(*view, 17, block_elems(t) == 1 ? 2 : vc);
    ASSERT_TRUE(inner);
    EXPECT_EQ(inner->view_of(), full->get());
    EXPECT_EQ(inner->panels(), (*full)->panels());
    EXPECT_EQ(inner->ref().rows, 17);
  }
}

// get_rows reads a view's rows too (the panels at the base's column layout).
TEST(MatmulSlice, GetRowsOfAView) {
  for (WeightType t : kAllTypes) {
    SCOPED_TRACE(static_cast<int>(t));
    const int64_t rows = 35, cols = 768, vc = block_elems(t) == 1 ? 100 : 512;
    const auto bytes = random_weight(t, rows, cols, 11);
    const size_t rb = row_bytes(t, cols);
    auto full = prepare_cpu_weight({t, bytes.data(), rows, cols, rb});
    ASSERT_TRUE(full.ok());
    const auto view = slice(**full, 20, vc);
    ASSERT_TRUE(view);
    const int32_t ids[3] = {19, 0, 16};
    std::vector<float> got(3 * vc), want(vc);
    get_rows(*view, ids, 3, got.data());
    for (int i = 0; i < 3; ++i) {
      dequantize_row(t, bytes.data() + ids[i] * rb, want.data(), vc);
      for (int64_t c = 0; c < vc; ++c) ASSERT_EQ(got[i * vc + c], want[c]) << "row " << ids[i] << " col " << c;
    }
  }
}

// One parallel region over sliced and unsliced weights of the same input width (an elastic
// FFN's gate / up at a smaller level beside a full-size weight), against separate matmuls of
// the prefixes prepared directly.
TEST(MatmulSlice, MultiMixesViewsAndWholeWeights) {
  const int64_t cols = 512;
  struct Spec {
    WeightType type;
    int64_t rows, full_cols, view_rows;  // full_cols == cols: unsliced columns
  };
  const Spec specs[] = {{WeightType::Q4_0, 70, 768, 40},  {WeightType::Q8_0, 50, 512, 50},
                        {WeightType::Q6_K, 70, 768, 33},  {WeightType::F16, 20, 512, 20},
                        {WeightType::Q4_1, 48, 1024, 48}, {WeightType::Q5_K, 40, 512, 17}};
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<std::unique_ptr<CpuWeight>> fulls, used, direct;
  for (const Spec& s : specs) {
    bytes.push_back(random_weight(s.type, s.rows, s.full_cols, static_cast<uint32_t>(40 + bytes.size())));
    auto f = prepare_cpu_weight({s.type, bytes.back().data(), s.rows, s.full_cols, row_bytes(s.type, s.full_cols)});
    ASSERT_TRUE(f.ok());
    fulls.push_back(std::move(f).value());
    const bool whole = s.view_rows == s.rows && s.full_cols == cols;
    used.push_back(whole ? nullptr : slice(*fulls.back(), s.view_rows, cols));
    direct.push_back(prepare_prefix(*fulls.back(), s.view_rows, cols));
    ASSERT_TRUE(direct.back());
  }
  const int n = static_cast<int>(std::size(specs));
  std::vector<const CpuWeight*> ws(n);
  for (int i = 0; i < n; ++i) ws[i] = used[i] ? used[i].get() : fulls[i].get();
  for (int n_tokens : {1, 5, 37}) {
    const auto x = random_acts(n_tokens * cols, static_cast<uint32_t>(n_tokens));
    test::for_each_simd_target([&] {
      SCOPED_TRACE("tokens " + std::to_string(n_tokens));
      ThreadPool pool(2);
      MatmulScratch scratch;
      std::vector<std::vector<float>> multi(n), single(n);
      std::vector<float*> ys(n);
      for (int i = 0; i < n; ++i) {
        multi[i].assign(n_tokens * specs[i].view_rows, std::nanf(""));
        single[i].assign(n_tokens * specs[i].view_rows, std::nanf(""));
        ys[i] = multi[i].data();
        matmul(*direct[i], x.data(), n_tokens, single[i].data(), pool, scratch);
      }
      matmul_multi(ws.data(), ys.data(), n, x.data(), n_tokens, pool, scratch);
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(std::memcmp(multi[i].data(), single[i].data(), multi[i].size() * sizeof(float)), 0) << "weight " << i;
      }
    });
  }
}

// The HAL entry point: Device::slice_weight, then Device::matmul / matmul_multi on the views.
TEST(MatmulSlice, ThroughCpuDevice) {
  CpuDevice dev(2);
  Device& d = dev;
  const int64_t rows = 70, cols = 768, vr = 33, vc = 512;
  for (WeightType t : kAllTypes) {
    SCOPED_TRACE(static_cast<int>(t));
    const auto bytes = random_weight(t, rows, cols, 90);
    const size_t rb = row_bytes(t, cols);
    auto full = d.prepare_weight({t, bytes.data(), rows, cols, rb});
    ASSERT_TRUE(full.ok());
    auto view = d.slice_weight(**full, vr, vc);
    ASSERT_TRUE(view.ok()) << view.status().message();
    EXPECT_EQ((*view)->ref().rows, vr);
    EXPECT_EQ((*view)->ref().cols, vc);
    EXPECT_EQ((*view)->ref().row_bytes, rb);
    EXPECT_FALSE((*view)->owns_copy());
    auto direct = d.prepare_weight({t, bytes.data(), vr, vc, rb});
    ASSERT_TRUE(direct.ok());
    for (int n_tokens : {1, 37}) {
      const auto x = random_acts(n_tokens * vc, 91);
      std::vector<float> yv(n_tokens * vr), yd(n_tokens * vr), ym(n_tokens * vr);
      d.matmul(**view, x.data(), n_tokens, yv.data());
      d.matmul(**direct, x.data(), n_tokens, yd.data());
      EXPECT_EQ(std::memcmp(yv.data(), yd.data(), yv.size() * sizeof(float)), 0) << n_tokens;
      const PreparedWeight* ws[2] = {view->get(), direct->get()};
      std::vector<float> yd2(n_tokens * vr);
      float* ys[2] = {ym.data(), yd2.data()};
      d.matmul_multi(ws, ys, 2, x.data(), n_tokens);
      EXPECT_EQ(std::memcmp(ym.data(), yd.data(), ym.size() * sizeof(float)), 0) << n_tokens;
      EXPECT_EQ(std::memcmp(yd2.data(), yd.data(), yd2.size() * sizeof(float)), 0) << n_tokens;
    }
  }
}

TEST(MatmulSlice, RejectsBadSlices) {
  const int64_t rows = 40, cols = 512;
  CpuDevice dev(1);
  Device& d = dev;
  for (WeightType t : kAllTypes) {
    SCOPED_TRACE(static_cast<int>(t));
    const auto bytes = random_weight(t, rows, cols, 3);
    auto full = d.prepare_weight({t, bytes.data(), rows, cols, row_bytes(t, cols)});
    ASSERT_TRUE(full.ok());
    const int64_t block = block_elems(t);
    auto code = [&](int64_t r, int64_t c) { return d.slice_weight(**full, r, c).status().code(); };
    EXPECT_EQ(code(0, cols), Code::invalid_argument);
    EXPECT_EQ(code(-1, cols), Code::invalid_argument);
    EXPECT_EQ(code(rows + 1, cols), Code::invalid_argument);
    EXPECT_EQ(code(rows, 0), Code::invalid_argument);
    EXPECT_EQ(code(rows, -block), Code::invalid_argument);
    EXPECT_EQ(code(rows, cols + block), Code::invalid_argument);
    if (block > 1) {
      EXPECT_EQ(code(rows, block + block / 2), Code::invalid_argument);
      EXPECT_EQ(code(rows, 16), Code::invalid_argument);
      const Status s = d.slice_weight(**full, rows, block + 16).status();
      EXPECT_NE(s.message().find("multiple"), std::string::npos) << s.message();
    }
    EXPECT_TRUE(d.slice_weight(**full, rows, cols).ok());
    EXPECT_TRUE(d.slice_weight(**full, 1, block).ok());
    // A view's bounds are its own shape.
    auto view = d.slice_weight(**full, 20, block);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(d.slice_weight(**view, 21, block).status().code(), Code::invalid_argument);
    EXPECT_EQ(d.slice_weight(**view, 20, 2 * block).status().code(), Code::invalid_argument);
    EXPECT_TRUE(d.slice_weight(**view, 20, block).ok());
  }
  // A weight the CPU did not prepare.
  struct Foreign final : PreparedWeight {
    WeightRef r{WeightType::F32, nullptr, 4, 4, 16};
    const WeightRef& ref() const override { return r; }
  } foreign;
  const Status s = d.slice_weight(foreign, 2, 2).status();
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_FALSE(s.message().empty());
}

}  // namespace
}  // namespace llmsvc::hal::cpu
