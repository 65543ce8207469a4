// SPDX-License-Identifier: Apache-2.0
// make_random_lora [--model PATH] [--rank R] [--alpha A] [--seed S] [--b-scale X] [--f16] OUT: writes a
// random LoRA adapter for a model (the default model without --model), for the conformance
// suite's adapter tests (tests/common/random_lora.h).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "runtime/core/model/default_model.h"
#include "tests/common/random_lora.h"

int main(int argc, char** argv) {
  std::string model, out;
  int rank = 8;
  float alpha = 16.0f, b_scale = 0.0f;
  uint32_t seed = 1;
  bool f16 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--model" && has_value) model = argv[++i];
    else if (a == "--rank" && has_value) rank = std::atoi(argv[++i]);
    else if (a == "--alpha" && has_value) alpha = std::strtof(argv[++i], nullptr);
    else if (a == "--seed" && has_value) seed = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    else if (a == "--b-scale" && has_value) b_scale = std::strtof(argv[++i], nullptr);
    else if (a == "--f16") f16 = true;
    else if (out.empty() && !a.starts_with("--")) out = a;
    else {
      std::fprintf(stderr, "usage: make_random_lora [--model PATH] [--rank R] [--alpha A] [--seed S] [--b-scale X] [--f16] OUT\n");
      return 2;
    }
  }
  if (out.empty() || rank < 1) {
    std::fprintf(stderr, "make_random_lora: an output path and a rank >= 1 are needed\n");
    return 2;
  }
  auto path = llmsvc::resolve_model_path(model);
  if (!path.ok()) {
    std::fprintf(stderr, "make_random_lora: %s\n", path.status().message().c_str());
    return 1;
  }
  try {
    llmsvc::test::write_random_lora(*path, out, rank, alpha, seed, b_scale, f16);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_random_lora: %s\n", e.what());
    return 1;
  }
  return 0;
}
