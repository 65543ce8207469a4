// SPDX-License-Identifier: Apache-2.0
// The C structs of the model information and token counting (llmsvc_model_info,
// llmsvc_count_options): struct_size checks, defaults, copying to and from the core's types.
#pragma once

#include <cstddef>

#include "base/status.h"
#include "llmsvc/llmsvc.h"
#include "runtime/core/engine/info_types.h"

namespace llmsvc::api {

// Bytes of the first published version of each struct (ABI 1.2); they never change.
inline constexpr size_t kModelInfoV1 = offsetof(llmsvc_model_info, devices) + sizeof(llmsvc_model_info::devices);
inline constexpr size_t kCountOptionsV1 =
    offsetof(llmsvc_count_options, ids_capacity) + sizeof(llmsvc_count_options::ids_capacity);

void init(llmsvc_model_info* i);
void init(llmsvc_count_options* o);

// The counting rules of `options` (NULL: defaults), and where its ids go (ids NULL: none).
struct CountRequest {
  CountParams params;
  int32_t* ids = nullptr;
  size_t ids_capacity = 0;
};
Result<CountRequest> read_count_options(const llmsvc_count_options* options);

// The caller's struct_size is checked already (at least kModelInfoV1); past it nothing is written.
void write_model_info(const ModelInfo& info, llmsvc_model_info* out);

}  // namespace llmsvc::api
