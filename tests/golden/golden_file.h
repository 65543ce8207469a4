// SPDX-License-Identifier: Apache-2.0
// Golden files written by tools/golden/gen_golden.py from llama.cpp: loading them and the
// model each one names, for the comparison tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hal/device.h"
#include "runtime/core/model/model.h"

namespace llmsvc::test {

struct Golden {
  std::string name;        // file stem
  std::string model_path;  // resolved
  nlohmann::json json;
};

// Every tests/data/golden/*.json, sorted by name.
std::vector<std::string> golden_names();
Golden load_golden(const std::string& name);

// The model of a golden file on a 2-thread CPU device (kept alive with it).
struct LoadedModel {
  std::unique_ptr<hal::Device> device;
  std::unique_ptr<Model> model;
};
LoadedModel load_model(const Golden& g);

// log-softmax probability of `token` in a row of logits (as llama.cpp's perplexity: exp in float, sum in double).
double log_prob(const float* logits, int n_vocab, int token);

// Whether this CPU runs kernels that reproduce llama.cpp's bits (x86 with FMA: AVX2 and up;
// the goldens come from llama.cpp's AVX-512 build, whose orders llmsvc keeps on both).
bool exact_numerics();

}  // namespace llmsvc::test
