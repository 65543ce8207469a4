// SPDX-License-Identifier: Apache-2.0
// ClDeviceContext: clCreateContext and clCreateCommandQueue on the chosen device.
#include "hal/opencl/cl_device_context.h"

namespace llmsvc::hal::opencl {

Result<std::unique_ptr<ClDeviceContext>> ClDeviceContext::open(const ClDeviceInfo& device, const ClOptions& options) {
  std::unique_ptr<ClDeviceContext> c(new ClDeviceContext());
  c->info_ = device;
  cl_int err = CL_SUCCESS;
  const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(device.platform), 0};
  c->context_.reset(clCreateContext(props, 1, &device.device, nullptr, nullptr, &err));
  if (err != CL_SUCCESS) return cl_status(err, "creating a context on " + device.description());
  const bool profile = ClProfiler::wanted();
  c->command_queue_.reset(
      clCreateCommandQueue(c->context_.get(), device.device, profile ? CL_QUEUE_PROFILING_ENABLE : 0, &err));
  if (err != CL_SUCCESS) return cl_status(err, "creating a queue on " + device.description());
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
