// SPDX-License-Identifier: Apache-2.0
// Building llmsvc's kernel programs and launching their kernels: one program from embedded
// sources (kernels/common.cl first), kernels by name, arguments set by type in one call.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "hal/opencl/cl_api.h"
#include "hal/opencl/cl_device_context.h"

namespace llmsvc::hal::opencl {

// A place in device memory: a buffer and a byte offset into it. Kernels take the two as
// separate arguments (no sub-buffers: their offsets must be aligned to the driver's base
// alignment, which activations planned at 64 bytes are not always).
struct ClView {
  cl_mem mem = nullptr;
  size_t offset = 0;
  ClView at(size_t bytes) const { return {mem, offset + bytes}; }
};

// Builds kernels/common.cl followed by each named source (through the device's program cache)
// with `options` (plus -cl-std=CL1.2). The error carries the build log.
Result<ClProgram> build_kernels(ClDeviceContext& ctx, std::initializer_list<std::string_view> sources,
                                std::string_view options = {});
Result<ClKernel> make_kernel(cl_program program, const char* name);
// The most items a work-group of `k` may have on `device` (its registers and local memory).
Result<size_t> max_work_group(cl_kernel k, cl_device_id device);
// Build options for kernels that must round as the CPU does: correctly rounded division and
// sqrt where the device offers them ("" elsewhere).
std::string exact_float_options(const ClDeviceInfo& info);

// Makes `b` hold at least `bytes` of `pool` (grown by half again, so a size growing a token at a
// time reallocates rarely). Safe between launches of one in-order queue: the driver keeps a
// released buffer alive until the kernels using it are done.
Status reserve_scratch(MemoryPool& pool, Buffer& b, size_t bytes);

inline size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

// Measurement knobs from the environment (the LLMSVC_CL_* variables): a non-negative integer
// (unset or malformed: fallback), and a switch ("0" off, any other value on, unset: none).
int env_int(const char* name, int fallback);
std::optional<bool> env_switch(const char* name);

namespace detail {
inline cl_int set_arg(cl_kernel k, cl_uint i, cl_mem m) { return clSetKernelArg(k, i, sizeof(cl_mem), &m); }
inline cl_int set_arg(cl_kernel k, cl_uint i, int32_t v) { return clSetKernelArg(k, i, sizeof(v), &v); }
inline cl_int set_arg(cl_kernel k, cl_uint i, uint32_t v) { return clSetKernelArg(k, i, sizeof(v), &v); }
inline cl_int set_arg(cl_kernel k, cl_uint i, uint64_t v) { return clSetKernelArg(k, i, sizeof(v), &v); }
inline cl_int set_arg(cl_kernel k, cl_uint i, float v) { return clSetKernelArg(k, i, sizeof(v), &v); }
// A view is two arguments: the buffer, then the byte offset as a ulong.
inline cl_int set_arg(cl_kernel k, cl_uint& i, const ClView& v) {
  cl_int e = set_arg(k, i, v.mem);
  if (e == CL_SUCCESS) e = set_arg(k, ++i, static_cast<uint64_t>(v.offset));
  return e;
}
// Local memory of `bytes`.
struct Local {
  size_t bytes;
};
inline cl_int set_arg(cl_kernel k, cl_uint i, Local l) { return clSetKernelArg(k, i, l.bytes, nullptr); }
}  // namespace detail

// Work sizes: global and local per dimension (local {0,..}: the driver chooses).
struct ClRange {
  cl_uint dims = 1;
  std::array<size_t, 3> global{1, 1, 1};
  std::array<size_t, 3> local{0, 0, 0};
};

// Enqueues `kernel` (its arguments set) on `queue` without waiting; with a profiler on the
// queue (cl_profiler.h) its event is kept.
Status enqueue_kernel(cl_command_queue queue, cl_kernel kernel, const ClRange& r);

// Sets the arguments in order and enqueues the kernel on `queue` (no wait).
template <class... Args>
Status launch(cl_command_queue queue, cl_kernel kernel, const ClRange& r, const Args&... args) {
  cl_uint i = 0;
  cl_int err = CL_SUCCESS;
  ((err = err == CL_SUCCESS ? detail::set_arg(kernel, i, args) : err, ++i), ...);
  if (err != CL_SUCCESS) return cl_status(err, "setting a kernel argument");
  return enqueue_kernel(queue, kernel, r);
}

}  // namespace llmsvc::hal::opencl
