// What the subcommands share: model and sampling options, engine loading, error output.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/core/engine/engine.h"

namespace llmsvc::cli {

// Exit codes: 0 ok, 1 a failure reported as "llmsvc: NAME: detail", 130 interrupted.
inline constexpr int kExitFailure = 1;
inline constexpr int kExitInterrupted = 130;

struct ModelArgs {
  std::string model;  // empty: the default model
  int threads = 0;
  int n_ctx = 0;
  std::string state_dir;  // empty: $LLMSVC_STATE_DIR, $XDG_STATE_HOME/llmsvc, ~/.local/state/llmsvc
};
void add_model_options(CLI::App& cmd, ModelArgs& args);

struct SamplingArgs {
  uint64_t seed = 0;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  int max_tokens = 256;
  std::vector<std::string> stop;
};
void add_sampling_options(CLI::App& cmd, SamplingArgs& args);

// Validated through the C API's own option reader, so both accept the same values.
Result<CallParams> to_call_params(const SamplingArgs& args);

// Resolves the model (default + fetch hint when missing) and loads it, with a progress
// indication on a terminal.
Result<std::unique_ptr<Engine>> load_engine(const ModelArgs& args);
// The model path the arguments name (resolved like load_engine does).
Result<std::string> model_path(const ModelArgs& args);

// Prints "llmsvc: LLMSVC_ERR_...: detail" to stderr; returns kExitFailure.
int report(const Status& status);

// Set by SIGINT; handed to calls as their cancel flag.
extern std::atomic<bool> g_interrupted;
// Ctrl-C sets g_interrupted and interrupts a blocking read instead of killing us.
void install_interrupt_handler();

const char* finish_name(FinishReason reason);

}  // namespace llmsvc::cli
