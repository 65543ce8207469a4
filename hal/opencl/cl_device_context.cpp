// SPDX-License-Identifier: Apache-2.0
// ClDeviceContext: clCreateContext and clCreateCommandQueue on the chosen device (at low
// priority where the driver offers priority hints).
#include "hal/opencl/cl_device_context.h"

#include <CL/cl_ext.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

// OpenCL 2.0's queue constructor, the only one that takes cl_khr_priority_hints' property;
// llmsvc builds against the 1.2 API (cl_api.h), and the ICD loader exports this entry point.
// Called only on devices of version 2.0 or later that offer the extension.
extern "C" CL_API_ENTRY cl_command_queue CL_API_CALL clCreateCommandQueueWithProperties(
    cl_context context, cl_device_id device, const cl_bitfield* properties, cl_int* errcode_ret);

namespace llmsvc::hal::opencl {
namespace {

ClQueuePriority priority_from_env(ClQueuePriority fallback) {
  const char* v = std::getenv("LLMSVC_CL_QUEUE_PRIORITY");
  if (v == nullptr) return fallback;
  const std::string_view s(v);
  if (s == "driver") return ClQueuePriority::driver;
  if (s == "low") return ClQueuePriority::low;
  if (s == "medium") return ClQueuePriority::medium;
  if (s == "high") return ClQueuePriority::high;
  return fallback;
}

// "OpenCL 2.1 ..." -> 21.
int version_of(const std::string& device_version) {
  int major = 0, minor = 0;
  if (std::sscanf(device_version.c_str(), "OpenCL %d.%d", &major, &minor) != 2) return 0;
  return major * 10 + minor;
}

}  // namespace

Result<std::unique_ptr<ClDeviceContext>> ClDeviceContext::open(const ClDeviceInfo& device, const ClOptions& options) {
  std::unique_ptr<ClDeviceContext> c(new ClDeviceContext());
  c->info_ = device;
  cl_int err = CL_SUCCESS;
  const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(device.platform), 0};
  c->context_.reset(clCreateContext(props, 1, &device.device, nullptr, nullptr, &err));
  if (err != CL_SUCCESS) return cl_status(err, "creating a context on " + device.description());
  const bool profile = ClProfiler::wanted();
  const cl_command_queue_properties flags = profile ? CL_QUEUE_PROFILING_ENABLE : 0;
  const ClQueuePriority want = priority_from_env(options.priority);
  if (want != ClQueuePriority::driver && device.priority_hints && version_of(device.device_version) >= 20) {
    const cl_bitfield level = want == ClQueuePriority::low      ? CL_QUEUE_PRIORITY_LOW_KHR
                              : want == ClQueuePriority::medium ? CL_QUEUE_PRIORITY_MED_KHR
                                                                : CL_QUEUE_PRIORITY_HIGH_KHR;
    const cl_bitfield props[] = {CL_QUEUE_PROPERTIES, flags, CL_QUEUE_PRIORITY_KHR, level, 0};
    c->command_queue_.reset(clCreateCommandQueueWithProperties(c->context_.get(), device.device, props, &err));
    if (err != CL_SUCCESS) return cl_status(err, "creating a queue of priority " + std::to_string(level) + " on " + device.description());
    c->priority_ = want;
  } else {
    c->command_queue_.reset(clCreateCommandQueue(c->context_.get(), device.device, flags, &err));
    if (err != CL_SUCCESS) return cl_status(err, "creating a queue on " + device.description());
  }
  c->queue_ = std::make_unique<ClQueue>(c->command_queue_.get());
  c->pool_ = std::make_unique<ClPool>(c->context_.get(), "opencl:" + device.device_name, device.global_memory,
                                      device.max_alloc, options.memory_bytes);
  c->programs_ = std::make_unique<ProgramBuilder>(c->context_.get(), device, options.cache_dir);
  if (profile) c->profiler_ = std::make_unique<ClProfiler>(c->command_queue_.get());
  return c;
}

ClDeviceContext::~ClDeviceContext() {
  if (command_queue_) clFinish(command_queue_.get());  // no copy outlives what it names
  profiler_.reset();
}

}  // namespace llmsvc::hal::opencl
