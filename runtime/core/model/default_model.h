// SPDX-License-Identifier: Apache-2.0
// Where the model comes from when the caller names none: the default model in the cache.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace llmsvc {

inline constexpr std::string_view kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

// $LLMSVC_MODEL_DIR/<file>, else $HOME/.cache/llmsvc/models/<file> (the cache that
// tools/scripts/fetch_model.sh fills).
std::string default_model_path();

// `model_path` when given (non-empty), else the default. model_not_found when the file is
// missing; for the default model the message says how to fetch it.
Result<std::string> resolve_model_path(std::string_view model_path);

}  // namespace llmsvc
