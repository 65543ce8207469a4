// SPDX-License-Identifier: Apache-2.0
// The device registry: the backends llmsvc can run on, by name, and the one place that names
// them. Embedders choose with a device spec (`--device` on the CLI, llmsvc_bind_options.device,
// llmsvcd's `devices =`): "cpu", "opencl" (the first OpenCL GPU, else the first OpenCL device);
// a backend with several devices takes "NAME:INDEX" or "NAME:TEXT" (the first whose
// description contains TEXT: "opencl:NVIDIA"). No code above hal/ names a backend.
// "cpu:1" is a second CPU device with a memory pool of its own: placement across two devices,
// and the transfers between their spaces, run for real on a machine without an accelerator.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "hal/device.h"

namespace llmsvc::hal {

struct DeviceOptions {
  DeviceOptions() = default;
  explicit DeviceOptions(int threads, uint64_t memory = 0) : n_threads(threads), memory_bytes(memory) {}
  int n_threads = 1;          // the CPU backend's worker team (>= 1)
  uint64_t memory_bytes = 0;  // cap on the device's memory pool (0: what it has)
  uint64_t kv_bytes = 0;      // a GPU's KV arena (0: its default)
  std::string cache_dir;      // where a GPU keeps its compiled programs ("": none)
};

// The device this build runs on when the embedder names none.
inline constexpr std::string_view kDefaultDevice = "cpu";

// The specs of the devices present here, one per device ("cpu", "cpu:1").
std::vector<std::string> present_devices();

// Opens the device `spec` names ("" is kDefaultDevice). Code::unsupported, naming the spec
// and listing the devices present, when no backend or device answers to it.
Result<std::unique_ptr<Device>> open_device(std::string_view spec, const DeviceOptions& options);

// Opens the devices of a comma-separated list in the embedder's order of preference ("cpu",
// "cpu,cpu:1"; "" is kDefaultDevice). Code::invalid_argument for an empty entry or a device
// named twice, else as open_device.
Result<std::vector<std::unique_ptr<Device>>> open_devices(std::string_view specs, const DeviceOptions& options);

}  // namespace llmsvc::hal
