// SPDX-License-Identifier: Apache-2.0
// EmbeddedTransport: the engine runs inside the calling process.
#pragma once

#include <memory>

#include "runtime/core/engine/engine.h"
#include "runtime/transport/transport.h"

namespace llmsvc::api {

// Loads the model named by `options` and serves contexts from it.
Result<std::unique_ptr<Transport>> make_embedded_transport(const EngineOptions& options);

}  // namespace llmsvc::api
