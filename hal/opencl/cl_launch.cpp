// SPDX-License-Identifier: Apache-2.0
// build_kernels / make_kernel: sources joined and built through the program cache; the LLMSVC_CL_*
// measurement knobs read from the environment.
#include "hal/opencl/cl_launch.h"

#include <algorithm>
#include <cstdlib>

#include "hal/opencl/cl_profiler.h"
#include "hal/opencl/cl_sources.h"

namespace llmsvc::hal::opencl {

Result<ClProgram> build_kernels(ClDeviceContext& ctx, std::initializer_list<std::string_view> sources,
                                std::string_view options) {
  std::string text(cl_source("common"));
  for (std::string_view name : sources) {
    const std::string_view s = cl_source(name);
    if (s.empty()) return Status(Code::internal, std::string("opencl: no kernel source ").append(name));
    text += "\n";
    text += s;
  }
  std::string opts = "-cl-std=CL1.2";
  if (!options.empty()) opts.append(" ").append(options);
  // A measurement's knob: options for every program (e.g. NVIDIA's -cl-nv-verbose, whose
  // report LLMSVC_CL_BUILD_LOG=1 prints, or -cl-nv-maxrregcount=N).
  if (const char* extra = std::getenv("LLMSVC_CL_OPTIONS"); extra && *extra) opts.append(" ").append(extra);
  return ctx.programs().build(text, opts);
}

Status enqueue_kernel(cl_command_queue queue, cl_kernel kernel, const ClRange& r) {
  ClProfiler* profiler = ClProfiler::of(queue);
  cl_event ev = nullptr;
  const cl_int err = clEnqueueNDRangeKernel(queue, kernel, r.dims, nullptr, r.global.data(),
                                            r.local[0] != 0 ? r.local.data() : nullptr, 0, nullptr,
                                            profiler ? &ev : nullptr);
  if (err != CL_SUCCESS) return cl_status(err, "launching a kernel");
  if (profiler) profiler->record(kernel, ev);
  return Status::Ok();
}

std::string exact_float_options(const ClDeviceInfo& info) {
  cl_device_fp_config fp = 0;
  if (clGetDeviceInfo(info.device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, nullptr) == CL_SUCCESS &&
      (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0) {
    return "-cl-fp32-correctly-rounded-divide-sqrt";
  }
  return {};
}

Status reserve_scratch(MemoryPool& pool, Buffer& b, size_t bytes) {
  if (b && b.size() >= bytes) return Status::Ok();
  b.reset();
  auto r = pool.alloc(std::max(bytes, bytes / 2 * 3));
  if (!r.ok()) return r.status();
  b = std::move(r).value();
  return Status::Ok();
}

Result<ClKernel> make_kernel(cl_program program, const char* name) {
  cl_int err = CL_SUCCESS;
  ClKernel k(clCreateKernel(program, name, &err));
  if (err != CL_SUCCESS) return cl_status(err, std::string("creating kernel ") + name);
  return k;
}

Result<size_t> max_work_group(cl_kernel k, cl_device_id device) {
  size_t n = 0;
  const cl_int err = clGetKernelWorkGroupInfo(k, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof n, &n, nullptr);
  if (err != CL_SUCCESS) return cl_status(err, "reading a kernel's work-group size");
  return n;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n >= 0 && n <= (1 << 30) ? static_cast<int>(n) : fallback;
}

std::optional<bool> env_switch(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string_view(v) != "0";
}

}  // namespace llmsvc::hal::opencl
