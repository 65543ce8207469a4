// SPDX-License-Identifier: Apache-2.0
// Helpers for the engine tests on the committed models: an engine on a state directory, and a
// state directory private to the test process.
#pragma once

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "runtime/core/engine/engine.h"
#include "tests/model/bad_input_util.h"

namespace llmsvc::test {

// An engine on committed test model `model` (2 threads, n_ctx 4096) keeping its state in
// `state`; throws when it cannot be made (a broken setup).
inline std::unique_ptr<Engine> engine_for(const char* model, const std::string& state) {
  EngineOptions eo;
  eo.model_path = test_model(model);
  eo.n_threads = 2;
  eo.n_ctx = 4096;
  eo.state_dir = state;
  auto e = Engine::create(eo);
  if (!e.ok()) throw std::runtime_error("cannot create the engine: " + e.status().message());
  return std::move(e).value();
}

// `name` under the test process's private state directory (test_main sets LLMSVC_STATE_DIR).
inline std::string state_dir(const char* name) {
  const char* base = std::getenv("LLMSVC_STATE_DIR");
  return std::string(base ? base : "/tmp") + "/" + name;
}

}  // namespace llmsvc::test
