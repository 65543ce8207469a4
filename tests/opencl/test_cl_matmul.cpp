// SPDX-License-Identifier: Apache-2.0
// ClMatmul on a real OpenCL device (PoCL in CI): for every weight type, random valid blocks,
// the GEMV and GEMM paths against a double-precision product over the CPU's dequantized rows
// and the CPU's quantization of the input (its bits checked on their own),
// get_rows bit for bit against the CPU's, and the clean failures (pool full, type unknown).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hal/cpu/cpu_device.h"
#include "hal/host/dequantize.h"
#include "hal/host/fp16.h"
#include "hal/opencl/cl_matmul.h"
#include "tests/common/file_facts.h"
#include "tests/opencl/act_quant_ref.h"
#include "tests/opencl/cl_test_cache.h"

namespace llmsvc::hal::opencl {
namespace {

constexpr WeightType kTypes[] = {WeightType::F32,  WeightType::F16,  WeightType::BF16, WeightType::Q4_0,
                                 WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::Q8_0,
                                 WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K};

bool is_float(WeightType t) { return t == WeightType::F32 || t == WeightType::F16 || t == WeightType::BF16; }

// Random blocks with the scale fields of real models: f16 d of either sign and a few thousandths,
// mins of a few hundredths; codes and packed 6-bit scales are any bits.
std::vector<uint8_t> random_weight(WeightType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const size_t n = static_cast<size_t>(rows * cols);
  std::vector<uint8_t> w(row_bytes(type, cols) * static_cast<size_t>(rows));
  if (type == WeightType::F32) {
    for (size_t i = 0; i < n; ++i) {
      const float v = unit(rng);
      std::memcpy(&w[i * 4], &v, 4);
    }
    return w;
  }
  if (type == WeightType::F16 || type == WeightType::BF16) {
    for (size_t i = 0; i < n; ++i) {
      const float v = unit(rng);
      const uint16_t h = type == WeightType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
      std::memcpy(&w[i * 2], &h, 2);
    }
    return w;
  }
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const size_t bs = block_bytes(type);
  const size_t d_off = type == WeightType::Q6_K ? 208 : 0;
  const bool has_min = type == WeightType::Q4_1 || type == WeightType::Q5_1 || type == WeightType::Q4_K ||
                       type == WeightType::Q5_K;
  for (size_t i = 0; i < w.size(); i += bs) {
    const uint16_t d = fp32_to_fp16((0.001f + 0.01f * std::abs(unit(rng))) * (unit(rng) < 0 ? -1.0f : 1.0f));
    const uint16_t m = fp32_to_fp16(0.05f * unit(rng));
    std::memcpy(&w[i + d_off], &d, 2);
    if (has_min) std::memcpy(&w[i + 2], &m, 2);
  }
  return w;
}

WeightRef ref_of(WeightType type, const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols) {
  return WeightRef{type, bytes.data(), rows, cols, row_bytes(type, cols)};
}

class ClMatmulTest : public ::testing::Test {
 protected:
  // One context and one build for the whole suite: PoCL compiles the kernels once.
  static void SetUpTestSuite() {
    auto d = select_cl_device("");
    ASSERT_TRUE(d.ok()) << d.status().message() << " (install pocl-opencl-icd: tools/scripts/install_deps.sh)";
    info_ = new ClDeviceInfo(*d);
    cache_ = new test::ClTestCache("llmsvc-clmm");
    auto c = ClDeviceContext::open(*info_, ClOptions{cache_->string(), 0});
    ASSERT_TRUE(c.ok()) << c.status().message();
    ctx_ = std::move(c).value().release();
    auto m = ClMatmul::create(*ctx_);
    ASSERT_TRUE(m.ok()) << m.status().message();
    mm_ = std::move(m).value().release();
    std::printf("%s\n", mm_->uses_tensor_cores(1 << 20) ? "tensor-core GEMM: on" : mm_->tensor_core_note().c_str());
  }
  static void TearDownTestSuite() {
    delete mm_;
    delete ctx_;
    delete cache_;
    delete info_;
  }
  void expect_full_pool_refuses_restore(bool cols);
  void SetUp() override {
    // Null only when the suite's set-up failed (no OpenCL device, a kernel that did not build):
    // every test fails with it rather than passing unseen.
    ASSERT_NE(mm_, nullptr) << "the OpenCL matmul could not be made (see the suite's set-up)";
  }

  // A device buffer holding `bytes` at `offset` (the bytes before it are garbage).
  Buffer to_device(const void* bytes, size_t n, size_t offset) {
    auto b = ctx_->pool().alloc(offset + n + 64);
    EXPECT_TRUE(b.ok());
    std::vector<uint8_t> junk(offset + n + 64, 0xA5);
    std::memcpy(junk.data() + offset, bytes, n);
    EXPECT_EQ(clEnqueueWriteBuffer(ctx_->queue().handle(), ClPool::mem(*b), CL_TRUE, 0, junk.size(), junk.data(), 0,
                                   nullptr, nullptr),
              CL_SUCCESS);
    return std::move(b).value();
  }
  template <class T>
  std::vector<T> from_device(const Buffer& b, size_t offset, size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(clEnqueueReadBuffer(ctx_->queue().handle(), ClPool::mem(b), CL_TRUE, offset, n * sizeof(T), v.data(), 0,
                                  nullptr, nullptr),
              CL_SUCCESS);
    return v;
  }

  // Every listed type's matmul() through `mm` for each token count (shapes(type) gives the
  // weight shapes), against the double-precision product; the largest |error| /
  // sum |w x| of the f16 tensor-core GEMM's runs in *worst_mma.
  template <class Shapes>
  void check_products(ClMatmul& mm, const std::vector<WeightType>& types, std::initializer_list<int> token_counts,
                      const Shapes& shapes, double* worst_mma = nullptr);

  static ClDeviceInfo* info_;
  static test::ClTestCache* cache_;
  static ClDeviceContext* ctx_;
  static ClMatmul* mm_;
};
ClDeviceInfo* ClMatmulTest::info_ = nullptr;
test::ClTestCache* ClMatmulTest::cache_ = nullptr;
ClDeviceContext* ClMatmulTest::ctx_ = nullptr;
ClMatmul* ClMatmulTest::mm_ = nullptr;

struct Shape {
  int64_t rows, cols;
};

// Rows that no work-group tiling divides; columns a multiple of the K-quants' 256 (and, for
// the float types, one that is not even a multiple of 8).
std::vector<Shape> shapes_for(WeightType t) {
  std::vector<Shape> s = {{67, 256}, {129, 512}};
  if (is_float(t)) s.push_back({33, 100});
  return s;
}

// y (n tokens x rows) against the double-precision product of w (rows x cols) and xq (n x
// cols): |error| <= tol * sum |w x| per entry. Returns the largest |error| / sum |w x|.
double expect_product(const std::vector<float>& y, const std::vector<float>& w, const std::vector<float>& xq, int n,
                      int64_t rows, int64_t cols, double tol) {
  double worst = 0;
  for (int t = 0; t < n; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double exact = 0, mag = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = static_cast<double>(w[r * cols + c]) * xq[t * cols + c];
        exact += p;
        mag += std::abs(p);
      }
      const float got = y[static_cast<size_t>(t * rows + r)];
      EXPECT_NEAR(got, exact, tol * mag + 1e-30) << "token " << t << " row " << r;
      if (std::abs(got - exact) > tol * mag + 1e-30) return worst;  // one report per call
      if (mag > 0) worst = std::max(worst, std::abs(got - exact) / mag);
    }
  }
  return worst;
}

template <class Shapes>
void ClMatmulTest::check_products(ClMatmul& mm, const std::vector<WeightType>& types,
                                  std::initializer_list<int> token_counts, const Shapes& shapes, double* worst_mma) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (WeightType type : types) {
    for (const Shape& s : shapes(type)) {
      const auto bytes = random_weight(type, s.rows, s.cols, static_cast<uint32_t>(s.rows * 31 + s.cols));
      const WeightRef ref = ref_of(type, bytes, s.rows, s.cols);
      auto w = mm.upload(ref);
      ASSERT_TRUE(w.ok()) << w.status().message();
      EXPECT_GT((*w)->device_bytes(), 0u);
      std::vector<float> wf(static_cast<size_t>(s.rows * s.cols));
      for (int64_t r = 0; r < s.rows; ++r)
        dequantize_row(type, bytes.data() + r * ref.row_bytes, wf.data() + r * s.cols, s.cols);
      for (int n : token_counts) {
        SCOPED_TRACE("type " + std::to_string(static_cast<int>(type)) + ", " + std::to_string(s.rows) + " x " +
                     std::to_string(s.cols) + ", " + std::to_string(n) + " tokens");
        std::vector<float> x(static_cast<size_t>(n * s.cols));
        for (float& v : x) v = unit(rng);
        const std::vector<float> xq = cpu_quantized(type, x, n, s.cols);
        constexpr size_t kXOff = 64, kYOff = 192;  // views inside larger buffers
        const Buffer xd = to_device(x.data(), x.size() * 4, kXOff);
        std::vector<float> poison(static_cast<size_t>(n * s.rows), std::nanf(""));
        const Buffer yd = to_device(poison.data(), poison.size() * 4, kYOff);
        const Status st = mm.matmul(**w, ClView{ClPool::mem(xd), kXOff}, n, ClView{ClPool::mem(yd), kYOff});
        ASSERT_TRUE(st.ok()) << st.message();
        const auto y = from_device<float>(yd, kYOff, poison.size());
        // The f32 paths and the int8 GEMM (exact integer block sums): a few roundings per term
        // of a 512-long sum. The f16 tensor-core GEMM rounds each weight and activation to f16
        // (relative 2^-11 each, so a product is off by at most ~2^-10 relative, activations
        // under f16's normal range by ~3e-8 absolute): |error| <= ~9.8e-4 sum |w x| plus the
        // f32 sum's; 2e-3 leaves that bound twice over.
        const bool f16 = mm.uses_tensor_cores(n) && !mm.uses_int8_gemm(**w, n);
        const double worst = expect_product(y, wf, xq, n, s.rows, s.cols, f16 ? 2e-3 : 2e-5);
        if (HasFailure()) return;
        if (f16 && worst_mma) *worst_mma = std::max(*worst_mma, worst);
      }
    }
  }
}

// Through the default matmul (the int8 GEMM for the types it takes) and one without the int8
// GEMM (the f32 or f16 tensor-core GEMM for every type).
TEST_F(ClMatmulTest, MatmulMatchesTheCpuDequantizedProductForEveryType) {
  double worst_mma = 0;
  const std::vector<WeightType> types(std::begin(kTypes), std::end(kTypes));
  check_products(*mm_, types, {1, 2, 3, 5, 17, 64, 100}, shapes_for, &worst_mma);
  auto no_int8 = ClMatmul::create(*ctx_, false, false, false);
  ASSERT_TRUE(no_int8.ok()) << no_int8.status().message();
  // ... and its float GEMV for decode (the int8 GEMV turned off: LLMSVC_CL_GEMV_DP4A=0).
  check_products(**no_int8, types, {1, 2, 4, 5, 17, 100}, shapes_for, &worst_mma);
  if (mm_->uses_tensor_cores(1 << 20)) std::printf("tensor-core GEMM: worst |error| / sum |w x| = %.3g\n", worst_mma);
}

// The int8 GEMV of decode (1-4 tokens; dp4a through PTX on NVIDIA, char products here) for
// every quantized type, over row counts no work-group tiling divides, rows of 3 blocks and wide
// rows: within the f32 paths' 2e-5 sum |w x| of the double-precision product over the CPU's
// dequantized rows and quantized input, the product the CPU's integer dot products compute
// (exact integer sums per block, then f32 sums in another order: so not bit for bit); and at
// least as close to the CPU backend's own matmul as the float GEMV is.
TEST_F(ClMatmulTest, Dp4aGemvIsTheCpuIntegerProductForEveryQuantizedType) {
  auto on = ClMatmul::create(*ctx_, false, std::nullopt, true);
  auto off = ClMatmul::create(*ctx_, false, std::nullopt, false);
  ASSERT_TRUE(on.ok() && off.ok()) << (on.ok() ? off : on).status().message();
  std::printf("int8 GEMV: %s\n", (*on)->dp4a_gemv_note().empty() ? "dp4a through PTX" : (*on)->dp4a_gemv_note().c_str());
  const std::vector<WeightType> types = {WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1,
                                         WeightType::Q8_0, WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K};
  const auto shapes = [](WeightType t) {
    std::vector<Shape> s = {{67, 256}, {129, 512}, {3, 4096}};
    if (ClMatmul::act_quant(t) == ClMatmul::ActQuant::q8_32) s.push_back({33, 96});  // 3 blocks a row
    return s;
  };
  check_products(**on, types, {1, 2, 3, 4}, shapes);
  cpu::CpuDevice cpu(1);
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (WeightType type : types) {
    SCOPED_TRACE("type " + std::to_string(static_cast<int>(type)));
    constexpr int64_t kRows = 131, kCols = 1024;
    const auto bytes = random_weight(type, kRows, kCols, 21);
    const WeightRef ref = ref_of(type, bytes, kRows, kCols);
    auto w_on = (*on)->upload(ref), w_off = (*off)->upload(ref);
    auto w_cpu = cpu.prepare_weight(ref);
    ASSERT_TRUE(w_on.ok() && w_off.ok() && w_cpu.ok());
    for (int n = 1; n <= 4; ++n) ASSERT_TRUE((*on)->uses_dp4a_gemv(**w_on, n)) << n << " tokens";
    EXPECT_FALSE((*on)->uses_dp4a_gemv(**w_on, 5)) << "5 tokens take a GEMM";
    EXPECT_FALSE((*off)->uses_dp4a_gemv(**w_off, 1));
    for (int n : {1, 4}) {
      std::vector<float> x(static_cast<size_t>(n * kCols)), want(static_cast<size_t>(n * kRows));
      for (float& v : x) v = unit(rng);
      cpu.matmul(**w_cpu, x.data(), n, want.data());
      const Buffer xd = to_device(x.data(), x.size() * 4, 0);
      double err[2] = {0, 0};  // the largest |y - y_cpu| / max |y_cpu| of the int8 and float GEMVs
      for (int k = 0; k < 2; ++k) {
        std::vector<float> y(want.size(), std::nanf(""));
        const Buffer yd = to_device(y.data(), y.size() * 4, 0);
        ClMatmul& mm = k == 0 ? **on : **off;
        ASSERT_TRUE(mm.matmul(k == 0 ? **w_on : **w_off, ClView{ClPool::mem(xd), 0}, n, ClView{ClPool::mem(yd), 0}).ok());
        y = from_device<float>(yd, 0, y.size());
        double top = 0;
        for (size_t i = 0; i < y.size(); ++i) {
          err[k] = std::max(err[k], std::fabs(static_cast<double>(y[i]) - want[i]));
          top = std::max(top, std::fabs(static_cast<double>(want[i])));
        }
        err[k] /= top;
      }
      std::printf("type %d, %d token(s): int8 GEMV %.3g, float GEMV %.3g from the CPU's (of its largest output)\n",
                  static_cast<int>(type), n, err[0], err[1]);
      EXPECT_LE(err[0], std::max(err[1] * 1.5, 1e-6)) << n << " tokens: farther from the CPU than the float GEMV";
    }
  }
}

// The int8 GEMM (made here wherever OpenCL runs: on PoCL each item sums its own products, on
// NVIDIA mma.sync does) for the types it takes, over tiles of 128 rows and tokens cut at every
// edge and rows of an odd number of blocks; the other types fall back to the other GEMMs.
TEST_F(ClMatmulTest, Int8GemmIsTheCpuIntegerProductForTheTypesItTakes) {
  auto made = ClMatmul::create(*ctx_, false, true);
  ASSERT_TRUE(made.ok()) << made.status().message();
  ClMatmul& mm = **made;
  const std::vector<WeightType> types = {WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1,
                                         WeightType::Q8_0, WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K};
  const auto shapes = [](WeightType t) {
    std::vector<Shape> s = {{67, 256}, {200, 512}};
    if (ClMatmul::act_quant(t) == ClMatmul::ActQuant::q8_32) s.push_back({129, 96});  // 3 blocks a row
    return s;
  };
  check_products(mm, types, {5, 129, 200}, shapes);
  const auto bytes = random_weight(WeightType::Q6_K, 16, 256, 3);
  auto q6 = mm.upload(ref_of(WeightType::Q6_K, bytes, 16, 256));
  ASSERT_TRUE(q6.ok());
  EXPECT_FALSE(mm.uses_int8_gemm(**q6, 200)) << "Q6_K's scales are per 16: not the int8 GEMM's";
  const auto q4_bytes = random_weight(WeightType::Q4_0, 16, 256, 3);
  auto q4 = mm.upload(ref_of(WeightType::Q4_0, q4_bytes, 16, 256));
  ASSERT_TRUE(q4.ok());
  EXPECT_TRUE(mm.uses_int8_gemm(**q4, 5));
  EXPECT_FALSE(mm.uses_int8_gemm(**q4, 4)) << "up to 4 tokens the GEMV runs";
  EXPECT_EQ(mm.int8_gemm_note(), "");
}

// Where a matmul's tiles are fewer than the compute units (a prompt of 128 tokens on a GPU) the
// int8 GEMM splits K across work-groups and adds the splits' partial outputs: the same
// products (forced here: PoCL's two compute units never ask for it), splits of whole K-steps
// and a last one shorter, tiles cut at their edges.
TEST_F(ClMatmulTest, Int8GemmSplitsKAcrossWorkGroups) {
  ::setenv("LLMSVC_CL_MMQ_SPLIT", "3", 1);
  auto made = ClMatmul::create(*ctx_, false, true);
  ::unsetenv("LLMSVC_CL_MMQ_SPLIT");
  ASSERT_TRUE(made.ok()) << made.status().message();
  const auto shapes = [](WeightType) { return std::vector<Shape>{{67, 3072}, {130, 2304}}; };
  check_products(**made, {WeightType::Q4_0, WeightType::Q4_K, WeightType::Q8_0}, {5, 129}, shapes);
}

// matmul_multi (one launch for weights sharing x) must give separate matmul()s' bits, row for
// row, for weights of different row counts (Q / K / V: no two split into the same work-groups),
// and write nothing outside each y. Every 4-bit type, an int8 one and a float one; 1-4 tokens
// (the fused GEMV) and 5 (separate GEMMs); a mixed-layout set falls back to separate launches.
TEST_F(ClMatmulTest, MatmulMultiIsSeparateMatmulsBitForBit) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  constexpr int64_t kCols = 512;
  constexpr size_t kXOff = 64, kYOff = 128;
  struct Case {
    std::vector<WeightType> types;
    std::vector<int64_t> rows;
  };
  std::vector<Case> cases;
  for (WeightType t : {WeightType::Q4_0, WeightType::Q4_1, WeightType::Q4_K, WeightType::Q8_0, WeightType::F16}) {
    cases.push_back({{t, t, t}, {67, 13, 129}});
    cases.push_back({{t, t}, {129, 70}});
  }
  cases.push_back({{WeightType::Q4_0, WeightType::Q8_0, WeightType::Q4_0}, {67, 13, 129}});
  for (const Case& c : cases) {
    const int nw = static_cast<int>(c.types.size());
    std::vector<std::vector<uint8_t>> bytes;
    std::vector<std::unique_ptr<ClWeight>> ws;
    for (int i = 0; i < nw; ++i) {
      bytes.push_back(random_weight(c.types[i], c.rows[i], kCols, static_cast<uint32_t>(100 + i)));
      auto w = mm_->upload(ref_of(c.types[i], bytes.back(), c.rows[i], kCols));
      ASSERT_TRUE(w.ok()) << w.status().message();
      ws.push_back(std::move(w).value());
    }
    const ClWeight* wp[3] = {};
    for (int i = 0; i < nw; ++i) wp[i] = ws[i].get();
    for (int n : {1, 2, 3, 4, 5}) {
      SCOPED_TRACE("type " + std::to_string(static_cast<int>(c.types[0])) + " and " +
                   std::to_string(static_cast<int>(c.types[1])) + ", " + std::to_string(nw) + " weights, " +
                   std::to_string(n) + " tokens");
      std::vector<float> x(static_cast<size_t>(n * kCols));
      for (float& v : x) v = unit(rng);
      const Buffer xd = to_device(x.data(), x.size() * 4, kXOff);
      const ClView xv{ClPool::mem(xd), kXOff};
      std::vector<Buffer> fused, separate;
      ClView ys[3];
      for (int i = 0; i < nw; ++i) {
        std::vector<float> poison(static_cast<size_t>(n * c.rows[i]), std::nanf(""));
        fused.push_back(to_device(poison.data(), poison.size() * 4, kYOff));
        separate.push_back(to_device(poison.data(), poison.size() * 4, kYOff));
        ys[i] = ClView{ClPool::mem(fused.back()), kYOff};
        const Status st = mm_->matmul(*wp[i], xv, n, ClView{ClPool::mem(separate.back()), kYOff});
        ASSERT_TRUE(st.ok()) << st.message();
      }
      const Status st = mm_->matmul_multi(wp, ys, nw, xv, n);
      ASSERT_TRUE(st.ok()) << st.message();
      for (int i = 0; i < nw; ++i) {
        // The whole buffer: the junk before y and the slack after it stay as they were.
        const size_t words = (kYOff + static_cast<size_t>(n * c.rows[i]) * 4 + 64) / 4;
        const auto a = from_device<uint32_t>(fused[i], 0, words);
        const auto b = from_device<uint32_t>(separate[i], 0, words);
        for (size_t j = 0; j < words; ++j) ASSERT_EQ(a[j], b[j]) << "weight " << i << ", word " << j;
      }
    }
  }
}

// The device's quantization of a matmul's input is the CPU's, bit for bit: Q8_0 blocks of 32 for
// Q4_0 / Q5_1 / Q8_0, Q8_K superblocks of 256 for Q4_K / Q6_K, over random rows with the cases
// that decide a rounding: an all-zero block, a block whose largest magnitude comes with both
// signs (the first one decides Q8_K's sign), values at exact halves of a step, tiny values.
TEST_F(ClMatmulTest, QuantizeInputIsTheCpuQuantizationBitForBit) {
  constexpr int64_t kCols = 1024;
  constexpr int kTokens = 3;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(static_cast<size_t>(kTokens * kCols));
  for (float& v : x) v = normal(rng);
  std::fill(x.begin(), x.begin() + 256, 0.0f);                   // token 0: a zero superblock
  x[300] = 40.0f, x[400] = -40.0f;                               // both signs at the maximum
  x[kCols + 700] = -50.0f, x[kCols + 600] = 50.0f;               // the other order
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(2 * kCols + i)] = 0.5f * static_cast<float>(i - 16);  // halves
  for (int i = 32; i < 64; ++i) x[static_cast<size_t>(2 * kCols + i)] = 1e-30f * static_cast<float>(i);   // tiny
  for (WeightType type : {WeightType::Q4_0, WeightType::Q5_1, WeightType::Q8_0, WeightType::Q4_K, WeightType::Q6_K}) {
    SCOPED_TRACE("type " + std::to_string(static_cast<int>(type)));
    const auto bytes = random_weight(type, 1, kCols, 3);
    auto w = mm_->upload(ref_of(type, bytes, 1, kCols));
    ASSERT_TRUE(w.ok()) << w.status().message();
    const Buffer xd = to_device(x.data(), x.size() * 4, 64);
    std::vector<float> poison(x.size(), std::nanf(""));
    const Buffer yd = to_device(poison.data(), poison.size() * 4, 128);
    const Status st = mm_->quantize_input(**w, ClView{ClPool::mem(xd), 64}, kTokens, ClView{ClPool::mem(yd), 128});
    ASSERT_TRUE(st.ok()) << st.message();
    const auto got = from_device<float>(yd, 128, x.size());
    const auto want = cpu_quantized(type, x, kTokens, kCols);
    // The int8 form (the int8 GEMV's input): the same codes and scales, and its half sums.
    const size_t q8_bytes = ClMatmul::q8_params_offset(kTokens, kCols) + x.size() / 32 * 8;
    std::vector<uint8_t> junk(q8_bytes + 64, 0xA5);
    const Buffer qd = to_device(junk.data(), junk.size(), 64);
    ASSERT_TRUE(mm_->quantize_input_q8(**w, ClView{ClPool::mem(xd), 64}, kTokens, ClView{ClPool::mem(qd), 64}).ok());
    const auto form = from_device<uint8_t>(qd, 64, junk.size());
    for (size_t i = q8_bytes; i < junk.size(); ++i) ASSERT_EQ(form[i], 0xA5) << "written past the int8 form at " << i;
    std::vector<float> got_q8;
    ASSERT_TRUE(q8_form_floats(form, kTokens, kCols, &got_q8)) << "a block's half sums are not its codes'";
    for (size_t i = 0; i < x.size(); ++i) {
      uint32_t a, b, c;
      std::memcpy(&a, &got[i], 4);
      std::memcpy(&b, &want[i], 4);
      std::memcpy(&c, &got_q8[i], 4);
      ASSERT_EQ(a, b) << "element " << i << ": " << got[i] << " vs " << want[i] << " (x " << x[i] << ")";
      ASSERT_EQ(c, b) << "int8 form, element " << i << ": " << got_q8[i] << " vs " << want[i] << " (x " << x[i] << ")";
    }
  }
}

// E0M4 (a ClMatmul made with e0m4): Q4_0 / Q4_1 / Q4_K rows requantized per 128 onto 16 even
// levels spanning each group's range: every weight at its nearest level (the squared error of
// that fit, within float rounding), fewer bytes than Q4_0's, and the GEMV and GEMM multiply
// the rows get_rows gives.
TEST_F(ClMatmulTest, E0M4RepacksFourBitWeightsNoWorseThanTheirRangeAndMultipliesThem) {
  auto made = ClMatmul::create(*ctx_, true);
  ASSERT_TRUE(made.ok()) << made.status().message();
  ClMatmul& e0m4 = **made;
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (WeightType type : {WeightType::Q4_0, WeightType::Q4_1, WeightType::Q4_K}) {
    for (const Shape& s : shapes_for(type)) {
      SCOPED_TRACE("type " + std::to_string(static_cast<int>(type)) + ", " + std::to_string(s.rows) + " x " +
                   std::to_string(s.cols));
      const auto bytes = random_weight(type, s.rows, s.cols, static_cast<uint32_t>(s.rows + s.cols));
      const WeightRef ref = ref_of(type, bytes, s.rows, s.cols);
      auto w = e0m4.upload(ref);
      auto plain = mm_->upload(ref);
      ASSERT_TRUE(w.ok() && plain.ok());
      EXPECT_LT((*w)->device_bytes(), (*plain)->device_bytes() * 97 / 100);
      // Its rows, dequantized on the device, against the file's.
      std::vector<int32_t> ids(static_cast<size_t>(s.rows));
      for (size_t r = 0; r < ids.size(); ++r) ids[r] = static_cast<int32_t>(r);
      const Buffer idd = to_device(ids.data(), ids.size() * 4, 0);
      std::vector<float> poison(static_cast<size_t>(s.rows * s.cols), std::nanf(""));
      const Buffer rows = to_device(poison.data(), poison.size() * 4, 0);
      ASSERT_TRUE(e0m4.get_rows(**w, ClView{ClPool::mem(idd), 0}, static_cast<int>(s.rows), ClView{ClPool::mem(rows), 0}).ok());
      const auto we = from_device<float>(rows, 0, poison.size());
      std::vector<float> wf(poison.size());
      for (int64_t r = 0; r < s.rows; ++r)
        dequantize_row(type, bytes.data() + r * ref.row_bytes, wf.data() + r * s.cols, s.cols);
      for (int64_t r = 0; r < s.rows; ++r) {
        for (int64_t g = 0; g < s.cols / 128; ++g) {
          const float* f = wf.data() + r * s.cols + g * 128;
          const float* e0 = we.data() + r * s.cols + g * 128;
          const auto [lo, hi] = std::minmax_element(f, f + 128);
          const float d = fp16_to_fp32(fp32_to_fp16((*hi - *lo) / 15.0f)), m = fp16_to_fp32(fp32_to_fp16(*lo));
          double plain = 0, got = 0;
          for (int e = 0; e < 128; ++e) {
            const float q = d > 0 ? std::clamp(std::nearbyint((f[e] - m) / d), 0.0f, 15.0f) : 0.0f;
            plain += std::pow(static_cast<double>(f[e]) - (static_cast<double>(d) * q + m), 2);
            got += std::pow(static_cast<double>(f[e]) - e0[e], 2);
            ASSERT_LE(std::fabs(e0[e] - f[e]), *hi - *lo + 1e-6f) << "row " << r << " element " << g * 128 + e;
          }
          ASSERT_LE(got, plain * (1 + 1e-5) + 1e-12) << "row " << r << " group " << g;
        }
      }
      for (int n : {1, 3, 17, 100}) {
        std::vector<float> x(static_cast<size_t>(n * s.cols));
        for (float& v : x) v = unit(rng);
        const std::vector<float> xq = cpu_quantized(type, x, n, s.cols);
        const Buffer xd = to_device(x.data(), x.size() * 4, 0);
        std::vector<float> yp(static_cast<size_t>(n * s.rows), std::nanf(""));
        const Buffer yd = to_device(yp.data(), yp.size() * 4, 0);
        ASSERT_TRUE(e0m4.matmul(**w, ClView{ClPool::mem(xd), 0}, n, ClView{ClPool::mem(yd), 0}).ok());
        const auto y = from_device<float>(yd, 0, yp.size());
        expect_product(y, we, xq, n, s.rows, s.cols, e0m4.uses_tensor_cores(n) ? 2e-3 : 2e-5);
        if (HasFailure()) return;
      }
    }
  }
}

TEST_F(ClMatmulTest, GetRowsIsTheCpuDequantizationBitForBit) {
  cpu::CpuDevice cpu(1);
  for (WeightType type : kTypes) {
    for (const Shape& s : shapes_for(type)) {
      SCOPED_TRACE("type " + std::to_string(static_cast<int>(type)) + ", " + std::to_string(s.rows) + " x " +
                   std::to_string(s.cols));
      const auto bytes = random_weight(type, s.rows, s.cols, 99);
      const WeightRef ref = ref_of(type, bytes, s.rows, s.cols);
      auto w = mm_->upload(ref);
      ASSERT_TRUE(w.ok()) << w.status().message();
      const std::vector<int32_t> ids = {0, static_cast<int32_t>(s.rows - 1), 5, 5, static_cast<int32_t>(s.rows / 2), 1, 17};
      const int n = static_cast<int>(ids.size());
      std::vector<float> want(ids.size() * static_cast<size_t>(s.cols));
      cpu.get_rows(ref, ids.data(), n, want.data());
      constexpr size_t kIdOff = 4, kOutOff = 64;
      const Buffer idd = to_device(ids.data(), ids.size() * 4, kIdOff);
      const Buffer outd = to_device(want.data(), 0, kOutOff + want.size() * 4);  // room, contents unset
      ASSERT_TRUE(mm_->get_rows(**w, ClView{ClPool::mem(idd), kIdOff}, n, ClView{ClPool::mem(outd), kOutOff}).ok());
      const auto got = from_device<float>(outd, kOutOff, want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        uint32_t a, b;
        std::memcpy(&a, &got[i], 4);
        std::memcpy(&b, &want[i], 4);
        ASSERT_EQ(a, b) << "element " << i << ": " << got[i] << " vs " << want[i];
      }
    }
  }
}

TEST_F(ClMatmulTest, AFullPoolIsOutOfMemoryAndAnUnknownTypeUnsupported) {
  auto small = ClDeviceContext::open(*info_, ClOptions{cache_->string(), 64 << 10});
  ASSERT_TRUE(small.ok()) << small.status().message();
  auto m = ClMatmul::create(**small);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const auto bytes = random_weight(WeightType::F32, 129, 512, 3);  // 264 KiB
  auto w = (*m)->upload(ref_of(WeightType::F32, bytes, 129, 512));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), Code::out_of_memory) << w.status().message();
  // A Q4_0 weight that fits goes in; the pool then has no room for the next.
  const auto q = random_weight(WeightType::Q4_0, 256, 256, 4);  // 36 KiB
  auto first = (*m)->upload(ref_of(WeightType::Q4_0, q, 256, 256));
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ((*first)->device_bytes(), 256u * 256 / 32 * 18);  // 4.5 bits a weight, as the file
  EXPECT_EQ((*m)->upload(ref_of(WeightType::Q4_0, q, 256, 256)).status().code(), Code::out_of_memory);

  const auto t = static_cast<WeightType>(10);  // Q2_K: not a type the HAL computes with
  EXPECT_FALSE(mm_->supports(t));
  EXPECT_TRUE(mm_->supports(WeightType::Q6_K));
  auto u = mm_->upload(WeightRef{t, bytes.data(), 4, 256, 84});
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), Code::unsupported);
}

// The 4-bit GEMV reads x as float4, but matmul() hands it the quantized copy: an input at any
// float offset gives the bits of a 64-byte aligned one.
TEST_F(ClMatmulTest, FourBitActivationsNeedNoAlignment) {
  const auto q = random_weight(WeightType::Q4_0, 8, 64, 5);
  auto w = mm_->upload(ref_of(WeightType::Q4_0, q, 8, 64));
  ASSERT_TRUE(w.ok());
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
  std::vector<float> y[2];
  int k = 0;
  for (size_t off : {size_t{4}, size_t{64}}) {
    const Buffer xd = to_device(x.data(), x.size() * 4, off);
    const Buffer yd = to_device(x.data(), 8 * 4, 0);
    ASSERT_TRUE(mm_->matmul(**w, ClView{ClPool::mem(xd), off}, 1, ClView{ClPool::mem(yd), 0}).ok());
    y[k++] = from_device<float>(yd, 0, 8);
  }
  EXPECT_EQ(0, std::memcmp(y[0].data(), y[1].data(), 8 * sizeof(float)));
}

// A view (an elastic level's weight) multiplies exactly what a weight uploaded from those rows
// and columns of the file multiplies, bit for bit, on every path (GEMV, int8 GEMV, GEMM, int8
// GEMM; the float GEMV and GEMM too), for every type: the kernels index rows by the stride of
// the weight the view reads, and compute only its columns.
TEST_F(ClMatmulTest, AViewIsTheWeightOfThoseRowsAndColumnsBitForBit) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  auto no_int8 = ClMatmul::create(*ctx_, false, false, false);
  ASSERT_TRUE(no_int8.ok()) << no_int8.status().message();
  auto e0m4 = ClMatmul::create(*ctx_, true);
  ASSERT_TRUE(e0m4.ok()) << e0m4.status().message();
  for (ClMatmul* mm : {mm_, no_int8->get(), e0m4->get()}) {
    for (WeightType type : kTypes) {
      const bool k = block_elems(type) == 256;
      const int64_t rows = 129, cols = is_float(type) ? 100 : 512;
      const auto bytes = random_weight(type, rows, cols, 41);
      const WeightRef whole = ref_of(type, bytes, rows, cols);
      auto w = mm->upload(whole);
      ASSERT_TRUE(w.ok()) << w.status().message();
      // E0M4 requantizes groups of 128 (its views' columns a multiple of 128 here: a weight of
      // other widths keeps the file's 4-bit layout, and its view E0M4's values).
      const bool f = is_float(type), e = mm == e0m4->get() && (type == WeightType::Q4_0 || type == WeightType::Q4_1 ||
                                                                type == WeightType::Q4_K);
      for (const Shape v : {Shape{70, k || e ? 256 : f ? 64 : 96}, Shape{rows, k ? 256 : f ? 99 : e ? 384 : 480},
                            Shape{1, f ? 37 : 512}, Shape{100, k || e ? 256 : f ? 72 : 160}}) {
        auto view = ClMatmul::slice(**w, v.rows, v.cols);
        ASSERT_TRUE(view.ok()) << view.status().message();
        EXPECT_TRUE((*view)->is_view());
        EXPECT_EQ((*view)->device_bytes(), 0u);
        WeightRef part = whole;  // those rows and columns of the file, at its row stride
        part.rows = v.rows;
        part.cols = v.cols;
        auto own = mm->upload(part);
        ASSERT_TRUE(own.ok()) << own.status().message();
        for (int n : {1, 3, 8, 17, 64}) {
          SCOPED_TRACE(std::string(mm == mm_ ? "default" : mm == e0m4->get() ? "e0m4" : "float") + " matmul, type " +
                       std::to_string(static_cast<int>(type)) + ", view " + std::to_string(v.rows) + " x " +
                       std::to_string(v.cols) + ", " + std::to_string(n) + " tokens");
          std::vector<float> x(static_cast<size_t>(n * v.cols));
          for (float& e : x) e = unit(rng);
          const Buffer xd = to_device(x.data(), x.size() * 4, 0);
          std::vector<float> poison(static_cast<size_t>(n * v.rows), std::nanf(""));
          const Buffer ya = to_device(poison.data(), poison.size() * 4, 0), yb = to_device(poison.data(), poison.size() * 4, 0);
          ASSERT_TRUE(mm->matmul(**view, ClView{ClPool::mem(xd), 0}, n, ClView{ClPool::mem(ya), 0}).ok());
          ASSERT_TRUE(mm->matmul(**own, ClView{ClPool::mem(xd), 0}, n, ClView{ClPool::mem(yb), 0}).ok());
          const auto a = from_device<uint32_t>(ya, 0, poison.size()), b = from_device<uint32_t>(yb, 0, poison.size());
          if (!e) {  // and the product of those rows (E0M4's is lossy; the f16 tensor-core GEMM's rounds)
            const bool f16 = mm->uses_tensor_cores(n) && !mm->uses_int8_gemm(**own, n);
            std::vector<float> wf(static_cast<size_t>(v.rows * v.cols));
            for (int64_t r = 0; r < v.rows; ++r)
              dequantize_row(type, bytes.data() + r * whole.row_bytes, wf.data() + r * v.cols, v.cols);
            expect_product(from_device<float>(ya, 0, poison.size()), wf, cpu_quantized(type, x, n, v.cols), n, v.rows,
                           v.cols, f16 ? 2e-3 : 2e-5);
          }
          ASSERT_EQ(a, b);
        }
      }
      EXPECT_EQ(ClMatmul::slice(**w, rows + 1, cols).status().code(), Code::invalid_argument);
      if (!is_float(type)) {
        const Status bad = ClMatmul::slice(**w, rows, block_elems(type) / 2).status();
        EXPECT_EQ(bad.code(), Code::invalid_argument);
        EXPECT_NE(bad.message().find("block"), std::string::npos) << bad.message();
      }
    }
  }
}

// A pool with no room for a released Q4_0 weight's rows (or columns) to come back: the restore
// is out_of_memory and the weight stays as the release left it.
void ClMatmulTest::expect_full_pool_refuses_restore(bool cols) {
  auto small = ClDeviceContext::open(*info_, ClOptions{cache_->string(), 48 << 10});
  ASSERT_TRUE(small.ok()) << small.status().message();
  auto m = ClMatmul::create(**small);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const auto q = random_weight(WeightType::Q4_0, 256, 256, 4);  // 36 KiB
  auto w = (*m)->upload(ref_of(WeightType::Q4_0, q, 256, 256));
  ASSERT_TRUE(w.ok()) << w.status().message();
  // 32 rows, or 32 columns of every row: an eighth either way.
  EXPECT_EQ(cols ? (*m)->release_cols(**w, 32) : (*m)->release_rows(**w, 32), 256u * 7 * 18);
  auto filler = (*m)->upload(ref_of(WeightType::Q4_0, q, 192, 256));  // 27 KiB: the room is gone
  ASSERT_TRUE(filler.ok()) << filler.status().message();
  auto back = cols ? (*m)->restore_cols(**w, 256) : (*m)->restore_rows(**w, 256);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), Code::out_of_memory) << back.status().message();
  EXPECT_EQ(cols ? (*w)->resident_cols() : (*w)->resident_rows(), 32);
  EXPECT_EQ((*w)->device_bytes(), 256u * 18);
}

// Releasing a weight's rows past a prefix gives their device memory back while views of the
// prefix compute the same bits; restoring some and then all of them gives the weight's own
// bits again (every layout, E0M4's requantized rows too), and a full pool refuses a restore
// with the weight left as it was.
TEST_F(ClMatmulTest, ReleasedRowsGiveTheirMemoryBackAndComeBackBitForBit) {
  auto e0m4 = ClMatmul::create(*ctx_, true);
  ASSERT_TRUE(e0m4.ok()) << e0m4.status().message();
  std::vector<float> x(static_cast<size_t>(3 * 512));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(static_cast<float>(i) * 0.37f);
  const Buffer xd = to_device(x.data(), x.size() * 4, 0);
  for (ClMatmul* mm : {mm_, e0m4->get()}) {
    for (WeightType type : kTypes) {
      SCOPED_TRACE("type " + std::to_string(static_cast<int>(type)));
      constexpr int64_t kRows = 129, kCols = 512, kKeep = 40;
      const auto bytes = random_weight(type, kRows, kCols, 43);
      auto w = mm->upload(ref_of(type, bytes, kRows, kCols));
      ASSERT_TRUE(w.ok()) << w.status().message();
      const auto product = [&](const ClWeight& m) {
        std::vector<float> poison(static_cast<size_t>(3 * m.ref().rows), std::nanf(""));
        const Buffer yd = to_device(poison.data(), poison.size() * 4, 0);
        EXPECT_TRUE(mm->matmul(m, ClView{ClPool::mem(xd), 0}, 3, ClView{ClPool::mem(yd), 0}).ok());
        return from_device<uint32_t>(yd, 0, poison.size());
      };
      auto view = ClMatmul::slice(**w, kKeep, kCols);
      auto wide = ClMatmul::slice(**w, 100, kCols);
      ASSERT_TRUE(view.ok() && wide.ok());
      const auto full = product(**w), kept = product(**view), hundred = product(**wide);
      const uint64_t held = (*w)->device_bytes();
      const uint64_t freed = mm->release_rows(**w, kKeep);
      EXPECT_EQ(freed, held - held / kRows * kKeep);
      EXPECT_EQ((*w)->device_bytes(), held - freed);
      EXPECT_EQ((*w)->resident_rows(), kKeep);
      EXPECT_EQ(mm->release_rows(**w, kKeep), 0u);  // nothing more to give
      EXPECT_EQ(mm->release_rows(**view, 1), 0u);   // a view holds nothing
      EXPECT_EQ(product(**view), kept);
      auto some = mm->restore_rows(**w, 100);
      ASSERT_TRUE(some.ok()) << some.status().message();
      EXPECT_EQ(*some, held / kRows * (100 - kKeep));
      EXPECT_EQ(product(**wide), hundred);
      EXPECT_EQ(product(**view), kept);
      auto rest = mm->restore_rows(**w, kRows + 5);  // past the end: all of them
      ASSERT_TRUE(rest.ok()) << rest.status().message();
      EXPECT_EQ((*w)->device_bytes(), held);
      EXPECT_EQ(product(**w), full);
    }
  }
  expect_full_pool_refuses_restore(false);
}

// Releasing a weight's columns past a prefix moves every held row's first columns to buffers of
// the narrower pitch: views of that prefix (of all rows, or of fewer) compute the same bits, the
// memory of the tail goes back, rows can be released and restored meanwhile, and restoring
// some columns, then all, gives the weight's own bits again (every layout, E0M4's too). A full
// pool refuses a restore with the weight left as it was.
TEST_F(ClMatmulTest, ReleasedColumnsGiveTheirMemoryBackAndComeBackBitForBit) {
  auto e0m4 = ClMatmul::create(*ctx_, true);
  ASSERT_TRUE(e0m4.ok()) << e0m4.status().message();
  constexpr int64_t kRows = 40, kCols = 1024;
  std::vector<float> x(static_cast<size_t>(17 * kCols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.29f);
  for (ClMatmul* mm : {mm_, e0m4->get()}) {
    for (WeightType type : kTypes) {
      SCOPED_TRACE(std::string(mm == mm_ ? "default" : "e0m4") + ", type " + std::to_string(static_cast<int>(type)));
      const auto bytes = random_weight(type, kRows, kCols, 47);
      auto w = mm->upload(ref_of(type, bytes, kRows, kCols));
      ASSERT_TRUE(w.ok()) << w.status().message();
      // 3 tokens (the GEMV), then 17 (the GEMM), of the first `cols` inputs each.
      const auto product = [&](const ClWeight& m) {
        const int64_t cols = m.ref().cols;
        std::vector<uint32_t> out;
        for (int n : {3, 17}) {
          std::vector<float> xs;
          for (int t = 0; t < n; ++t) xs.insert(xs.end(), x.begin() + t * kCols, x.begin() + t * kCols + cols);
          const Buffer xd = to_device(xs.data(), xs.size() * 4, 0);
          std::vector<float> poison(static_cast<size_t>(n * m.ref().rows), std::nanf(""));
          const Buffer yd = to_device(poison.data(), poison.size() * 4, 0);
          EXPECT_TRUE(mm->matmul(m, ClView{ClPool::mem(xd), 0}, n, ClView{ClPool::mem(yd), 0}).ok());
          const auto y = from_device<uint32_t>(yd, 0, poison.size());
          out.insert(out.end(), y.begin(), y.end());
        }
        return out;
      };
      auto narrow = ClMatmul::slice(**w, kRows, 256), half = ClMatmul::slice(**w, kRows, 512);
      auto corner = ClMatmul::slice(**w, 16, 256);
      ASSERT_TRUE(narrow.ok() && half.ok() && corner.ok());
      const auto full = product(**w), kept = product(**narrow), halved = product(**half), cornered = product(**corner);
      const uint64_t held = (*w)->device_bytes();
      // 250 columns: the granule (8, 32, 128 or 256) rounds every layout's cut up to 256.
      const uint64_t freed = mm->release_cols(**w, 250);
      EXPECT_EQ(freed, held - held / 4);
      EXPECT_EQ((*w)->device_bytes(), held - freed);
      EXPECT_EQ((*w)->resident_cols(), 256);
      EXPECT_EQ((*narrow)->resident_cols(), 256);  // a view reads its base's
      EXPECT_EQ(mm->release_cols(**w, 256), 0u);   // nothing more to give
      EXPECT_EQ(mm->release_cols(**narrow, 32), 0u);  // a view holds nothing
      EXPECT_EQ(product(**narrow), kept);
      EXPECT_EQ(product(**corner), cornered);
      // Rows too, and back, while the columns are out.
      EXPECT_EQ(mm->release_rows(**w, 16), held / 4 / kRows * (kRows - 16));
      EXPECT_EQ(product(**corner), cornered);
      auto rows = mm->restore_rows(**w, kRows);
      ASSERT_TRUE(rows.ok()) << rows.status().message();
      EXPECT_EQ(product(**narrow), kept);
      auto some = mm->restore_cols(**w, 512);
      ASSERT_TRUE(some.ok()) << some.status().message();
      EXPECT_EQ(*some, held / 4);
      EXPECT_EQ((*w)->resident_cols(), 512);
      EXPECT_EQ(product(**half), halved);
      EXPECT_EQ(product(**narrow), kept);
      auto rest = mm->restore_cols(**w, kCols + 100);  // past the end: all of them
      ASSERT_TRUE(rest.ok()) << rest.status().message();
      EXPECT_EQ((*w)->device_bytes(), held);
      EXPECT_EQ((*w)->resident_cols(), kCols);
      EXPECT_EQ(product(**w), full);
      EXPECT_EQ(product(**corner), cornered);
    }
  }
  expect_full_pool_refuses_restore(true);
}

}  // namespace
}  // namespace llmsvc::hal::opencl
