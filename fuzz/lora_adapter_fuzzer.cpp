// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the LoRA adapter parser (runtime/core/model/lora_adapter.h) against the
// committed F32 random llama: any byte string is refused with a Status or yields an adapter
// whose every weight can be read and whose rank and scale are in range. A violation aborts.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>

#include "hal/devices/device_registry.h"
#include "runtime/core/model/lora_adapter.h"
#include "runtime/core/model/model.h"

namespace {

std::unique_ptr<llmsvc::hal::Device> g_device;
std::unique_ptr<llmsvc::Model> g_model;
volatile float g_sink;

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto d = llmsvc::hal::open_device("cpu", llmsvc::hal::DeviceOptions{1});
  check(d.ok());
  g_device = std::move(d).value();
  auto m = llmsvc::Model::load(LLMSVC_FUZZ_MODEL, *g_device);
  check(m.ok());
  g_model = std::move(m).value();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using llmsvc::LoraMatrix;
  using llmsvc::LoraPart;
  auto a = llmsvc::LoraAdapter::from_memory(std::span<const uint8_t>(data, size), *g_model, *g_device);
  if (!a.ok()) {
    check(!a.status().message().empty());
    return 0;
  }
  const llmsvc::LoraAdapter& l = **a;
  check(l.rank() >= 1 && l.rank() <= llmsvc::LoraAdapter::kMaxRank && std::isfinite(l.scale()));
  // One matmul through each pair: the prepared weights hold what their shapes say.
  std::vector<float> x(4096, 0.5f), y(4096);
  for (int il = 0; il < g_model->config().n_layer; ++il) {
    for (int m = 0; m < llmsvc::kLoraMatrices; ++m) {
      if (!l.has(il, static_cast<LoraMatrix>(m))) continue;
      const auto* A = l.weight(-1, il, static_cast<LoraMatrix>(m), LoraPart::a);
      const auto* B = l.weight(-1, il, static_cast<LoraMatrix>(m), LoraPart::b);
      check(A && B && A->ref().rows == l.rank() && B->ref().cols == l.rank());
      check(A->ref().cols <= 4096 && B->ref().rows <= 4096);
      g_device->matmul(*A, x.data(), 1, y.data());
      g_device->matmul(*B, y.data(), 1, x.data());
      g_sink = x[0];
      std::fill(x.begin(), x.end(), 0.5f);
    }
  }
  return 0;
}
