// SPDX-License-Identifier: Apache-2.0
// What the subcommands share: model and sampling options, error output, Ctrl-C.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "llmsvc/llmsvc.h"

namespace llmsvc::cli {

// Exit codes: 0 ok, 1 a failure reported as "llmsvc: NAME: detail", 130 interrupted.
inline constexpr int kExitFailure = 1;
inline constexpr int kExitInterrupted = 130;

struct ModelArgs {
  std::string target;  // run, chat, ctx: "embedded", "unix:PATH"; empty: $LLMSVC_TARGET, else embedded
  std::string model;  // empty: the default model
  int threads = 0;
  int n_ctx = 0;
  std::string state_dir;  // empty: $LLMSVC_STATE_DIR, $XDG_STATE_HOME/llmsvc, ~/.local/state/llmsvc
  std::string device;     // empty: the default device
  std::string adapters;   // --lora NAME=PATH, repeated: "NAME=PATH;..." (llmsvc_bind_options.adapters)
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
  std::string json_schema;  // structured output ("": none), from --json-schema or its file
  std::string grammar;      // GBNF ("": none)
  int level_percent = 0;    // --level: the elastic level in per cent (0: the service chooses)
  float slo_ttft_ratio = 0.0f, slo_tpot_ratio = 0.0f;  // --slo-ttft / --slo-tpot (0: none)
  float prompt_keep = 0.0f;  // --keep: the share of the prompt's tokens to keep (0: the service chooses)
  std::string adapter;      // --adapter: the LoRA adapter the call runs with ("": the context's)
};
void add_sampling_options(CLI::App& cmd, SamplingArgs& args);
// A whole file's bytes (CLI::ValidationError when it cannot be read).
std::string read_text_file(const std::string& path);

// The sampling arguments as llmsvc_call_options (o->stop points into `stops`), checked with
// the C API's own option reader: a bad value is reported before any model loads.
Status to_call_options(const SamplingArgs& args, llmsvc_call_options* o, std::vector<const char*>& stops);

// The model path the arguments name (the default model, with the fetch hint when missing).
Result<std::string> model_path(const ModelArgs& args);

// Prints "llmsvc: LLMSVC_ERR_...: detail" to stderr; returns kExitFailure.
int report(const Status& status);

// Set by SIGINT; handed to calls as their cancel flag.
extern std::atomic<bool> g_interrupted;
// Ctrl-C sets g_interrupted and interrupts a blocking read instead of killing us.
void install_interrupt_handler();

// "eos", "length", ... for an llmsvc_finish_reason.
const char* finish_name(int32_t reason);

}  // namespace llmsvc::cli
