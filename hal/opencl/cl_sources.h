// SPDX-License-Identifier: Apache-2.0
// The OpenCL C sources of hal/opencl/kernels/, embedded at build time (embed_kernels.cmake).
#pragma once

#include <string_view>

namespace llmsvc::hal::opencl {

// The text of kernels/NAME.cl, or "" when there is no such file.
std::string_view cl_source(std::string_view name);

}  // namespace llmsvc::hal::opencl
