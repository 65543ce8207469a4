// SPDX-License-Identifier: Apache-2.0
// ClProfiler: events kept per launch, summed by kernel name; one profiled queue at a time.
#include "hal/opencl/cl_profiler.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace llmsvc::hal::opencl {
namespace {
std::atomic<ClProfiler*> g_profiler{nullptr};
std::atomic<cl_command_queue> g_queue{nullptr};
}  // namespace

bool ClProfiler::wanted() {
  const char* v = std::getenv("LLMSVC_CL_PROFILE");
  return v && *v && std::string(v) != "0";
}

ClProfiler* ClProfiler::of(cl_command_queue queue) {
  ClProfiler* p = g_profiler.load(std::memory_order_acquire);
  return p && g_queue.load(std::memory_order_acquire) == queue ? p : nullptr;
}

ClProfiler::ClProfiler(cl_command_queue queue) : queue_(queue) {
  g_queue.store(queue, std::memory_order_release);
  g_profiler.store(this, std::memory_order_release);
}

ClProfiler::~ClProfiler() {
  if (g_profiler.load() == this) g_profiler.store(nullptr);
  collect();
  if (!totals_.empty()) std::fprintf(stderr, "%s", report().c_str());
}

void ClProfiler::record(cl_kernel kernel, cl_event event) {
  char name[128];
  size_t len = 0;
  if (clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, sizeof name, name, &len) != CL_SUCCESS) len = 0;
  std::lock_guard lock(mu_);
  pending_.emplace_back(std::string(name, len > 0 ? len - 1 : 0), ClEvent(event));
}

void ClProfiler::collect() {
  std::lock_guard lock(mu_);
  if (pending_.empty()) return;
  clFinish(queue_);
  for (auto& [name, event] : pending_) {
    cl_ulong start = 0, end = 0;
    if (clGetEventProfilingInfo(event.get(), CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr) != CL_SUCCESS ||
        clGetEventProfilingInfo(event.get(), CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr) != CL_SUCCESS)
      continue;
    Total& t = totals_[name];
    ++t.launches;
    t.ns += static_cast<double>(end - start);
  }
  pending_.clear();
}

std::string ClProfiler::report() const {
  std::vector<std::pair<std::string, Total>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  double all = 0;
  for (const auto& r : rows) all += r.second.ns;
  std::string out = "opencl kernel profile (GPU time):\n";
  char line[256];
  for (const auto& [name, t] : rows) {
    std::snprintf(line, sizeof line, "  %-28s %9llu launches %12.1f us %5.1f %% %9.2f us each\n", name.c_str(),
                  static_cast<unsigned long long>(t.launches), t.ns / 1e3, 100 * t.ns / all, t.ns / 1e3 / t.launches);
    out += line;
  }
  return out;
}

}  // namespace llmsvc::hal::opencl
