// SPDX-License-Identifier: Apache-2.0
// What llmsvc's GPU work costs a foreground app on the same device (issue 21, Transformer-Lite's
// low-priority queue): a "frame" kernel of the app's own (its own context and queue) is run
// every --period-ms and timed from enqueue to completion, first alone, then while llmsvc
// decodes on the device (embedded, C API) with its queue at the driver's priority, then at low
// priority where the driver offers cl_khr_priority_hints (else that phase is reported as not
// offered). One JSON line per phase: the frame's latency (median, p90, p99, max, in us) and
// llmsvc's decode rate.
//   bench_cl_foreground --model M.gguf [--device opencl[:SPEC]] [--seconds 5] [--period-ms 4]
//                       [--frame-mib 16]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hal/opencl/cl_device_context.h"
#include "hal/opencl/cl_platform.h"
#include "llmsvc/llmsvc.h"

namespace llmsvc::hal::opencl {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kFrame = R"(
__kernel void frame(__global const float* x, __global float* y) {
  const size_t i = get_global_id(0);
  y[i] = x[i] * 0.5f + 1.0f;
})";

struct Args {
  std::string model, device = "opencl";
  double seconds = 5, period_ms = 4;
  size_t frame_mib = 16;
};

// The foreground app: its own context, queue and buffers on the device.
struct Foreground {
  std::unique_ptr<ClDeviceContext> ctx;
  ClProgram program;
  ClKernel kernel;
  ClMem x, y;
  size_t n = 0;
};

bool open_foreground(const ClDeviceInfo& info, size_t mib, Foreground& f) {
  auto c = ClDeviceContext::open(info, ClOptions{"", 0, ClQueuePriority::driver});
  if (!c.ok()) return std::fprintf(stderr, "foreground: %s\n", c.status().message().c_str()), false;
  f.ctx = std::move(c).value();
  cl_int err = CL_SUCCESS;
  const char* src = kFrame;
  f.program.reset(clCreateProgramWithSource(f.ctx->context(), 1, &src, nullptr, &err));
  if (err != CL_SUCCESS || clBuildProgram(f.program.get(), 1, &info.device, "", nullptr, nullptr) != CL_SUCCESS)
    return std::fprintf(stderr, "foreground: the frame kernel did not build\n"), false;
  f.kernel.reset(clCreateKernel(f.program.get(), "frame", &err));
  f.n = mib * (1u << 20) / sizeof(float);
  f.x.reset(clCreateBuffer(f.ctx->context(), CL_MEM_READ_WRITE, f.n * sizeof(float), nullptr, &err));
  f.y.reset(clCreateBuffer(f.ctx->context(), CL_MEM_READ_WRITE, f.n * sizeof(float), nullptr, &err));
  if (err != CL_SUCCESS) return std::fprintf(stderr, "foreground: buffers: %d\n", err), false;
  cl_mem x = f.x.get(), y = f.y.get();
  clSetKernelArg(f.kernel.get(), 0, sizeof(cl_mem), &x);
  clSetKernelArg(f.kernel.get(), 1, sizeof(cl_mem), &y);
  return true;
}

// Frames every period for `seconds`: each one's enqueue-to-completion time in us.
std::vector<double> run_frames(Foreground& f, const Args& a) {
  std::vector<double> us;
  cl_command_queue q = f.ctx->queue().handle();
  const auto end = Clock::now() + std::chrono::duration<double>(a.seconds);
  auto next = Clock::now();
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    const size_t global = f.n;
    clEnqueueNDRangeKernel(q, f.kernel.get(), 1, nullptr, &global, nullptr, 0, nullptr, nullptr);
    clFinish(q);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    next += std::chrono::microseconds(static_cast<int64_t>(a.period_ms * 1000));
    std::this_thread::sleep_until(next);
  }
  return us;
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// One phase: frames alone (priority empty) or while llmsvc decodes with its queue at `priority`.
bool phase(const Args& a, Foreground& f, const char* priority, bool offered) {
  llmsvc_service* svc = nullptr;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> tokens{0};
  std::thread decoder;
  if (priority) {
    ::setenv("LLMSVC_CL_QUEUE_PRIORITY", priority, 1);
    llmsvc_bind_options o;
    llmsvc_bind_options_init(&o);
    o.model_path = a.model.c_str();
    o.device = a.device.c_str();
    const llmsvc_status s = llmsvc_bind(&o, &svc);
    if (s != LLMSVC_OK) return std::fprintf(stderr, "bind: %s\n", llmsvc_last_error()), false;
    decoder = std::thread([&] {
      llmsvc_context_options co;
      llmsvc_context_options_init(&co);
      co.raw = 1;
      llmsvc_context* ctx = nullptr;
      if (llmsvc_context_new(svc, &co, &ctx) != LLMSVC_OK) return;
      llmsvc_call_options cp;
      llmsvc_call_options_init(&cp);
      cp.max_tokens = 64;
      // Tokens counted as they stream: a phase may be shorter than a call on a slow device.
      cp.on_tokens = [](const llmsvc_piece* piece, void* user) {
        *static_cast<std::atomic<uint64_t>*>(user) += piece->n_tokens;
        return 0;
      };
      cp.on_tokens_user = &tokens;
      const std::string text = "The history of the city begins";
      while (!stop.load()) {
        llmsvc_call_result r;
        llmsvc_call_result_init(&r);
        if (llmsvc_call(ctx, text.data(), text.size(), &cp, nullptr, nullptr, &r) != LLMSVC_OK) break;
      }
      const std::string id = llmsvc_context_id(ctx);
      llmsvc_context_close(ctx);
      llmsvc_context_delete(svc, id.c_str());
    });
    std::this_thread::sleep_for(std::chrono::seconds(1));  // past its first prompt
  }
  const uint64_t tokens0 = tokens.load();
  const auto t0 = Clock::now();
  const std::vector<double> us = run_frames(f, a);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const uint64_t decoded = tokens.load() - tokens0;
  stop = true;
  if (decoder.joinable()) decoder.join();
  if (svc) llmsvc_unbind(svc);
  std::printf(
      "{\"bench\":\"cl_foreground\",\"phase\":\"%s\",\"priority_hints\":%s,\"frames\":%zu,\"frame_us_median\":%.1f,"
      "\"frame_us_p90\":%.1f,\"frame_us_p99\":%.1f,\"frame_us_max\":%.1f,\"llmsvc_tok_per_s\":%.1f}\n",
      priority ? priority : "alone", offered ? "true" : "false", us.size(), pct(us, 0.5), pct(us, 0.9),
      pct(us, 0.99), us.empty() ? 0.0 : *std::max_element(us.begin(), us.end()),
      static_cast<double>(decoded) / secs);
  std::fflush(stdout);
  return true;
}

int run(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view s = argv[i];
    const bool v = i + 1 < argc;
    if (s == "--model" && v) a.model = argv[++i];
    else if (s == "--device" && v) a.device = argv[++i];
    else if (s == "--seconds" && v) a.seconds = std::atof(argv[++i]);
    else if (s == "--period-ms" && v) a.period_ms = std::atof(argv[++i]);
    else if (s == "--frame-mib" && v) a.frame_mib = static_cast<size_t>(std::atol(argv[++i]));
    else return std::fprintf(stderr, "usage: bench_cl_foreground --model M [--device opencl[:SPEC]] [--seconds S] [--period-ms P] [--frame-mib N]\n"), 2;
  }
  if (a.model.empty() || a.device.rfind("opencl", 0) != 0) return std::fprintf(stderr, "bench_cl_foreground: --model and an opencl --device\n"), 2;
  const auto colon = a.device.find(':');
  auto info = select_cl_device(colon == std::string::npos ? "" : std::string_view(a.device).substr(colon + 1));
  if (!info.ok()) return std::fprintf(stderr, "bench_cl_foreground: %s\n", info.status().message().c_str()), 1;
  const bool offered = info->priority_hints && info->device_version >= "OpenCL 2.0";
  std::fprintf(stderr, "device %s; cl_khr_priority_hints %s\n", info->description().c_str(), offered ? "offered" : "not offered");
  Foreground f;
  if (!open_foreground(*info, a.frame_mib, f)) return 1;
  if (!phase(a, f, nullptr, offered) || !phase(a, f, "driver", offered)) return 1;
  if (offered) return phase(a, f, "low", offered) ? 0 : 1;
  std::printf("{\"bench\":\"cl_foreground\",\"phase\":\"low\",\"priority_hints\":false,\"note\":\"not offered by this driver: "
              "llmsvc's queue runs at the driver's priority\"}\n");
  return 0;
}

}  // namespace
}  // namespace llmsvc::hal::opencl

int main(int argc, char** argv) { return llmsvc::hal::opencl::run(argc, argv); }
