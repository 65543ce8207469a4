// SPDX-License-Identifier: Apache-2.0
// Golden file discovery and loading.
#include "tests/golden/golden_file.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "hal/cpu/cpu_device.h"
#include "tests/common/test_paths.h"
#include "hal/host/hwy_targets.h"  // before any Highway header
#include "hwy/targets.h"

namespace llmsvc::test {

std::vector<std::string> golden_names() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(data_dir() + "/golden"))
    if (e.path().extension() == ".json") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

Golden load_golden(const std::string& name) {
  Golden g;
  g.name = name;
  std::ifstream in(data_dir() + "/golden/" + name + ".json");
  g.json = nlohmann::json::parse(in);
  const std::string file = g.json.at("model_file");
  if (file.rfind("default:", 0) == 0) {
    g.model_path = default_model_path();
  } else {
    g.model_path = std::string(LLMSVC_SOURCE_DIR) + "/" + file;
  }
  return g;
}

LoadedModel load_model(const Golden& g) {
  LoadedModel m;
  m.device = hal::cpu::make_cpu_device(2);
  auto r = Model::load(g.model_path, *m.device);
  if (r.ok()) m.model = std::move(r).value();
  return m;
}

bool exact_numerics() {
#if HWY_ARCH_X86
  return (hwy::SupportedTargets() & ((HWY_AVX2 << 1) - 1)) != 0;
#else
  return false;
#endif
}

double log_prob(const float* logits, int n_vocab, int token) {
  float mx = logits[0];
  for (int i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(logits[i] - mx);
  return (logits[token] - mx) - std::log(sum);
}

}  // namespace llmsvc::test
