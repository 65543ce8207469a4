// SPDX-License-Identifier: Apache-2.0
// ClOps on a real OpenCL device (PoCL in CI) against the CPU backend's ops on random inputs:
// norms, RoPE, gated activations, adds and scales to float rounding; K/V rows stored as the
// CPU stores them; attention (decode and prefill, grouped heads, sliding window, partial last
// chunk, chunks scattered over the arena, every KvFormat written by the policy's codecs) and
// its key mass against CpuDevice::attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "hal/cpu/cpu_device.h"
#include "hal/host/fp16.h"
#include "hal/host/rope_table.h"
#include "hal/opencl/cl_ops.h"
#include "hal/opencl/cl_pool.h"
#include "policy/compression/kv_codec.h"
#include "tests/common/file_facts.h"
#include "tests/opencl/act_quant_ref.h"
#include "tests/opencl/cl_test_cache.h"

namespace llmsvc::hal::opencl {
namespace {

// Every view in these tests starts this far into its buffer: ops must honour offsets.
constexpr size_t kFront = 48;

class ClOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = select_cl_device("");
    ASSERT_TRUE(d.ok()) << d.status().message() << " (install pocl-opencl-icd: tools/scripts/install_deps.sh)";
    cache_ = std::make_unique<test::ClTestCache>("llmsvc-clops");
    ASSERT_FALSE(cache_->empty());
    auto c = ClDeviceContext::open(*d, ClOptions{cache_->string(), 0});
    ASSERT_TRUE(c.ok()) << c.status().message();
    ctx_ = std::move(c).value();
    auto o = ClOps::create(*ctx_);
    ASSERT_TRUE(o.ok()) << o.status().message();
    ops_ = std::move(o).value();
  }
  void TearDown() override {
    for (const auto& [what, err] : worst_) {
      char text[32];
      std::snprintf(text, sizeof text, "%.3g", err);
      RecordProperty("max_abs_error_" + what, text);
    }
    ops_.reset();
    ctx_.reset();
    cache_.reset();
  }

  // A device buffer holding `bytes` of data at kFront.
  Buffer upload(const void* data, size_t bytes) {
    auto b = ctx_->pool().alloc(kFront + std::max<size_t>(bytes, 4));
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (bytes) {
      EXPECT_EQ(clEnqueueWriteBuffer(ctx_->queue().handle(), ClPool::mem(*b), CL_TRUE, kFront, bytes, data, 0, nullptr,
                                     nullptr),
                CL_SUCCESS);
    }
    return std::move(b).value();
  }
  template <class T>
  Buffer upload(const std::vector<T>& v) {
    return upload(v.data(), v.size() * sizeof(T));
  }
  static ClView view(const Buffer& b) { return ClView{ClPool::mem(b), kFront}; }
  // n values of T from kFront of b, once the queue has run what is enqueued.
  template <class T>
  std::vector<T> download(const Buffer& b, size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(clEnqueueReadBuffer(ctx_->queue().handle(), ClPool::mem(b), CL_TRUE, kFront, n * sizeof(T), v.data(), 0,
                                  nullptr, nullptr),
              CL_SUCCESS);
    return v;
  }

  std::vector<float> random(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng_);
    return v;
  }

  // |got - want| <= rel * |want| + abs_tol for every element; the largest error of each kind
  // over the test goes into its XML properties (--gtest_output=xml).
  void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float rel, float abs_tol,
                       const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    double& worst = worst_[what];
    for (size_t i = 0; i < got.size(); ++i) {
      const double err = std::fabs(double(got[i]) - double(want[i]));
      ASSERT_TRUE(err <= rel * std::fabs(double(want[i])) + abs_tol)
          << what << ": element " << i << " is " << got[i] << ", the CPU's " << want[i];
      worst = std::max(worst, err);
    }
  }

  std::map<std::string, double> worst_;
  std::unique_ptr<test::ClTestCache> cache_;
  std::unique_ptr<ClDeviceContext> ctx_;
  std::unique_ptr<ClOps> ops_;
  cpu::CpuDevice cpu_{2};
  std::mt19937 rng_{1234};
};

TEST_F(ClOpsTest, RmsNormMatchesTheCpu) {
  for (int dim : {64, 1000, 4096}) {
    const int rows = 5;
    const auto x = random(size_t(rows) * dim, -3.0f, 3.0f);
    const auto w = random(dim);
    Buffer bx = upload(x), bw = upload(w), bo = upload(std::vector<float>(x.size()));
    for (bool weighted : {true, false}) {
      std::vector<float> want(x.size());
      cpu_.rms_norm(x.data(), weighted ? w.data() : nullptr, rows, dim, 1e-6f, want.data());
      ASSERT_TRUE(ops_->rms_norm(view(bx), weighted ? view(bw) : ClView{}, rows, dim, 1e-6f, view(bo)).ok());
      // With f64 the device sums the squares as the CPU does: the same bits; else f32's rounding.
      const bool fp64 = ctx_->info().extensions.find("cl_khr_fp64") != std::string::npos;
      expect_near_all(download<float>(bo, x.size()), want, fp64 ? 0.0f : 1e-5f, 0.0f, "rms_norm");
    }
  }
}

// The fused residual add and norm: the CPU's add, then its norm, bit for bit (with f64).
TEST_F(ClOpsTest, AddRmsNormIsTheAddThenTheNorm) {
  const bool fp64 = ctx_->info().extensions.find("cl_khr_fp64") != std::string::npos;
  for (int dim : {64, 4096}) {
    const int rows = 3;
    const auto y = random(size_t(rows) * dim, -3.0f, 3.0f), a = random(size_t(rows) * dim, -1.0f, 1.0f);
    const auto w = random(dim);
    std::vector<float> sum = y, want(y.size());
    cpu_.add(sum.data(), a.data(), sum.size());
    cpu_.rms_norm(sum.data(), w.data(), rows, dim, 1e-6f, want.data());
    Buffer by = upload(y), ba = upload(a), bw = upload(w), bo = upload(std::vector<float>(y.size()));
    ASSERT_TRUE(ops_->add_rms_norm(view(by), view(ba), view(bw), rows, dim, 1e-6f, view(bo)).ok());
    expect_near_all(download<float>(by, y.size()), sum, 0.0f, 0.0f, "add_rms_norm's sum");
    expect_near_all(download<float>(bo, y.size()), want, fp64 ? 0.0f : 1e-5f, 0.0f, "add_rms_norm");
  }
}

// The norms' and gated activations' quantized second output is their first output quantized
// as the matmul after them would quantize it (ClMatmul::quantize_input's bits, the CPU's), in
// floats or in the int8 form (quantize_input_q8's), and nothing past it is written.
TEST_F(ClOpsTest, QuantizedOutputsAreTheMatmulsQuantizationOfTheOutput) {
  constexpr int rows = 3;
  // Rows of 576 (SmolLM2's width: 2.25 work-group chunks of 256) and of the longest a norm
  // quantizes in blocks of 32; 512 and 4096 in 256.
  for (const auto& [qblock, dim] : {std::pair{32, 576}, {32, ClOps::kMaxQuantRow}, {256, 512}, {256, 4096}}) {
    const size_t n = static_cast<size_t>(rows) * dim;
    auto x = random(n, -4.0f, 4.0f), a = random(n), w = random(dim, 0.5f, 1.5f);
    const auto up = random(n, -2.0f, 2.0f);
    // A tie of signs at a norm's largest magnitude in the first block (the first one, positive,
    // decides a block of 256's scale).
    x[10] = 4.5f, x[100] = -4.5f, a[10] = 0.5f, a[100] = -0.5f, w[10] = w[100] = 1.5f;
    const auto mode = qblock == 32 ? ClMatmul::ActQuant::q8_32 : ClMatmul::ActQuant::q8_256;
    for (int op = 0; op < 4; ++op) {
      SCOPED_TRACE("op " + std::to_string(op) + ", blocks of " + std::to_string(qblock) + ", rows of " +
                   std::to_string(dim));
      const Buffer bx = upload(x), ba = upload(a), bw = upload(w), bu = upload(up), bo = upload(x);
      std::vector<float> poison(n + 64, std::nanf(""));
      const Buffer bq = upload(poison);
      Status st;
      if (op == 0) st = ops_->rms_norm(view(bx), view(bw), rows, dim, 1e-6f, view(bo), view(bq), qblock);
      if (op == 1) st = ops_->add_rms_norm(view(bx), view(ba), view(bw), rows, dim, 1e-6f, view(bo), view(bq), qblock);
      if (op == 2) st = ops_->swiglu(view(bo), view(bu), n, view(bq), qblock);
      if (op == 3) st = ops_->geglu(view(bo), view(bu), n, view(bq), qblock);
      ASSERT_TRUE(st.ok()) << st.message();
      const auto out = download<float>(bo, n);
      const auto got = download<float>(bq, n + 64);
      const auto want = cpu_quantized(mode, out, rows, dim);
      for (size_t i = 0; i < n; ++i) {
        uint32_t g, e;
        std::memcpy(&g, &got[i], 4);
        std::memcpy(&e, &want[i], 4);
        ASSERT_EQ(g, e) << "element " << i << ": " << got[i] << " vs " << want[i];
      }
      for (size_t i = n; i < n + 64; ++i) ASSERT_TRUE(std::isnan(got[i])) << "written past the output at " << i;
      // The int8 form (the int8 GEMV's input): the same codes and scales, and its half sums.
      {
        const size_t at = ClMatmul::q8_params_offset(rows, dim), bytes = at + n / 32 * 8;
        const Buffer bx8 = upload(x), bo8 = upload(x), b8 = upload(std::vector<uint8_t>(bytes + 64, 0xA5));
        const ClView q8 = view(b8), p8 = q8.at(at);
        if (op == 0) st = ops_->rms_norm(view(bx8), view(bw), rows, dim, 1e-6f, view(bo8), q8, qblock, p8);
        if (op == 1) st = ops_->add_rms_norm(view(bx8), view(ba), view(bw), rows, dim, 1e-6f, view(bo8), q8, qblock, p8);
        if (op == 2) st = ops_->swiglu(view(bo8), view(bu), n, q8, qblock, p8);
        if (op == 3) st = ops_->geglu(view(bo8), view(bu), n, q8, qblock, p8);
        ASSERT_TRUE(st.ok()) << st.message();
        EXPECT_EQ(download<float>(bo8, n), out);
        const auto form = download<uint8_t>(b8, bytes + 64);
        for (size_t i = bytes; i < form.size(); ++i) ASSERT_EQ(form[i], 0xA5) << "written past the int8 form at " << i;
        std::vector<float> got8;
        ASSERT_TRUE(q8_form_floats(form, rows, dim, &got8)) << "a block's half sums are not its codes'";
        for (size_t i = 0; i < n; ++i) {
          uint32_t g, e;
          std::memcpy(&g, &got8[i], 4);
          std::memcpy(&e, &want[i], 4);
          ASSERT_EQ(g, e) << "int8 form, element " << i << ": " << got8[i] << " vs " << want[i];
        }
      }
      // And the first output is the one without the second.
      const Buffer bx2 = upload(x), bo2 = upload(x);
      if (op == 0) st = ops_->rms_norm(view(bx2), view(bw), rows, dim, 1e-6f, view(bo2));
      if (op == 1) st = ops_->add_rms_norm(view(bx2), view(ba), view(bw), rows, dim, 1e-6f, view(bo2));
      if (op == 2) st = ops_->swiglu(view(bo2), view(bu), n);
      if (op == 3) st = ops_->geglu(view(bo2), view(bu), n);
      ASSERT_TRUE(st.ok());
      EXPECT_EQ(download<float>(bo2, n), out);
    }
  }
  const Buffer b = upload(random(512));
  EXPECT_EQ(ops_->swiglu(view(b), view(b), 100, view(b), 32).code(), Code::invalid_argument);  // 100 % 32 != 0
  EXPECT_EQ(ops_->rms_norm(view(b), ClView{}, 1, 96, 1e-6f, view(b), view(b), 64).code(), Code::invalid_argument);
  EXPECT_EQ(ops_->rms_norm(view(b), ClView{}, 1, ClOps::kMaxQuantRow + 32, 1e-6f, view(b), view(b), 32).code(),
            Code::invalid_argument);
}

TEST_F(ClOpsTest, RopeMatchesTheCpu) {
  const int n_tokens = 4, n_heads = 3, head_dim = 64;
  const std::vector<int32_t> pos = {0, 5, 1023, 31000};
  for (RopeStyle style : {RopeStyle::normal, RopeStyle::neox}) {
    for (int rot : {64, 32}) {
      for (float freq_scale : {1.0f, 0.25f}) {
        auto x = random(size_t(n_tokens) * n_heads * head_dim);
        Buffer bx = upload(x);
        // The angles of the host's table, which the CPU rotates by too: the same bits.
        RopeTable table;
        table.prepare(n_tokens, rot, pos.data(), 10000.0f, freq_scale);
        std::vector<float> angles(table.cos(0), table.cos(0) + n_tokens * rot / 2);
        angles.insert(angles.end(), table.sin(0), table.sin(0) + n_tokens * rot / 2);
        Buffer ba = upload(angles);
        ASSERT_TRUE(ops_->rope(view(bx), n_tokens, n_heads, head_dim, rot, view(ba), style).ok());
        cpu_.rope(x.data(), n_tokens, n_heads, head_dim, rot, pos.data(), 10000.0f, freq_scale, style);
        expect_near_all(download<float>(bx, x.size()), x, 0.0f, 0.0f, "rope");
      }
    }
  }
}

TEST_F(ClOpsTest, ElementwiseOpsMatchTheCpu) {
  const size_t n = 1000;  // not a whole number of work-groups
  const auto up = random(n);
  auto gate = random(n, -12.0f, 12.0f);  // GEGLU's three ranges
  Buffer bu = upload(up);
  {
    Buffer bg = upload(gate);
    auto want = gate;
    cpu_.swiglu(want.data(), up.data(), n);
    ASSERT_TRUE(ops_->swiglu(view(bg), view(bu), n).ok());
    expect_near_all(download<float>(bg, n), want, 1e-6f, 0.0f, "swiglu");
  }
  {
    Buffer bg = upload(gate);
    auto want = gate;
    cpu_.geglu(want.data(), up.data(), n);
    ASSERT_TRUE(ops_->geglu(view(bg), view(bu), n).ok());
    expect_near_all(download<float>(bg, n), want, 1e-6f, 0.0f, "geglu");
  }
  {
    Buffer bg = upload(gate);
    auto want = gate;
    cpu_.add(want.data(), up.data(), n);
    ASSERT_TRUE(ops_->add(view(bg), view(bu), n).ok());
    expect_near_all(download<float>(bg, n), want, 0.0f, 0.0f, "add");
  }
  {
    Buffer bg = upload(gate);
    auto want = gate;
    cpu_.add_bias(want.data(), up.data(), 10, 100);
    ASSERT_TRUE(ops_->add_bias(view(bg), view(bu), 10, 100).ok());
    expect_near_all(download<float>(bg, n), want, 0.0f, 0.0f, "add_bias");
  }
  {
    Buffer bg = upload(gate);
    auto want = gate;
    cpu_.scale(want.data(), n, 0.37f);
    ASSERT_TRUE(ops_->scale(view(bg), n, 0.37f).ok());
    expect_near_all(download<float>(bg, n), want, 0.0f, 0.0f, "scale");
  }
}

// A context's KV cache as the tests build it: chunks of C tokens in formats of their own,
// placed in the arena in a shuffled order with gaps (the gaps and unused rows hold NaNs, which
// an op reading them would spread).
struct TestKv {
  int C = 16, n_layer = 2, n_head_kv = 2, head_dim = 64;
  std::vector<KvFormat> formats;
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> arena;

  KvBlockShape shape() const { return {C, n_head_kv, head_dim}; }
  int kv_dim() const { return n_head_kv * head_dim; }
  size_t k_bytes(KvFormat f) const { return kv_block_bytes(f, KvPart::key, shape()); }
  size_t layer_bytes(KvFormat f) const { return k_bytes(f) + kv_block_bytes(f, KvPart::value, shape()); }
  uint8_t* k_block(int c, int layer) { return arena.data() + offsets[c] + layer * layer_bytes(formats[c]); }
  uint8_t* v_block(int c, int layer) { return k_block(c, layer) + k_bytes(formats[c]); }

  // Lays out the chunks; every byte starts as 0xFF (an f16 NaN).
  void place(std::mt19937& rng) {
    std::vector<int> order(formats.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    offsets.assign(formats.size(), 0);
    uint64_t at = 64;
    for (int c : order) {
      offsets[c] = at;
      at += (size_t(n_layer) * layer_bytes(formats[c]) + 63) / 64 * 64 + 128;
    }
    arena.assign(at, 0xFF);
  }
  // Writes chunk c's rows (f16, [token][channel], C rows) of one layer in its format.
  void write(int c, int layer, const std::vector<uint16_t>& k, const std::vector<uint16_t>& v, int rows) {
    if (formats[c] == KvFormat::f16) {
      std::memcpy(k_block(c, layer), k.data(), size_t(rows) * kv_dim() * 2);
      std::memcpy(v_block(c, layer), v.data(), size_t(rows) * kv_dim() * 2);
    } else {
      policy::kv_quantize(KvPart::key, shape(), k.data(), formats[c], k_block(c, layer));
      policy::kv_quantize(KvPart::value, shape(), v.data(), formats[c], v_block(c, layer));
    }
  }
  std::vector<uint64_t> table() const {
    std::vector<uint64_t> t;
    for (size_t c = 0; c < formats.size(); ++c) t.push_back(kv_table_entry(offsets[c], formats[c]));
    return t;
  }
};

TEST_F(ClOpsTest, StoreKvWritesF16RowsWhereTheCpuWould) {
  TestKv kv;
  kv.head_dim = 8;
  kv.formats.assign(4, KvFormat::f16);
  kv.place(rng_);
  const std::vector<int32_t> pos = {3, 20, 47, 16, 33, 63};
  const int n = int(pos.size()), layer = 1, kv_dim = kv.kv_dim();
  const auto k = random(size_t(n) * kv_dim, -100.0f, 100.0f), v = random(size_t(n) * kv_dim);
  Buffer arena = ctx_->pool().alloc(kv.arena.size()).value();  // offsets count from its start
  ASSERT_EQ(clEnqueueWriteBuffer(ctx_->queue().handle(), ClPool::mem(arena), CL_TRUE, 0, kv.arena.size(),
                                 kv.arena.data(), 0, nullptr, nullptr),
            CL_SUCCESS);
  Buffer table = upload(kv.table()), bk = upload(k), bv = upload(v), bp = upload(pos);
  const ClKv ckv{ClPool::mem(arena), view(table), 4, kv.C, kv.n_layer, kv.n_head_kv, kv.head_dim};
  ASSERT_TRUE(ops_->store_kv(view(bk), view(bv), n, view(bp), ckv, layer).ok());
  for (int i = 0; i < n; ++i) {
    const int c = pos[i] / kv.C, r = pos[i] % kv.C;
    cpu_.store_f16(k.data() + size_t(i) * kv_dim, reinterpret_cast<uint16_t*>(kv.k_block(c, layer)) + r * kv_dim,
                   kv_dim);
    cpu_.store_f16(v.data() + size_t(i) * kv_dim, reinterpret_cast<uint16_t*>(kv.v_block(c, layer)) + r * kv_dim,
                   kv_dim);
  }
  std::vector<uint8_t> got(kv.arena.size());
  ASSERT_EQ(clEnqueueReadBuffer(ctx_->queue().handle(), ClPool::mem(arena), CL_TRUE, 0, got.size(), got.data(), 0,
                                nullptr, nullptr),
            CL_SUCCESS);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], kv.arena[i]) << "byte " << i;
}

// rope_qk (RoPE of q and k in one launch) is rope(q) then rope(k), and rope_qk_store_kv those
// then store_kv(k, v), bit for bit: the tensors and every byte of the KV arena. Both styles, a
// whole and a partial rotation (the unrotated rest of K is stored as it is), q and k of
// different head counts.
TEST_F(ClOpsTest, FusedRopeAndStoreAreTheSeparateOpsBitForBit) {
  TestKv kv;
  kv.formats.assign(4, KvFormat::f16);
  kv.place(rng_);
  const std::vector<int32_t> pos = {3, 20, 47};
  const int n = int(pos.size()), layer = 1, kv_dim = kv.kv_dim(), n_head_q = 3;
  const ClKv proto{nullptr, {}, 4, kv.C, kv.n_layer, kv.n_head_kv, kv.head_dim};
  for (RopeStyle style : {RopeStyle::normal, RopeStyle::neox}) {
    for (int rot : {64, 32}) {
      SCOPED_TRACE(::testing::Message() << (style == RopeStyle::neox ? "neox" : "normal") << ", rot " << rot);
      const auto q = random(size_t(n) * n_head_q * kv.head_dim, -10.0f, 10.0f);
      const auto k = random(size_t(n) * kv_dim, -100.0f, 100.0f), v = random(size_t(n) * kv_dim);
      RopeTable rt;
      rt.prepare(n, rot, pos.data(), 10000.0f, 1.0f);
      std::vector<float> angles(rt.cos(0), rt.cos(0) + n * rot / 2);
      angles.insert(angles.end(), rt.sin(0), rt.sin(0) + n * rot / 2);
      Buffer ba = upload(angles), bp = upload(pos), bv = upload(v), table = upload(kv.table());
      // Three runs on fresh copies: the separate ops, rope_qk, rope_qk_store_kv.
      struct Run {
        Buffer q, k, arena;
      } runs[3];
      for (Run& r : runs) {
        r.q = upload(q);
        r.k = upload(k);
        r.arena = ctx_->pool().alloc(kv.arena.size()).value();
        ASSERT_EQ(clEnqueueWriteBuffer(ctx_->queue().handle(), ClPool::mem(r.arena), CL_TRUE, 0, kv.arena.size(),
                                       kv.arena.data(), 0, nullptr, nullptr),
                  CL_SUCCESS);
      }
      auto kv_of = [&](const Run& r) {
        ClKv c = proto;
        c.arena = ClPool::mem(r.arena);
        c.table = view(table);
        return c;
      };
      ASSERT_TRUE(ops_->rope(view(runs[0].q), n, n_head_q, kv.head_dim, rot, view(ba), style).ok());
      ASSERT_TRUE(ops_->rope(view(runs[0].k), n, kv.n_head_kv, kv.head_dim, rot, view(ba), style).ok());
      ASSERT_TRUE(ops_->store_kv(view(runs[0].k), view(bv), n, view(bp), kv_of(runs[0]), layer).ok());
      ASSERT_TRUE(ops_->rope_qk(view(runs[1].q), n_head_q, view(runs[1].k), kv.n_head_kv, n, kv.head_dim, rot,
                                view(ba), style)
                      .ok());
      ASSERT_TRUE(ops_->store_kv(view(runs[1].k), view(bv), n, view(bp), kv_of(runs[1]), layer).ok());
      ASSERT_TRUE(ops_->rope_qk_store_kv(view(runs[2].q), n_head_q, view(runs[2].k), view(bv), n, rot, view(ba), style,
                                         view(bp), kv_of(runs[2]), layer)
                      .ok());
      std::vector<uint8_t> arenas[3];
      for (int i = 0; i < 3; ++i) {
        arenas[i].resize(kv.arena.size());
        ASSERT_EQ(clEnqueueReadBuffer(ctx_->queue().handle(), ClPool::mem(runs[i].arena), CL_TRUE, 0,
                                      arenas[i].size(), arenas[i].data(), 0, nullptr, nullptr),
                  CL_SUCCESS);
      }
      ASSERT_NE(arenas[0], kv.arena);  // the store wrote something
      const auto q0 = download<uint32_t>(runs[0].q, q.size()), k0 = download<uint32_t>(runs[0].k, k.size());
      ASSERT_NE(q0, download<uint32_t>(upload(q), q.size()));  // and the rotation rotated
      for (int i = 1; i < 3; ++i) {
        SCOPED_TRACE(i == 1 ? "rope_qk" : "rope_qk_store_kv");
        EXPECT_EQ(download<uint32_t>(runs[i].q, q.size()), q0);
        EXPECT_EQ(download<uint32_t>(runs[i].k, k.size()), k0);
        EXPECT_EQ(arenas[i], arenas[0]);
      }
      // With q's scale (Gemma-3's, between the RoPE and the store): the separate scale's bits,
      // every element of q (rotated or not), the same K and arena.
      {
        const float qs = 0.0625f * 1.1f;  // not a power of two: the product rounds
        Buffer bq = upload(q), bk = upload(k);
        Buffer arena = ctx_->pool().alloc(kv.arena.size()).value();
        ASSERT_EQ(clEnqueueWriteBuffer(ctx_->queue().handle(), ClPool::mem(arena), CL_TRUE, 0, kv.arena.size(),
                                       kv.arena.data(), 0, nullptr, nullptr),
                  CL_SUCCESS);
        Buffer sep = upload(q0);  // the separate ops' rotated q, then the scale
        ASSERT_TRUE(ops_->scale(view(sep), q.size(), qs).ok());
        ClKv c = proto;
        c.arena = ClPool::mem(arena);
        c.table = view(table);
        ASSERT_TRUE(ops_->rope_qk_store_kv(view(bq), n_head_q, view(bk), view(bv), n, rot, view(ba), style, view(bp),
                                           c, layer, qs)
                        .ok());
        std::vector<uint8_t> got(kv.arena.size());
        ASSERT_EQ(clEnqueueReadBuffer(ctx_->queue().handle(), ClPool::mem(arena), CL_TRUE, 0, got.size(), got.data(), 0,
                                      nullptr, nullptr),
                  CL_SUCCESS);
        const auto want_q = download<uint32_t>(sep, q.size());
        ASSERT_NE(want_q, q0);  // the scale scaled
        EXPECT_EQ(download<uint32_t>(bq, q.size()), want_q) << "q rotated and scaled";
        EXPECT_EQ(download<uint32_t>(bk, k.size()), k0);
        EXPECT_EQ(got, arenas[0]);
      }
    }
  }
}

struct AttnCase {
  int n_head = 4, n_head_kv = 2, head_dim = 64;
  int n_valid = 75;
  int n_tokens = 1;
  int window = 0;
  std::vector<KvFormat> full;      // formats of the full chunks, in turn; the last partial one is f16
  std::vector<int32_t> positions;  // empty: the last n_tokens positions
  float spread = 1.0f;             // of q and K: larger makes the softmax peaked, as in real models
  bool rank_major = false;         // query head h reads KV head h % n_head_kv (elastic head levels)
};

// A case of these heads over chunks of these formats, n_valid keys, one token.
AttnCase heads_case(int n_head, int n_head_kv, int head_dim, const std::vector<KvFormat>& full, int n_valid) {
  AttnCase a;
  a.n_head = n_head;
  a.n_head_kv = n_head_kv;
  a.head_dim = head_dim;
  a.full = full;
  a.n_valid = n_valid;
  return a;
}

class ClAttention : public ClOpsTest {
 protected:
  void check(const AttnCase& a) {
    SCOPED_TRACE(::testing::Message() << "n_valid " << a.n_valid << ", tokens " << a.n_tokens << ", window " << a.window
                                      << ", heads " << a.n_head << "/" << a.n_head_kv << "x" << a.head_dim
                                      << ", formats " << a.full.size() << (a.rank_major ? ", rank-major" : ""));
    TestKv kv;
    kv.n_head_kv = a.n_head_kv;
    kv.head_dim = a.head_dim;
    const int n_chunks = (a.n_valid + kv.C - 1) / kv.C;
    for (int c = 0; c < n_chunks; ++c) {
      const bool partial = (c + 1) * kv.C > a.n_valid;
      kv.formats.push_back(partial ? KvFormat::f16 : a.full[c % a.full.size()]);
    }
    kv.place(rng_);
    const int kv_dim = kv.kv_dim();
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int layer = 0; layer < kv.n_layer; ++layer) {
      for (int c = 0; c < n_chunks; ++c) {
        const int rows = std::min(kv.C, a.n_valid - c * kv.C);
        std::vector<uint16_t> k(size_t(kv.C) * kv_dim), v(k.size());
        for (size_t i = 0; i < size_t(rows) * kv_dim; ++i) {
          k[i] = fp32_to_fp16(a.spread * nd(rng_));
          v[i] = fp32_to_fp16(nd(rng_));
        }
        kv.write(c, layer, k, v, rows);
      }
    }
    const int layer = 1;
    std::vector<int32_t> pos = a.positions;
    if (pos.empty())
      for (int t = 0; t < a.n_tokens; ++t) pos.push_back(a.n_valid - a.n_tokens + t);
    const int T = int(pos.size());
    const size_t qn = size_t(T) * a.n_head * a.head_dim;
    std::vector<float> q(qn);
    for (float& x : q) x = a.spread * nd(rng_);
    std::vector<float> mass0 = random(size_t(a.n_valid), 0.0f, 2.0f);  // attention adds to it

    AttentionParams p;
    p.n_head = a.n_head;
    p.n_head_kv = a.n_head_kv;
    p.head_dim = a.head_dim;
    p.scale = 1.0f / std::sqrt(float(a.head_dim));
    p.sliding_window = a.window;
    p.rank_major = a.rank_major;

    // The CPU over host views of the same bytes.
    std::vector<float> want(qn), want_mass = mass0;
    std::vector<KvChunkView> views;
    for (int c = 0; c < n_chunks; ++c) {
      KvChunkView ch;
      ch.k = kv.k_block(c, layer);
      ch.v = kv.v_block(c, layer);
      ch.n_tokens = kv.formats[c] == KvFormat::f16 ? std::min(kv.C, a.n_valid - c * kv.C) : kv.C;
      ch.first_pos = c * kv.C;
      ch.format = kv.formats[c];
      ch.mass = want_mass.data() + c * kv.C;
      views.push_back(ch);
    }
    cpu_.attention(q.data(), T, pos.data(), views.data(), n_chunks, p, want.data());

    Buffer arena = ctx_->pool().alloc(kv.arena.size()).value();
    ASSERT_EQ(clEnqueueWriteBuffer(ctx_->queue().handle(), ClPool::mem(arena), CL_TRUE, 0, kv.arena.size(),
                                   kv.arena.data(), 0, nullptr, nullptr),
              CL_SUCCESS);
    Buffer table = upload(kv.table()), bq = upload(q), bp = upload(pos), bo = upload(std::vector<float>(qn, NAN));
    Buffer bm = upload(mass0);
    const ClKv ckv{ClPool::mem(arena), view(table), n_chunks, kv.C, kv.n_layer, kv.n_head_kv, kv.head_dim};
    const Status s = ops_->attention(view(bq), T, view(bp), ckv, layer, a.n_valid, p, view(bo), view(bm));
    ASSERT_TRUE(s.ok()) << s.message();
    expect_near_all(download<float>(bo, qn), want, 0.0f, 1e-3f, "attention");
    expect_near_all(download<float>(bm, mass0.size()), want_mass, 0.0f, 1e-3f, "mass");
    // Without key mass a decode step takes the one-launch kernel (attn_decode) where its
    // scores fit in local memory: the same output.
    Buffer bo2 = upload(std::vector<float>(qn, NAN));
    const Status s2 = ops_->attention(view(bq), T, view(bp), ckv, layer, a.n_valid, p, view(bo2), ClView{});
    ASSERT_TRUE(s2.ok()) << s2.message();
    expect_near_all(download<float>(bo2, qn), want, 0.0f, 1e-3f, T == 1 ? "attention (decode kernel)" : "attention (no mass)");
    // Key mass changes nothing else: the same kernels with and without it, the same bits.
    EXPECT_EQ(download<uint32_t>(bo2, qn), download<uint32_t>(bo, qn)) << "with and without key mass";
    // The o-projection's int8 input written with the output (ClQ8Out): the act_q8p bits of the
    // CPU's quantization of that output, by the decode kernel itself where its work-groups hold
    // whole blocks, else by a launch after it.
    for (const int qblock : {32, 256}) {
      const int64_t cols = int64_t(a.n_head) * a.head_dim;
      if (cols % qblock != 0) continue;
      SCOPED_TRACE("int8 output in blocks of " + std::to_string(qblock));
      const size_t at = ClMatmul::q8_params_offset(T, cols), bytes = at + qn / 32 * 8;
      Buffer bo5 = upload(std::vector<float>(qn, NAN)), b8 = upload(std::vector<uint8_t>(bytes + 64, 0xA5));
      bool fused = false;
      const ClQ8Out q8{view(b8), view(b8).at(at), qblock};
      const Status s5 = ops_->attention(view(bq), T, view(bp), ckv, layer, a.n_valid, p, view(bo5), ClView{}, false,
                                        q8, &fused);
      ASSERT_TRUE(s5.ok()) << s5.message();
      // (A channel split halved for whole blocks sums P.V's key lanes in another order.)
      const auto out = download<float>(bo5, qn);
      expect_near_all(out, want, 0.0f, 1e-3f, "attention (int8 output)");
      const auto form = download<uint8_t>(b8, bytes + 64);
      for (size_t i = bytes; i < form.size(); ++i) ASSERT_EQ(form[i], 0xA5) << "written past the int8 form at " << i;
      std::vector<float> got8;
      ASSERT_TRUE(q8_form_floats(form, T, cols, &got8)) << "a block's half sums are not its codes'";
      const auto want8 = cpu_quantized(qblock == 32 ? ClMatmul::ActQuant::q8_32 : ClMatmul::ActQuant::q8_256, out, T,
                                       cols);
      for (size_t i = 0; i < qn; ++i) {
        uint32_t g, e;
        std::memcpy(&g, &got8[i], 4);
        std::memcpy(&e, &want8[i], 4);
        ASSERT_EQ(g, e) << "int8 form, element " << i << ": " << got8[i] << " vs " << want8[i];
      }
      ++(fused ? fused_q8_ : unfused_q8_);
    }
    // A forward step lets a decode step's key mass wait for one launch after its last layer:
    // the same float sums as adding each layer's as it ran.
    if (T == 1) {
      Buffer now = upload(mass0), later = upload(mass0), scratch = upload(std::vector<float>(qn, NAN));
      for (bool defer : {false, true}) {
        for (int l = 0; l < kv.n_layer; ++l) {
          const Status sl = ops_->attention(view(bq), T, view(bp), ckv, l, a.n_valid, p, view(scratch),
                                            view(defer ? later : now), defer);
          ASSERT_TRUE(sl.ok()) << sl.message();
        }
      }
      ASSERT_TRUE(ops_->flush_mass().ok());
      EXPECT_EQ(download<uint32_t>(later, mass0.size()), download<uint32_t>(now, mass0.size())) << "deferred key mass";
      EXPECT_NE(download<uint32_t>(now, mass0.size()), download<uint32_t>(upload(mass0), mass0.size()));
    }
    // Where every chunk is f16 (and C a power of two) the kernels take their faster path: the
    // same bits, with and without key mass. A prefill of 64 rows or more (tokens x query heads
    // a kv head) there runs on tensor cores where the kernel is built (NVIDIA), in its own
    // order of sums: as close to the CPU, its key mass too.
    if (std::all_of(kv.formats.begin(), kv.formats.begin() + n_chunks, [](KvFormat f) { return f == KvFormat::f16; })) {
      ClKv fast = ckv;
      fast.all_f16 = true;
      Buffer bo3 = upload(std::vector<float>(qn, NAN)), bm3 = upload(mass0), bo4 = upload(std::vector<float>(qn, NAN));
      ASSERT_TRUE(ops_->attention(view(bq), T, view(bp), fast, layer, a.n_valid, p, view(bo3), view(bm3)).ok());
      ASSERT_TRUE(ops_->attention(view(bq), T, view(bp), fast, layer, a.n_valid, p, view(bo4), ClView{}).ok());
      const bool tensor_cores = ops_->tensor_core_attention_note().empty() &&
                                T * (a.n_head / a.n_head_kv) >= 64 && (a.head_dim == 64 || a.head_dim == 128);
      if (tensor_cores) {
        expect_near_all(download<float>(bo3, qn), want, 0.0f, 1e-3f, "attention (tensor cores)");
        expect_near_all(download<float>(bm3, mass0.size()), want_mass, 0.0f, 1e-3f, "mass (tensor cores)");
        EXPECT_EQ(download<uint32_t>(bo4, qn), download<uint32_t>(bo3, qn)) << "tensor cores, without key mass";
        ++tensor_core_paths_;
      } else {
        EXPECT_EQ(download<uint32_t>(bo3, qn), download<uint32_t>(bo, qn)) << "f16 path, with key mass";
        EXPECT_EQ(download<uint32_t>(bm3, mass0.size()), download<uint32_t>(bm, mass0.size())) << "f16 path's key mass";
        EXPECT_EQ(download<uint32_t>(bo4, qn), download<uint32_t>(bo2, qn)) << "f16 path, without key mass";
      }
      ++f16_paths_;
    }
  }
  int fused_q8_ = 0, unfused_q8_ = 0;  // int8 outputs the decode kernel wrote, and launches after
  int f16_paths_ = 0;           // cases that compared the f16 path
  int tensor_core_paths_ = 0;  // of them, cases that ran the tensor-core prefill kernel
};

const std::vector<KvFormat> kF16 = {KvFormat::f16};
const std::vector<KvFormat> kMixed = {KvFormat::q8, KvFormat::q4, KvFormat::f16, KvFormat::q3, KvFormat::q2};

TEST_F(ClAttention, MatchesTheCpuForEveryFormatDecodeAndPrefill) {
  const std::vector<std::vector<KvFormat>> all = {kF16,           {KvFormat::q8}, {KvFormat::q4},
                                                  {KvFormat::q3}, {KvFormat::q2}, kMixed};
  for (const auto& formats : all) {
    for (int tokens : {1, 3, 16}) {
      for (int window : {0, 20}) {
        AttnCase a;
        a.full = formats;
        a.n_tokens = tokens;
        a.window = window;
        check(a);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_F(ClAttention, LongContextsSplitTheKeysAcrossWorkGroups) {
  for (int tokens : {1, 16}) {
    for (int window : {0, 300}) {
      AttnCase a;
      a.full = kMixed;
      a.n_valid = 1000;
      a.n_tokens = tokens;
      a.window = window;
      check(a);
      if (HasFatalFailure()) return;
    }
  }
  // A decode step's scores past the one-launch kernel's keys come from teams of items per key
  // row (attn_dec_scores): every head width it takes, with many query heads per kv head, f16
  // chunks and compressed ones.
  for (const auto& [n_head, n_head_kv, head_dim] : {std::tuple{8, 1, 128}, std::tuple{4, 1, 256}, std::tuple{9, 3, 64}}) {
    for (const auto& formats : {kF16, kMixed}) {
      check(heads_case(n_head, n_head_kv, head_dim, formats, 700));
      if (HasFatalFailure()) return;
    }
  }
}

// Rank-major query heads (an elastic model's head levels: a level keeps whole ranks, one head of
// each kv head's group per rank) against the CPU's rank-major attention, on every path: the
// one-launch decode kernel, long contexts' split decode kernels, prefill (on tensor cores
// where the GPU has them), the int8 output and key mass; with channel splits too.
TEST_F(ClAttention, RankMajorHeadsFollowTheCpu) {
  for (int ranks = 1; ranks <= 3; ++ranks) {
    for (const auto& [tokens, n_valid] : {std::pair{1, 75}, std::pair{1, 700}, std::pair{3, 75}, std::pair{40, 200}}) {
      AttnCase a = heads_case(3 * ranks, 3, 64, n_valid > 100 ? kMixed : kF16, n_valid);
      a.n_tokens = tokens;
      a.rank_major = true;
      check(a);
      if (HasFatalFailure()) return;
    }
  }
  ::setenv("LLMSVC_CL_DECODE_CSPLIT", "2", 1);
  auto o = ClOps::create(*ctx_);
  ::unsetenv("LLMSVC_CL_DECODE_CSPLIT");
  ASSERT_TRUE(o.ok()) << o.status().message();
  ops_ = std::move(o).value();
  AttnCase a = heads_case(6, 3, 64, kF16, 75);
  a.rank_major = true;
  check(a);
}

// A decode step's one-launch kernel splits P.V's channels across work-groups where compute
// units are many (an H100's 132; PoCL has two, so the splits are forced here), over short
// contexts and (forced too) long ones.
TEST_F(ClAttention, DecodeSplitsItsChannelsAcrossWorkGroups) {
  for (const char* csplit : {"2", "4"}) {
    ::setenv("LLMSVC_CL_DECODE_CSPLIT", csplit, 1);
    ::setenv("LLMSVC_CL_DECODE_KEYS", "8192", 1);
    auto o = ClOps::create(*ctx_);
    ::unsetenv("LLMSVC_CL_DECODE_CSPLIT");
    ::unsetenv("LLMSVC_CL_DECODE_KEYS");
    ASSERT_TRUE(o.ok()) << o.status().message();
    ops_ = std::move(o).value();
    for (const auto& [n_head, n_head_kv, head_dim] : {std::tuple{4, 2, 64}, std::tuple{8, 1, 128}}) {
      for (int n_valid : {75, 1000}) {
        SCOPED_TRACE(std::string("channel split ") + csplit);
        check(heads_case(n_head, n_head_kv, head_dim, kMixed, n_valid));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// A decode step's attention writes the o-projection's int8 input itself (one launch fewer a
// layer) where its work-groups hold whole blocks: SmolLM2's heads (9 over 3 of 64: blocks of
// 32, and 256 across heads only where a work-group holds 4 of them), Gemma-3-270M's (4 over 1 of
// 256: both), with channel splits (forced) that leave whole blocks or have to be halved.
TEST_F(ClAttention, DecodeWritesTheOProjectionsInt8Input) {
  // The device's own split (first) depends on its compute units, so only the forced ones count.
  int fused_default = 0, unfused_default = 0;
  for (const char* csplit : {"", "2", "4"}) {
    SCOPED_TRACE(std::string("channel split ") + csplit);
    if (*csplit) {
      if (fused_default + unfused_default == 0) fused_default = fused_q8_, unfused_default = unfused_q8_;
      ::setenv("LLMSVC_CL_DECODE_CSPLIT", csplit, 1);
      auto o = ClOps::create(*ctx_);
      ::unsetenv("LLMSVC_CL_DECODE_CSPLIT");
      ASSERT_TRUE(o.ok()) << o.status().message();
      ops_ = std::move(o).value();
    }
    for (const auto& [n_head, n_head_kv, head_dim] : {std::tuple{9, 3, 64}, std::tuple{4, 1, 256}}) {
      for (const auto& formats : {kF16, kMixed}) {
        check(heads_case(n_head, n_head_kv, head_dim, formats, 130));
        if (HasFatalFailure()) return;
      }
    }
  }
  // Every case's output is int8 one way or the other: 3 forms a split and format (1 of
  // SmolLM2's: 576 is no multiple of 256; 2 of Gemma-3's).
  EXPECT_EQ(fused_q8_ + unfused_q8_, 18);
  EXPECT_EQ(fused_default + unfused_default, 6);
  // Forced splits: by the kernel where one halving of the split leaves whole blocks; Gemma-3's
  // split of 4 would need two (256 / 4 -> 1 channel group), so there the split stays and
  // act_q8p runs after (its 2 formats). The device's own split adds its share (PoCL's 2 compute
  // units: no split, all 6 fused; an H200's 132: Gemma-3's split of 16 stays, 2 unfused). The
  // other tests' shapes check that launch more (prompts, long contexts, blocks of 256 across 2
  // heads of 64).
  EXPECT_EQ(fused_q8_ - fused_default, 10);
  EXPECT_EQ(unfused_q8_ - unfused_default, 2);
}

TEST_F(ClAttention, ManyHeadsPerKvHeadWideHeadsAndScatteredQueries) {
  AttnCase a;
  a.n_head = 8;
  a.n_head_kv = 1;
  a.head_dim = 128;
  a.full = kMixed;
  a.n_valid = 200;
  for (int tokens : {1, 16}) {
    a.n_tokens = tokens;
    check(a);
    if (HasFatalFailure()) return;
  }
  // Queries anywhere before n_valid (a recompute of old positions), one of them seeing only
  // key 0, with a window.
  a.positions = {0, 130, 47, 199};
  a.window = 50;
  check(a);
}

// Gemma-3-270M's shape (4 query heads over 1 kv head of 256 channels) with scores spread as a
// real model's are (a peaked softmax), f16 KV: a prompt and a decode step.
TEST_F(ClAttention, PeakedScoresAsARealModelHasThem) {
  for (int tokens : {1, 64}) {
    AttnCase a;
    a.n_head = 4;
    a.n_head_kv = 1;
    a.head_dim = 256;
    a.full = kF16;
    a.n_valid = 64;
    a.n_tokens = tokens;
    a.spread = 3.0f;
    check(a);
  }
  EXPECT_EQ(f16_paths_, 2);
}

// Prompts long enough for the tensor-core prefill kernel (attention_mma.cl) where the GPU has
// it, with and without key mass: partial row tiles, tiles that cross tokens (3 query heads a
// kv head), a tile's warps seeing different key blocks (causal), a window, queries at
// scattered positions, many key blocks; compressed chunks keep the split path. Elsewhere
// (PoCL) the same cases check the split path.
TEST_F(ClAttention, PrefillOnTensorCoresWhereTheGpuHasThem) {
  std::printf("%s\n", ops_->tensor_core_attention_note().empty() ? "tensor-core attention: on"
                                                                    : ops_->tensor_core_attention_note().c_str());
  const auto shape = [](int n_head, int n_head_kv, int head_dim, int n_valid, int n_tokens, int window) {
    AttnCase a;
    a.n_head = n_head, a.n_head_kv = n_head_kv, a.head_dim = head_dim;
    a.n_valid = n_valid, a.n_tokens = n_tokens, a.window = window;
    return a;
  };
  const std::vector<AttnCase> shapes = {shape(4, 2, 64, 75, 40, 0),    shape(4, 2, 64, 75, 40, 20),
                                        shape(9, 3, 64, 300, 70, 0),   shape(8, 8, 128, 200, 130, 0),
                                        shape(8, 1, 128, 1000, 100, 300), shape(4, 4, 128, 64, 64, 0)};
  for (const auto& formats : {kF16, kMixed}) {
    for (AttnCase a : shapes) {
      a.full = formats;
      a.spread = 1.5f;
      check(a);
      if (HasFatalFailure()) return;
    }
  }
  AttnCase a;  // a recompute of old positions: queries anywhere, one seeing only key 0
  a.n_head = 8;
  a.n_head_kv = 1;
  a.head_dim = 128;
  a.full = kF16;
  a.n_valid = 500;
  for (int t = 0; t < 12; ++t) a.positions.push_back((t * 211) % 500);
  check(a);
  EXPECT_EQ(f16_paths_, 7);
  if (ops_->tensor_core_attention_note().empty()) {
    EXPECT_EQ(tensor_core_paths_, 7);
  }
}

TEST_F(ClAttention, HeadSizesThatSplitWorkGroupsUnevenly) {
  // 80: 20 quads per key row, 3 key lanes and 4 idle items; 3 query heads per kv head: tiles
  // cross tokens. 256: one key lane.
  for (const auto& [n_head, n_head_kv, head_dim] : {std::tuple{6, 2, 80}, std::tuple{2, 1, 256}}) {
    for (int tokens : {1, 5}) {
      AttnCase a;
      a.n_head = n_head;
      a.n_head_kv = n_head_kv;
      a.head_dim = head_dim;
      a.full = kMixed;
      a.n_valid = 90;
      a.n_tokens = tokens;
      check(a);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(ClAttention, NoKeysGiveZeros) {
  const std::vector<float> q(64, 1.0f);
  Buffer bq = upload(q), bp = upload(std::vector<int32_t>{0}), bo = upload(std::vector<float>(64, NAN));
  Buffer table = upload(std::vector<uint64_t>{0});
  Buffer arena = ctx_->pool().alloc(4096).value();
  AttentionParams p;
  p.n_head = 1;
  p.n_head_kv = 1;
  p.head_dim = 64;
  const ClKv kv{ClPool::mem(arena), view(table), 1, 16, 1, 1, 64};
  ASSERT_TRUE(ops_->attention(view(bq), 1, view(bp), kv, 0, 0, p, view(bo), ClView{}).ok());
  for (float x : download<float>(bo, 64)) ASSERT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace llmsvc::hal::opencl
