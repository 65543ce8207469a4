// SPDX-License-Identifier: Apache-2.0
// The OpenCL foundation on a real OpenCL implementation (PoCL here and in CI; a GPU driver
// where there is one): devices listed and chosen by spec, their capabilities read from the
// driver, buffers in a pool with a capacity, copies through the queue with events, programs
// built, run, cached on storage and loaded from it, and a build failure carrying its log.
#include <gtest/gtest.h>

#include <cstring>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include "hal/host/host_pool.h"
#include "hal/opencl/cl_device_context.h"
#include "tests/common/file_facts.h"

namespace llmsvc::hal::opencl {
namespace {

class OpenCl : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = select_cl_device("");
    ASSERT_TRUE(d.ok()) << d.status().message() << " (install pocl-opencl-icd: tools/scripts/install_deps.sh)";
    info_ = *d;
    cache_ = test::make_temp_dir("llmsvc-clcache");
    ASSERT_FALSE(cache_.empty());
    auto c = ClDeviceContext::open(info_, ClOptions{cache_.string(), 0});
    ASSERT_TRUE(c.ok()) << c.status().message();
    ctx_ = std::move(c).value();
  }
  void TearDown() override { std::filesystem::remove_all(cache_); }

  ClDeviceInfo info_;
  std::filesystem::path cache_;
  std::unique_ptr<ClDeviceContext> ctx_;
};

TEST_F(OpenCl, DevicesAreListedAndChosenBySpec) {
  auto all = list_cl_devices();
  ASSERT_TRUE(all.ok());
  ASSERT_FALSE(all->empty());
  for (const ClDeviceInfo& d : *all) {
    EXPECT_FALSE(d.device_name.empty());
    EXPECT_GT(d.global_memory, 0u);
    EXPECT_GT(d.compute_units, 0);
    EXPECT_NE(d.c_version.find("OpenCL C"), std::string::npos) << d.c_version;
    // Capabilities come from the extension list, word by word.
    EXPECT_EQ(d.fp16, (" " + d.extensions + " ").find(" cl_khr_fp16 ") != std::string::npos);
  }
  auto by_index = select_cl_device("0");
  ASSERT_TRUE(by_index.ok());
  EXPECT_EQ(by_index->device, all->front().device);
  auto by_text = select_cl_device(all->front().platform_name.substr(0, 6));
  ASSERT_TRUE(by_text.ok());
  EXPECT_EQ(select_cl_device(std::to_string(all->size())).status().code(), Code::not_found);
  EXPECT_EQ(select_cl_device("no such device anywhere").status().code(), Code::not_found);
}

// The queue runs at low priority where the driver offers cl_khr_priority_hints (on OpenCL 2.0
// or later), as the driver orders it elsewhere (PoCL and NVIDIA's driver offer none); the queue
// works either way, and "driver" asks for no hint.
TEST_F(OpenCl, TheQueueIsLowPriorityWhereTheDriverOffersHints) {
  const bool offered = info_.priority_hints && info_.device_version >= "OpenCL 2.0";
  EXPECT_EQ(ctx_->queue_priority(), offered ? ClQueuePriority::low : ClQueuePriority::driver) << info_.extensions;
  for (ClQueuePriority p : {ClQueuePriority::driver, ClQueuePriority::high}) {
    auto c = ClDeviceContext::open(info_, ClOptions{cache_.string(), 0, p});
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ((*c)->queue_priority(), offered ? p : ClQueuePriority::driver);
    host::HostPool host;
    auto src = host.alloc(256), back = host.alloc(256);
    auto dev = (*c)->pool().alloc(256);
    ASSERT_TRUE(src.ok() && back.ok() && dev.ok());
    std::memset(src->data(), 7, 256);
    (*c)->queue().copy(*src, 0, *dev, 0, 256);
    (*c)->queue().copy(*dev, 0, *back, 0, 256).wait();
    EXPECT_TRUE((*c)->queue().status().ok());
    EXPECT_EQ(std::memcmp(back->data(), src->data(), 256), 0);
  }
}

TEST_F(OpenCl, BuffersCountAgainstTheirPoolAndPastItIsOutOfMemory) {
  ClPool small(ctx_->context(), "opencl:test", info_.global_memory, info_.max_alloc, 1 << 20);
  EXPECT_FALSE(small.host_visible());
  auto a = small.alloc(512 << 10);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_NE(ClPool::mem(*a), nullptr);
  EXPECT_EQ(a->data(), nullptr);  // not host-visible
  auto b = small.alloc(768 << 10);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::out_of_memory);
  EXPECT_EQ(small.used(), 512u << 10);
  // Past the device's largest allocation: refused by the driver's limit, cleanly.
  ClPool whole(ctx_->context(), "opencl:test2", info_.global_memory, info_.max_alloc, info_.max_alloc * 4);
  auto huge = whole.alloc(info_.max_alloc + 4096);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), Code::out_of_memory);
  EXPECT_EQ(whole.used(), 0u);
}

TEST_F(OpenCl, CopiesGoThroughTheQueueAndTheirEventsComplete) {
  constexpr size_t n = 1 << 16;
  host::HostPool host;
  auto src = host.alloc(n * 4), back = host.alloc(n * 4);
  auto d1 = ctx_->pool().alloc(n * 4), d2 = ctx_->pool().alloc(n * 4);
  ASSERT_TRUE(src.ok() && back.ok() && d1.ok() && d2.ok());
  auto* in = reinterpret_cast<uint32_t*>(src->data());
  std::iota(in, in + n, 7u);
  ctx_->queue().copy(*src, 0, *d1, 0, n * 4);                   // host -> device
  ctx_->queue().copy(*d1, 4096, *d2, 0, n * 4 - 4096);          // device -> device, offset
  Event done = ctx_->queue().copy(*d2, 0, *back, 0, n * 4 - 4096);  // device -> host
  done.wait();
  EXPECT_TRUE(done.ready());
  EXPECT_TRUE(ctx_->queue().status().ok());
  const auto* out = reinterpret_cast<const uint32_t*>(back->data());
  for (size_t i = 0; i < n - 1024; ++i) ASSERT_EQ(out[i], in[i + 1024]) << i;
}

constexpr const char* kScale = R"(
__kernel void scale(__global const float* x, __global float* y, float s) {
  const size_t i = get_global_id(0);
  y[i] = x[i] * s;
})";

// Runs `scale` from `program` over n floats: y = x * 3.
std::vector<float> run_scale(ClDeviceContext& ctx, cl_program program, size_t n) {
  cl_int err = CL_SUCCESS;
  ClKernel k(clCreateKernel(program, "scale", &err));
  EXPECT_EQ(err, CL_SUCCESS);
  host::HostPool host;
  auto hx = host.alloc(n * 4), hy = host.alloc(n * 4);
  auto x = ctx.pool().alloc(n * 4), y = ctx.pool().alloc(n * 4);
  EXPECT_TRUE(hx.ok() && hy.ok() && x.ok() && y.ok());
  auto* xs = reinterpret_cast<float*>(hx->data());
  for (size_t i = 0; i < n; ++i) xs[i] = static_cast<float>(i) * 0.5f;
  ctx.queue().copy(*hx, 0, *x, 0, n * 4);
  cl_mem xm = ClPool::mem(*x), ym = ClPool::mem(*y);
  const float s = 3.0f;
  clSetKernelArg(k.get(), 0, sizeof xm, &xm);
  clSetKernelArg(k.get(), 1, sizeof ym, &ym);
  clSetKernelArg(k.get(), 2, sizeof s, &s);
  EXPECT_EQ(clEnqueueNDRangeKernel(ctx.queue().handle(), k.get(), 1, nullptr, &n, nullptr, 0, nullptr, nullptr), CL_SUCCESS);
  ctx.queue().copy(*y, 0, *hy, 0, n * 4).wait();
  const auto* ys = reinterpret_cast<const float*>(hy->data());
  return std::vector<float>(ys, ys + n);
}

TEST_F(OpenCl, AProgramIsBuiltOnceThenLoadedFromItsCachedBinary) {
  auto first = ctx_->programs().build(kScale, "-cl-std=CL1.2");
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(ctx_->programs().compiled(), 1u);
  EXPECT_EQ(ctx_->programs().loaded(), 0u);
  const auto y = run_scale(*ctx_, first->get(), 1000);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], static_cast<float>(i) * 1.5f);

  // A second start: a new context and builder over the same cache compiles nothing.
  auto again = ClDeviceContext::open(info_, ClOptions{cache_.string(), 0});
  ASSERT_TRUE(again.ok());
  auto second = (*again)->programs().build(kScale, "-cl-std=CL1.2");
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ((*again)->programs().compiled(), 0u);
  EXPECT_EQ((*again)->programs().loaded(), 1u);
  EXPECT_EQ(run_scale(**again, second->get(), 1000), y);

  // Other options are another program. A cached file cut short, or with a byte changed, never
  // reaches the driver: the program is rebuilt from source and the file replaced.
  ASSERT_TRUE((*again)->programs().build(kScale, "-cl-std=CL1.2 -cl-fast-relaxed-math").ok());
  EXPECT_EQ((*again)->programs().compiled(), 1u);
  uint64_t expected = 1;
  for (int damage = 0; damage < 2; ++damage) {
    for (const auto& e : std::filesystem::directory_iterator(cache_)) {
      if (damage == 0) {
        std::filesystem::resize_file(e.path(), std::filesystem::file_size(e.path()) / 2);
      } else {
        std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(e.path()) - 3));
        f.put('\x5a');
      }
    }
    auto rebuilt = (*again)->programs().build(kScale, "-cl-std=CL1.2");
    ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().message();
    EXPECT_EQ((*again)->programs().compiled(), ++expected);
    EXPECT_EQ(run_scale(**again, rebuilt->get(), 1000), y);
  }
}

TEST_F(OpenCl, AKernelTheDriverCannotBuildIsAnErrorWithItsBuildLog) {
  auto bad = ctx_->programs().build("__kernel void broken(__global float* y) { y[0] = undeclared_name; }");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::internal);
  const std::string m = bad.status().message();
  EXPECT_NE(m.find("CL_BUILD_PROGRAM_FAILURE"), std::string::npos) << m;
  EXPECT_NE(m.find("undeclared_name"), std::string::npos) << "no build log in: " << m;
  EXPECT_NE(m.find(info_.device_name), std::string::npos) << m;
}

}  // namespace
}  // namespace llmsvc::hal::opencl
