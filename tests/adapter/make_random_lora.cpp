// SPDX-License-Identifier: Apache-2.0
// make_random_lora [--model PATH] [--rank R] [--alpha A] [--seed S] [--b-scale X] OUT: writes a
// random LoRA adapter for a model (the default model without --model), for the conformance
// suite's adapter tests (tests/common/random_lora.h).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/core/model/default_model.h"
#include "tests/common/random_lora.h"

int main(int argc, char** argv) {
  std::string model, out;
  llmsvc::test::RandomLora o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--model" && has_value) model = argv[++i];
    else if (a == "--rank" && has_value) o.rank = std::atoi(argv[++i]);
    else if (a == "--alpha" && has_value) o.alpha = std::strtof(argv[++i], nullptr);
    else if (a == "--seed" && has_value) o.seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--b-scale" && has_value) o.b_scale = std::strtof(argv[++i], nullptr);
    else if (out.empty() && !a.starts_with("--")) out = a;
    else {
      std::fprintf(stderr, "usage: make_random_lora [--model PATH] [--rank R] [--alpha A] [--seed S] [--b-scale X] OUT\n");
      return 2;
    }
  }
  if (out.empty() || o.rank < 1) {
    std::fprintf(stderr, "make_random_lora: an output path and a rank >= 1 are needed\n");
    return 2;
  }
  auto path = llmsvc::resolve_model_path(model);
  if (!path.ok()) {
    std::fprintf(stderr, "make_random_lora: %s\n", path.status().message().c_str());
    return 1;
  }
  if (llmsvc::Status s = llmsvc::test::write_random_lora(*path, out, o); !s.ok()) {
    std::fprintf(stderr, "make_random_lora: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}
