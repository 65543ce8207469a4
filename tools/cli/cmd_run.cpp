// `llmsvc run`: one prompt, the reply streamed to stdout (or one JSON report with --json).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/api/validate.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace llmsvc::cli {
namespace {

struct RunArgs {
  ModelArgs model;
  SamplingArgs sampling;
  bool raw = false;
  bool json = false;
  std::string system;
  std::string prompt;
};

nlohmann::json report_json(const RunArgs& args, const std::string& text, const CallStats& st) {
  nlohmann::json j;
  j["prompt"] = args.prompt;
  j["prompt_tokens"] = st.prompt_ids;
  j["tokens"] = st.generated_ids;
  j["text"] = text;
  j["n_prompt_tokens"] = st.prompt_tokens;
  j["n_tokens"] = st.generated_tokens;
  j["context_tokens"] = st.context_tokens;
  j["switch_in_ms"] = st.switch_in_ms;
  j["prefill_ms"] = st.prefill_ms;
  j["ttft_ms"] = st.ttft_ms;
  j["decode_ms"] = st.decode_ms;
  j["tpot_ms"] = st.tpot_ms;
  // Decode rate: tokens after the first over the time after the first (decode_ms).
  j["tokens_per_s"] =
      st.generated_tokens > 1 && st.decode_ms > 0 ? (st.generated_tokens - 1) * 1000.0 / st.decode_ms : 0.0;
  j["finish_reason"] = finish_name(st.finish);
  j["seed"] = args.sampling.seed;
  return j;
}

int run(const RunArgs& args) {
  if (auto st = api::check_utf8(args.prompt.data(), args.prompt.size(), "prompt"); !st.ok()) return report(st);
  if (auto st = api::check_utf8(args.system.data(), args.system.size(), "system prompt"); !st.ok()) return report(st);
  auto params = to_call_params(args.sampling);
  if (!params.ok()) return report(params.status());
  auto engine = load_engine(args.model);
  if (!engine.ok()) return report(engine.status());

  ContextOptions copts;
  copts.raw = args.raw;
  copts.system_prompt = args.system;
  auto id = (*engine)->create_context(copts);
  if (!id.ok()) return report(id.status());

  install_interrupt_handler();
  params->cancel = &g_interrupted;
  std::string text;
  auto on_piece = [&](std::string_view piece, int32_t) {
    text.append(piece);
    if (!args.json) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);  // stream as generated, even into a pipe
    }
    return true;
  };
  CallStats stats;
  Status st = (*engine)->call(*id, args.prompt, *params, on_piece, &stats);
  // A one-shot context: nothing to keep once the reply is out.
  (void)(*engine)->delete_context(*id);

  if (args.json && (st.ok() || st.code() == Code::cancelled)) {
    std::printf("%s\n",
                report_json(args, text, stats).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else if (!args.json && (!text.empty() && text.back() != '\n')) {
    std::fputc('\n', stdout);
  }
  if (st.code() == Code::cancelled && g_interrupted.load()) return kExitInterrupted;
  if (!st.ok()) return report(st);
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "generate a reply to one prompt, streamed to stdout");
  add_model_options(*cmd, args->model);
  add_sampling_options(*cmd, args->sampling);
  cmd->add_flag("--raw", args->raw, "feed the prompt as it is, without the chat template");
  cmd->add_option("--system", args->system, "system prompt (chat mode)");
  cmd->add_flag("--json", args->json, "print one JSON object: token ids, text, timings, finish reason");
  cmd->add_option("prompt", args->prompt, "the prompt")->required();
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

}  // namespace llmsvc::cli
