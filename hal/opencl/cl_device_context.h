// SPDX-License-Identifier: Apache-2.0
// ClDeviceContext: what llmsvc holds open on one OpenCL device: its context, an in-order
// command queue, the memory pool of its buffers and the builder of its programs.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "hal/opencl/cl_platform.h"
#include "hal/opencl/cl_profiler.h"
#include "hal/opencl/cl_pool.h"
#include "hal/opencl/cl_queue.h"
#include "hal/opencl/program_cache.h"

namespace llmsvc::hal::opencl {

// The priority of llmsvc's queue against other programs' work on the device, where the driver
// offers cl_khr_priority_hints (else the driver's own order): low by default, so that a
// foreground app's GPU work goes first. LLMSVC_CL_QUEUE_PRIORITY=driver|low|medium|high
// overrides it (a measurement).
enum class ClQueuePriority { driver, low, medium, high };

struct ClOptions {
  std::string cache_dir;      // program binaries ("": none)
  uint64_t memory_bytes = 0;  // the pool's capacity (0: 90 % of the device's memory)
  ClQueuePriority priority = ClQueuePriority::low;
};

class ClDeviceContext {
 public:
  static Result<std::unique_ptr<ClDeviceContext>> open(const ClDeviceInfo& device, const ClOptions& options);
  ~ClDeviceContext();

  const ClDeviceInfo& info() const { return info_; }
  cl_context context() const { return context_.get(); }
  ClQueue& queue() { return *queue_; }
  ClPool& pool() { return *pool_; }
  ProgramBuilder& programs() { return *programs_; }
  // The priority the queue was given: the one asked for, or driver where the driver offers no
  // priority hints (or the option said so).
  ClQueuePriority queue_priority() const { return priority_; }
  // Kernel times when LLMSVC_CL_PROFILE is set (cl_profiler.h), else null.
  ClProfiler* profiler() { return profiler_.get(); }

 private:
  ClDeviceContext() = default;
  ClDeviceInfo info_;
  ClQueuePriority priority_ = ClQueuePriority::driver;
  ClContext context_;
  ClCommandQueue command_queue_;
  std::unique_ptr<ClQueue> queue_;
  std::unique_ptr<ClPool> pool_;  // before the context goes: its buffers are released first
  std::unique_ptr<ProgramBuilder> programs_;
  std::unique_ptr<ClProfiler> profiler_;  // before the queue goes: it drains and reads events
};

}  // namespace llmsvc::hal::opencl
