// SPDX-License-Identifier: Apache-2.0
// What a loaded model's file and tokenizer say about it, as llmsvc_model_info reports it.
#pragma once

#include "runtime/core/engine/info_types.h"

namespace llmsvc {

class Model;

// The model's own figures: architecture, name, parameters, trained length, vocabulary, weight
// types, chat template, special tokens. The engine adds what is its own (n_ctx, devices, ready).
ModelInfo describe_model(const Model& model);

}  // namespace llmsvc
