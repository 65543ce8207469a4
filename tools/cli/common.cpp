// SPDX-License-Identifier: Apache-2.0
// What the subcommands share: option sets, error output, Ctrl-C.
#include "tools/cli/common.h"

#include <signal.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "runtime/core/model/default_model.h"
#include "runtime/api/last_error.h"
#include "runtime/api/options.h"

namespace llmsvc::cli {

std::atomic<bool> g_interrupted{false};

void add_model_options(CLI::App& cmd, ModelArgs& args) {
  cmd.add_option("-m,--model", args.model, "GGUF model file (default: the default model in the cache)");
  cmd.add_option("-t,--threads", args.threads, "worker threads (0: all CPUs)")->check(CLI::NonNegativeNumber);
  cmd.add_option("--ctx", args.n_ctx, "tokens per context (0: the model's trained length)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--device", args.device, "the devices that run the model, comma-separated in order of preference (cpu, cpu:1, opencl, opencl:N or opencl:NAME; default: cpu)");
  cmd.add_option_function<std::vector<std::string>>(
         "--lora",
         [&args](const std::vector<std::string>& list) {
           for (const std::string& s : list) {
             if (s.find(';') != std::string::npos) throw CLI::ValidationError("--lora", "a ';' in '" + s + "'");
             args.adapters.append(args.adapters.empty() ? "" : ";").append(s);
           }
         },
         "offer a LoRA adapter (a GGUF in llama.cpp's format) under NAME (repeatable; embedded only: a daemon "
         "offers its configured ones); calls choose it with --adapter NAME")
      ->option_text("NAME=PATH");
  cmd.add_option("--state-dir", args.state_dir, "where persistent contexts live (default: $LLMSVC_STATE_DIR, "
                                                "$XDG_STATE_HOME/llmsvc or ~/.local/state/llmsvc)");
}

void add_sampling_options(CLI::App& cmd, SamplingArgs& args) {
  cmd.add_option("-s,--seed", args.seed, "sampling seed")->capture_default_str();
  cmd.add_option("--temperature", args.temperature, "temperature (0: greedy)")->capture_default_str();
  cmd.add_option("--top-k", args.top_k, "top-k (0: off)")->capture_default_str();
  cmd.add_option("--top-p", args.top_p, "top-p (1: off)")->capture_default_str();
  cmd.add_option("--min-p", args.min_p, "min-p (0: off)")->capture_default_str();
  cmd.add_option("--repeat-penalty", args.repeat_penalty, "repetition penalty (1: off)")->capture_default_str();
  cmd.add_option("--repeat-last-n", args.repeat_last_n, "tokens the penalty looks back")->capture_default_str();
  cmd.add_option("-n,--max-tokens", args.max_tokens, "tokens to generate at most")->capture_default_str();
  cmd.add_option("--stop", args.stop, "stop string (repeatable)");
  cmd.add_option("--json-schema", args.json_schema, "hold the reply to this JSON Schema (structured output)");
  cmd.add_option("--grammar", args.grammar, "hold the reply to this GBNF grammar (llama.cpp's format)");
  cmd.add_option("--level", args.level_percent,
                 "elastic level in per cent: one of an elastic model's levels (llmsvc elastify), 100 the full "
                 "model (0: the service chooses)")
      ->option_text("PERCENT")
      ->capture_default_str();
  cmd.add_option("--slo-ttft", args.slo_ttft_ratio,
                 "SLO: time to first token as a ratio of the full model's; with --level 0 the service runs the "
                 "largest level, with the least prompt compression, predicted to meet the SLO (0: none)")
      ->option_text("R");
  cmd.add_option("--keep", args.prompt_keep,
                 "prompt compression: keep this share of the prompt's tokens, in (0, 1], dropping its least "
                 "informative words (0: the service chooses, by --slo-ttft)")
      ->option_text("SHARE");
  cmd.add_option("--slo-tpot", args.slo_tpot_ratio, "SLO: time per output token as a ratio of the full model's (0: none)")
      ->option_text("R");
  cmd.add_option("--adapter", args.adapter, "run the call with this LoRA adapter the service offers (--lora)")
      ->option_text("NAME");
  // The same from files: schemas and grammars are usually longer than a command line likes.
  cmd.add_option_function<std::string>(
         "--json-schema-file", [&args](const std::string& path) { args.json_schema = read_text_file(path); },
         "--json-schema, read from FILE")
      ->check(CLI::ExistingFile);
  cmd.add_option_function<std::string>(
         "--grammar-file", [&args](const std::string& path) { args.grammar = read_text_file(path); },
         "--grammar, read from FILE")
      ->check(CLI::ExistingFile);
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CLI::ValidationError(path, "cannot be read");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Status to_call_options(const SamplingArgs& args, llmsvc_call_options* o, std::vector<const char*>& stops) {
  LLMSVC_RETURN_IF_ERROR(api::fill_call_options(args, o, stops));
  return api::read_call_options(o).status();
}

Result<std::string> model_path(const ModelArgs& args) { return resolve_model_path(args.model); }

int report(const Status& status) {
  std::fprintf(stderr, "llmsvc: %s: %s\n", api::status_name(api::to_c(status.code())), status.message().c_str());
  return kExitFailure;
}

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_interrupted.store(true); };  // lock-free atomic: signal-safe
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a read waiting for input returns, so chat can quit
  sigaction(SIGINT, &sa, nullptr);
}

const char* finish_name(int32_t reason) {
  switch (reason) {
    case LLMSVC_FINISH_NONE:
      return "none";
    case LLMSVC_FINISH_EOS:
      return "eos";
    case LLMSVC_FINISH_LENGTH:
      return "length";
    case LLMSVC_FINISH_STOP:
      return "stop";
    case LLMSVC_FINISH_CANCELLED:
      return "cancelled";
    case LLMSVC_FINISH_CONTEXT_FULL:
      return "context_full";
  }
  return "unknown";
}

}  // namespace llmsvc::cli
