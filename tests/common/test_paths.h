// SPDX-License-Identifier: Apache-2.0
// Paths tests use: committed test data and the default model fetched by tools/scripts/fetch_model.sh.
#pragma once

#include <cstdlib>
#include <string>

namespace llmsvc::test {

inline std::string data_dir() { return LLMSVC_TEST_DATA; }

// The default model (SmolLM2-135M-Instruct Q4_1): $LLMSVC_MODEL_DIR or ~/.cache/llmsvc/models.
inline std::string default_model_path() {
  const char* dir = std::getenv("LLMSVC_MODEL_DIR");
  std::string d = dir && *dir ? dir : std::string(std::getenv("HOME") ? std::getenv("HOME") : "/root") + "/.cache/llmsvc/models";
  return d + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Gemma-3-270M Q4_K_M, fetched beside it by tools/scripts/fetch_gemma.sh.
inline std::string gemma_model_path() {
  const std::string p = default_model_path();
  return p.substr(0, p.rfind('/') + 1) + "gemma-3-270m-q4_k_m.gguf";
}

}  // namespace llmsvc::test
