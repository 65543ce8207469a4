// SPDX-License-Identifier: Apache-2.0
// The OpenCL API as llmsvc uses it: the 1.2 entry points (what NVIDIA's driver and PoCL both
// offer), RAII handles for its objects, and errors as Status with the call and the code named.
#pragma once

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <memory>
#include <string>
#include <type_traits>

#include "base/status.h"

namespace llmsvc::hal::opencl {

// The name of an OpenCL error code ("CL_OUT_OF_RESOURCES"), or its number.
std::string cl_error_name(cl_int err);
// Code::out_of_memory for the allocation failures, Code::internal otherwise; the message names
// `what` and the error.
Status cl_status(cl_int err, const std::string& what);

template <class T, cl_int (*Release)(T)>
struct ClRelease {
  void operator()(T h) const noexcept {
    if (h) Release(h);
  }
};
template <class T, cl_int (*Release)(T)>
using ClHandle = std::unique_ptr<std::remove_pointer_t<T>, ClRelease<T, Release>>;

using ClContext = ClHandle<cl_context, clReleaseContext>;
using ClCommandQueue = ClHandle<cl_command_queue, clReleaseCommandQueue>;
using ClMem = ClHandle<cl_mem, clReleaseMemObject>;
using ClProgram = ClHandle<cl_program, clReleaseProgram>;
using ClKernel = ClHandle<cl_kernel, clReleaseKernel>;
using ClEvent = ClHandle<cl_event, clReleaseEvent>;

}  // namespace llmsvc::hal::opencl
