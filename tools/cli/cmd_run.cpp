// SPDX-License-Identifier: Apache-2.0
// `llmsvc run`: one prompt, the reply streamed to stdout (or one JSON report with --json), on
// a one-shot context of the service --target names.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/api/validate.h"
#include "tools/cli/api_client.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace llmsvc::cli {
namespace {

struct RunArgs {
  ModelArgs model;
  SamplingArgs sampling;
  bool raw = false;
  bool json = false;
  bool logprobs = false;
  std::string system;
  std::string prompt;
};

// What the streamed pieces brought.
struct Reply {
  std::string text;
  std::vector<int32_t> tokens;  // every generated token, from the pieces' ids
  std::vector<float> logprobs;  // --logprobs: one per token
  bool json = false;
};

// llmsvc_piece_fn: each piece with the ids of its tokens (the text may be empty: the last
// piece holds the tokens whose text never streamed, such as the end of turn).
int on_piece(const llmsvc_piece* piece, void* user) {
  auto* r = static_cast<Reply*>(user);
  r->text.append(piece->text, piece->len);
  r->tokens.insert(r->tokens.end(), piece->tokens, piece->tokens + piece->n_tokens);
  if (piece->logprobs) r->logprobs.insert(r->logprobs.end(), piece->logprobs, piece->logprobs + piece->n_tokens);
  if (!r->json && piece->len > 0) {
    std::fwrite(piece->text, 1, piece->len, stdout);
    std::fflush(stdout);  // stream as generated, even into a pipe
  }
  return 0;
}

// The ids the prompt adds to the one-shot context (its first turn), as the call counts them.
Result<std::vector<int32_t>> prompt_ids(llmsvc_service* svc, const RunArgs& args) {
  llmsvc_count_options o;
  llmsvc_count_options_init(&o);
  o.chat = args.raw ? 0 : 1;
  o.first_turn = 1;
  o.system_prompt = args.system.empty() ? nullptr : args.system.c_str();
  int32_t n = 0;
  if (llmsvc_status st = llmsvc_count_tokens(svc, args.prompt.data(), args.prompt.size(), &o, &n); st != LLMSVC_OK)
    return api_status(st);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  o.ids = ids.data();
  o.ids_capacity = ids.size();
  if (llmsvc_status st = llmsvc_count_tokens(svc, args.prompt.data(), args.prompt.size(), &o, &n); st != LLMSVC_OK)
    return api_status(st);
  ids.resize(std::min(ids.size(), static_cast<size_t>(n)));
  return ids;
}

nlohmann::json report_json(const RunArgs& args, const Reply& reply, const std::vector<int32_t>& prompt,
                           const llmsvc_call_result& r) {
  nlohmann::json j;
  j["prompt"] = args.prompt;
  j["text"] = reply.text;
  j["prompt_tokens"] = prompt;  // the prompt's ids, chat template included
  j["tokens"] = reply.tokens;   // every generated id, the end of turn included
  if (args.logprobs) j["logprobs"] = reply.logprobs;
  j["n_prompt_tokens"] = r.prompt_tokens;
  j["n_tokens"] = r.generated_tokens;
  j["context_tokens"] = r.context_tokens;
  j["switch_in_ms"] = r.switch_in_ms;
  j["prefill_ms"] = r.prefill_ms;
  j["ttft_ms"] = r.ttft_ms;
  j["decode_ms"] = r.decode_ms;
  j["tpot_ms"] = r.tpot_ms;
  if (!args.sampling.json_schema.empty() || !args.sampling.grammar.empty()) j["constrain_ms"] = r.constrain_ms;
  // Decode rate: tokens after the first over the time after the first (decode_ms).
  j["tokens_per_s"] =
      r.generated_tokens > 1 && r.decode_ms > 0 ? (r.generated_tokens - 1) * 1000.0 / r.decode_ms : 0.0;
  j["finish_reason"] = finish_name(r.finish_reason);
  j["level"] = r.level_percent;  // the elastic level the call ran at, in per cent
  j["slo_missed"] = r.slo_missed != 0;
  j["prompt_kept"] = r.prompt_kept;  // the share of the prompt's tokens kept (1: none dropped)
  j["seed"] = args.sampling.seed;
  return j;
}

int run(const RunArgs& args) {
  if (auto st = api::check_utf8(args.prompt.data(), args.prompt.size(), "prompt"); !st.ok()) return report(st);
  if (auto st = api::check_utf8(args.system.data(), args.system.size(), "system prompt"); !st.ok()) return report(st);
  llmsvc_call_options options;
  std::vector<const char*> stops;
  if (Status st = to_call_options(args.sampling, &options, stops); !st.ok()) return report(st);
  auto svc = bind_service(args.model);
  if (!svc.ok()) return report(svc.status());

  llmsvc_context_options copts;
  llmsvc_context_options_init(&copts);
  copts.raw = args.raw ? 1 : 0;
  copts.system_prompt = args.system.empty() ? nullptr : args.system.c_str();
  llmsvc_context* raw_ctx = nullptr;
  if (llmsvc_status st = llmsvc_context_new(svc->get(), &copts, &raw_ctx); st != LLMSVC_OK)
    return report(api_status(st));
  ContextPtr ctx(raw_ctx);
  const std::string id = llmsvc_context_id(ctx.get());
  std::vector<int32_t> prompt;
  if (args.json) {
    auto ids = prompt_ids(svc->get(), args);
    if (!ids.ok()) return report(ids.status());
    prompt = std::move(ids).value();
  }
  options.on_tokens = on_piece;
  options.logprobs = args.logprobs ? 1 : 0;

  install_interrupt_handler();
  Reply reply;
  reply.json = args.json;
  llmsvc_call_result result;
  llmsvc_call_result_init(&result);
  llmsvc_status st;
  {
    CancelOnInterrupt cancel(ctx.get());
    options.on_tokens_user = &reply;
    st = llmsvc_call(ctx.get(), args.prompt.data(), args.prompt.size(), &options, nullptr, nullptr, &result);
  }
  const Status call_status = api_status(st);  // before other calls clear the detail
  // A one-shot context: nothing to keep once the reply is out.
  ctx.reset();
  (void)llmsvc_context_delete(svc->get(), id.c_str());

  if (args.json && (st == LLMSVC_OK || st == LLMSVC_ERR_CANCELLED)) {
    std::printf("%s\n",
                report_json(args, reply, prompt, result)
                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                    .c_str());
  } else if (!args.json && (!reply.text.empty() && reply.text.back() != '\n')) {
    std::fputc('\n', stdout);
  }
  if (st == LLMSVC_ERR_CANCELLED && g_interrupted.load()) return kExitInterrupted;
  if (st != LLMSVC_OK) return report(call_status);
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "generate a reply to one prompt, streamed to stdout");
  add_target_option(*cmd, args->model);
  add_model_options(*cmd, args->model);
  add_sampling_options(*cmd, args->sampling);
  cmd->add_flag("--raw", args->raw, "feed the prompt as it is, without the chat template");
  cmd->add_option("--system", args->system, "system prompt (chat mode)");
  cmd->add_flag("--json", args->json, "print one JSON object: text, the prompt's and the reply's token ids, timings, finish reason, level, "
                  "the share of the prompt kept");
  cmd->add_flag("--logprobs", args->logprobs, "with --json: each generated token's log-probability (\"logprobs\")");
  cmd->add_option("prompt", args->prompt, "the prompt")->required();
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

}  // namespace llmsvc::cli
