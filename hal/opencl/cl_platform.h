// SPDX-License-Identifier: Apache-2.0
// OpenCL devices on this machine (through the ICD loader), what each offers, and the choice of
// one by spec: "" (the first GPU, else the first device), an index ("1") or a text found in
// its platform or device name ("NVIDIA", "Portable").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "hal/opencl/cl_api.h"

namespace llmsvc::hal::opencl {

struct ClDeviceInfo {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  std::string platform_name, device_name, device_version, driver_version, c_version;
  bool is_gpu = false;
  int compute_units = 0;
  uint64_t global_memory = 0;  // bytes
  uint64_t max_alloc = 0;      // the largest single buffer
  // What the kernels may use; each has a path without it.
  bool fp16 = false;            // cl_khr_fp16: half arithmetic (storage through vload_half is core)
  bool subgroups = false;       // cl_khr_subgroups / cl_intel_subgroups
  bool priority_hints = false;  // cl_khr_priority_hints: a low-priority queue
  bool int_dot = false;         // cl_khr_integer_dot_product
  bool nv_unroll = false;       // cl_nv_pragma_unroll (NVIDIA; inline PTX builds there)
  std::string extensions;
  // "NAME (PLATFORM, OpenCL C x.y)": how logs and errors name it.
  std::string description() const;
};

// Every device of every platform, in platform order. Code::unsupported when the loader finds
// no platform (none installed, or OCL_ICD_VENDORS names none).
Result<std::vector<ClDeviceInfo>> list_cl_devices();

// The device `rest` names (see the file comment). Code::not_found when none answers to it.
Result<ClDeviceInfo> select_cl_device(std::string_view rest);

}  // namespace llmsvc::hal::opencl
