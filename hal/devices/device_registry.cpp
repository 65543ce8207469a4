// SPDX-License-Identifier: Apache-2.0
// The device registry: a table of backends, each with its name and a way to open one device.
#include "hal/devices/device_registry.h"

#include <algorithm>

#include "hal/cpu/cpu_device.h"
#include "hal/opencl/cl_device.h"

namespace llmsvc::hal {
namespace {

struct Backend {
  std::string_view name;
  // The backend's devices as specs, present here.
  std::vector<std::string> (*present)();
  // Opens the device `rest` names ("" for the first, else an index or text), or nothing.
  Result<std::unique_ptr<Device>> (*open)(std::string_view rest, const DeviceOptions& options);
};

std::vector<std::string> cpu_present() { return {"cpu", "cpu:1"}; }

Result<std::unique_ptr<Device>> cpu_open(std::string_view rest, const DeviceOptions& options) {
  // "cpu" / "cpu:0": the host, its memory shared with the KV chunks; "cpu:1": a second device
  // whose memory is a pool of its own.
  const int threads = options.n_threads > 0 ? options.n_threads : 1;
  if (rest.empty() || rest == "0")
    return cpu::make_cpu_device(threads, options.memory_bytes ? "cpu:0" : "host", options.memory_bytes);
  if (rest == "1") return cpu::make_cpu_device(threads, "cpu:1", options.memory_bytes);
  return Status(Code::not_found, "");
}

std::vector<std::string> opencl_present() {
  std::vector<std::string> out;
  auto all = opencl::list_cl_devices();
  if (!all.ok()) return out;  // no OpenCL platform here
  for (size_t i = 0; i < all->size(); ++i) out.push_back("opencl:" + std::to_string(i));
  return out;
}

Result<std::unique_ptr<Device>> opencl_open(std::string_view rest, const DeviceOptions& options) {
  opencl::ClDeviceOptions o;
  o.cache_dir = options.cache_dir;
  o.memory_bytes = options.memory_bytes;
  o.kv_bytes = options.kv_bytes;
  auto d = opencl::ClDevice::open(rest, o);
  if (!d.ok()) {
    // No platform at all, or none that answers: not this backend's device (the caller lists
    // what is present); any other failure is the device's own and says so.
    if (d.status().code() == Code::unsupported) return Status(Code::not_found, "");
    return d.status();
  }
  return std::unique_ptr<Device>(std::move(d).value());
}

constexpr Backend kBackends[] = {
    {"cpu", cpu_present, cpu_open},
    {"opencl", opencl_present, opencl_open},
};

std::string present_list() {
  std::string out;
  for (const std::string& d : present_devices()) out += (out.empty() ? "" : ", ") + d;
  return out.empty() ? "none" : out;
}

}  // namespace

std::vector<std::string> present_devices() {
  std::vector<std::string> out;
  for (const Backend& b : kBackends)
    for (std::string& d : b.present()) out.push_back(std::move(d));
  return out;
}

Result<std::unique_ptr<Device>> open_device(std::string_view spec, const DeviceOptions& options) {
  if (spec.empty()) spec = kDefaultDevice;
  const size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  const std::string_view rest = colon == std::string_view::npos ? std::string_view() : spec.substr(colon + 1);
  const bool dangling_colon = colon != std::string_view::npos && rest.empty();  // "cpu:" names nothing
  for (const Backend& b : kBackends) {
    if (b.name != name || dangling_colon) continue;
    auto device = b.open(rest, options);
    if (device.ok() || device.status().code() != Code::not_found) return device;
    break;
  }
  std::string shown(spec.substr(0, 64));
  for (char& c : shown)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return Status(Code::unsupported, "no device '" + shown + "' here; present: " + present_list());
}

Result<std::vector<std::unique_ptr<Device>>> open_devices(std::string_view specs, const DeviceOptions& options) {
  std::vector<std::unique_ptr<Device>> out;
  std::vector<std::string_view> seen;
  if (specs.empty()) specs = kDefaultDevice;
  for (size_t at = 0; at <= specs.size();) {
    const size_t comma = std::min(specs.find(',', at), specs.size());
    const std::string_view spec = specs.substr(at, comma - at);
    if (spec.empty()) return Status(Code::invalid_argument, "devices: an empty name in the list");
    // "cpu" and "cpu:0" are one device.
    const std::string_view key = spec.ends_with(":0") ? spec.substr(0, spec.size() - 2) : spec;
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      return Status(Code::invalid_argument, "devices: " + std::string(spec.substr(0, 64)) + " is named twice");
    seen.push_back(key);
    auto d = open_device(spec, options);
    if (!d.ok()) return d.status();
    out.push_back(std::move(d).value());
    at = comma + 1;
  }
  return out;
}

}  // namespace llmsvc::hal
