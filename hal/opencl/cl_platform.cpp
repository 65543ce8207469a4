// SPDX-License-Identifier: Apache-2.0
// Platform and device queries through the ICD loader.
#include "hal/opencl/cl_platform.h"

#include <charconv>

namespace llmsvc::hal::opencl {
namespace {

// A string property through one of the clGet*Info calls: get(size, out, size_out).
template <class Get>
std::string info_string(const Get& get) {
  size_t n = 0;
  if (get(0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  if (get(n, s.data(), nullptr) != CL_SUCCESS) return {};
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string platform_string(cl_platform_id p, cl_platform_info what) {
  return info_string([&](size_t n, void* out, size_t* got) { return clGetPlatformInfo(p, what, n, out, got); });
}

std::string device_string(cl_device_id d, cl_device_info what) {
  return info_string([&](size_t n, void* out, size_t* got) { return clGetDeviceInfo(d, what, n, out, got); });
}

template <class T>
T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  if (clGetDeviceInfo(d, what, sizeof v, &v, nullptr) != CL_SUCCESS) return T{};
  return v;
}

bool has_extension(const std::string& list, std::string_view name) {
  for (size_t at = 0; (at = list.find(name, at)) != std::string::npos; at += name.size()) {
    const size_t end = at + name.size();
    if ((at == 0 || list[at - 1] == ' ') && (end == list.size() || list[end] == ' ')) return true;
  }
  return false;
}

ClDeviceInfo describe(cl_platform_id p, cl_device_id d) {
  ClDeviceInfo i;
  i.platform = p;
  i.device = d;
  i.platform_name = platform_string(p, CL_PLATFORM_NAME);
  i.device_name = device_string(d, CL_DEVICE_NAME);
  i.device_version = device_string(d, CL_DEVICE_VERSION);
  i.driver_version = device_string(d, CL_DRIVER_VERSION);
  i.c_version = device_string(d, CL_DEVICE_OPENCL_C_VERSION);
  i.is_gpu = (device_value<cl_device_type>(d, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_GPU) != 0;
  i.compute_units = static_cast<int>(device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS));
  i.global_memory = device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE);
  i.max_alloc = device_value<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  i.extensions = device_string(d, CL_DEVICE_EXTENSIONS);
  i.fp16 = has_extension(i.extensions, "cl_khr_fp16");
  i.subgroups = has_extension(i.extensions, "cl_khr_subgroups") || has_extension(i.extensions, "cl_intel_subgroups");
  i.priority_hints = has_extension(i.extensions, "cl_khr_priority_hints");
  i.int_dot = has_extension(i.extensions, "cl_khr_integer_dot_product");
  i.nv_unroll = has_extension(i.extensions, "cl_nv_pragma_unroll");
  return i;
}

}  // namespace

std::string ClDeviceInfo::description() const {
  return device_name + " (" + platform_name + ", " + c_version + ")";
}

Result<std::vector<ClDeviceInfo>> list_cl_devices() {
  cl_uint n = 0;
  const cl_int err = clGetPlatformIDs(0, nullptr, &n);
  if (err != CL_SUCCESS || n == 0)
    return Status(Code::unsupported, "opencl: no OpenCL platform here (" +
                                         (err != CL_SUCCESS ? cl_error_name(err) : std::string("none installed")) +
                                         "; the ICD loader reads /etc/OpenCL/vendors or $OCL_ICD_VENDORS)");
  std::vector<cl_platform_id> platforms(n);
  if (cl_int e = clGetPlatformIDs(n, platforms.data(), nullptr); e != CL_SUCCESS) return cl_status(e, "listing platforms");
  std::vector<ClDeviceInfo> out;
  for (cl_platform_id p : platforms) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> devices(nd);
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devices.data(), nullptr) != CL_SUCCESS) continue;
    for (cl_device_id d : devices) out.push_back(describe(p, d));
  }
  if (out.empty()) return Status(Code::unsupported, "opencl: the OpenCL platforms here have no device");
  return out;
}

Result<ClDeviceInfo> select_cl_device(std::string_view rest) {
  auto all = list_cl_devices();
  if (!all.ok()) return all.status();
  if (rest.empty()) {
    for (const ClDeviceInfo& d : *all)
      if (d.is_gpu) return d;
    return all->front();
  }
  size_t index = 0;
  auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), index);
  if (ec == std::errc() && ptr == rest.data() + rest.size()) {
    if (index < all->size()) return (*all)[index];
    return Status(Code::not_found, "");
  }
  for (const ClDeviceInfo& d : *all)
    if (d.device_name.find(rest) != std::string::npos || d.platform_name.find(rest) != std::string::npos) return d;
  return Status(Code::not_found, "");
}

}  // namespace llmsvc::hal::opencl
