// SPDX-License-Identifier: Apache-2.0
// WeightType facts: which GGUF types we compute with and their block geometry.
#include "hal/weight_type.h"

#include "hal/weight_blocks.h"

namespace llmsvc::hal {

bool is_supported_weight_type(uint32_t ggml_type) {
  switch (static_cast<WeightType>(ggml_type)) {
    case WeightType::F32: case WeightType::F16: case WeightType::BF16:
    case WeightType::Q4_0: case WeightType::Q4_1: case WeightType::Q5_0: case WeightType::Q5_1:
    case WeightType::Q8_0: case WeightType::Q4_K: case WeightType::Q5_K: case WeightType::Q6_K:
      return true;
  }
  return false;
}

int64_t block_elems(WeightType t) {
  switch (t) {
    case WeightType::F32: case WeightType::F16: case WeightType::BF16: return 1;
    case WeightType::Q4_0: case WeightType::Q4_1: case WeightType::Q5_0: case WeightType::Q5_1:
    case WeightType::Q8_0: return kQK;
    case WeightType::Q4_K: case WeightType::Q5_K: case WeightType::Q6_K: return kQK_K;
  }
  return 0;
}

size_t block_bytes(WeightType t) {
  switch (t) {
    case WeightType::F32: return 4;
    case WeightType::F16: case WeightType::BF16: return 2;
    case WeightType::Q4_0: return sizeof(BlockQ4_0);
    case WeightType::Q4_1: return sizeof(BlockQ4_1);
    case WeightType::Q5_0: return sizeof(BlockQ5_0);
    case WeightType::Q5_1: return sizeof(BlockQ5_1);
    case WeightType::Q8_0: return sizeof(BlockQ8_0);
    case WeightType::Q4_K: return sizeof(BlockQ4_K);
    case WeightType::Q5_K: return sizeof(BlockQ5_K);
    case WeightType::Q6_K: return sizeof(BlockQ6_K);
  }
  return 0;
}

const char* weight_type_name(WeightType t) {
  switch (t) {
    case WeightType::F32: return "F32";
    case WeightType::F16: return "F16";
    case WeightType::BF16: return "BF16";
    case WeightType::Q4_0: return "Q4_0";
    case WeightType::Q4_1: return "Q4_1";
    case WeightType::Q5_0: return "Q5_0";
    case WeightType::Q5_1: return "Q5_1";
    case WeightType::Q8_0: return "Q8_0";
    case WeightType::Q4_K: return "Q4_K";
    case WeightType::Q5_K: return "Q5_K";
    case WeightType::Q6_K: return "Q6_K";
  }
  return "?";
}

}  // namespace llmsvc::hal
