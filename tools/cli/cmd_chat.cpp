// SPDX-License-Identifier: Apache-2.0
// `llmsvc chat`: a multi-turn conversation on one context (a persistent one with --context) of
// the service --target names. On a terminal it prompts with "> "; otherwise every input line
// is one turn. "/exit" or end of input quits.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "runtime/api/validate.h"
#include "runtime/core/persist/state_dir.h"
#include "tools/cli/api_client.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace llmsvc::cli {
namespace {

struct ChatArgs {
  ModelArgs model;
  SamplingArgs sampling;
  std::string system;
  std::string context;  // persistent context to resume (created when new)
};

// Streams a reply to stdout, remembering whether it ended a line.
int print_piece(const char* piece, size_t len, int32_t, void* user) {
  std::fwrite(piece, 1, len, stdout);
  std::fflush(stdout);
  if (len > 0) *static_cast<bool*>(user) = piece[len - 1] == '\n';
  return 0;
}

int converse(llmsvc_context* ctx, llmsvc_call_options options, bool interactive);

// The named context, resumed if it exists, else created; without a name, a fresh one.
Result<ContextPtr> open_or_create(llmsvc_service* svc, const ChatArgs& args) {
  llmsvc_context* ctx = nullptr;
  if (!args.context.empty()) {
    const llmsvc_status st = llmsvc_context_open(svc, args.context.c_str(), &ctx);
    if (st == LLMSVC_OK) {
      if (!args.system.empty())
        std::fprintf(stderr, "llmsvc: note: --system is ignored when resuming context '%s'\n", args.context.c_str());
      return ContextPtr(ctx);
    }
    if (st != LLMSVC_ERR_NOT_FOUND) return api_status(st);
  }
  llmsvc_context_options o;
  llmsvc_context_options_init(&o);
  o.id = args.context.empty() ? nullptr : args.context.c_str();
  o.system_prompt = args.system.empty() ? nullptr : args.system.c_str();
  if (llmsvc_status st = llmsvc_context_new(svc, &o, &ctx); st != LLMSVC_OK) return api_status(st);
  return ContextPtr(ctx);
}

int chat(const ChatArgs& args) {
  if (auto st = api::check_utf8(args.system.data(), args.system.size(), "system prompt"); !st.ok()) return report(st);
  llmsvc_call_options options;
  std::vector<const char*> stops;
  if (Status st = to_call_options(args.sampling, &options, stops); !st.ok()) return report(st);
  auto svc = bind_service(args.model);
  if (!svc.ok()) return report(svc.status());
  // A named context is resumed (or created) and kept; otherwise the conversation lives
  // only as long as this session.
  auto ctx = open_or_create(svc->get(), args);
  if (!ctx.ok()) return report(ctx.status());
  const std::string id = llmsvc_context_id(ctx->get());

  const bool interactive = isatty(STDIN_FILENO);
  install_interrupt_handler();
  const int exit_code = converse(ctx->get(), options, interactive);
  if (args.context.empty()) {  // the conversation ends with the session
    ctx->reset();
    (void)llmsvc_context_delete(svc->get(), id.c_str());
  }
  return exit_code;
}

// One turn per input line until /exit or the end of input; the exit code.
int converse(llmsvc_context* ctx, llmsvc_call_options options, bool interactive) {
  CancelOnInterrupt cancel(ctx);
  // Seeded sampling would repeat the same "random" choices every turn; advance the seed.
  const uint64_t seed = options.seed;
  uint64_t turn = 0;
  int exit_code = 0;
  std::string line;
  while (true) {
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    g_interrupted.store(false);
    if (!std::getline(std::cin, line)) {  // EOF, or Ctrl-C at the prompt
      if (interactive) std::fputc('\n', stdout);
      break;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "/exit") break;
    if (line.empty()) continue;
    if (auto st = api::check_utf8(line.data(), line.size(), "input"); !st.ok()) {
      exit_code = report(st);
      if (!interactive) break;
      continue;
    }
    options.seed = seed + turn++;
    bool wrote_newline = true;
    const llmsvc_status st =
        llmsvc_call(ctx, line.data(), line.size(), &options, print_piece, &wrote_newline, nullptr);
    const Status call_status = api_status(st);
    if (!wrote_newline) std::fputc('\n', stdout);
    std::fflush(stdout);
    if (st == LLMSVC_ERR_CANCELLED && g_interrupted.load()) {
      if (!interactive) return kExitInterrupted;
      continue;  // Ctrl-C stopped this reply; the conversation goes on
    }
    if (st != LLMSVC_OK) {
      exit_code = report(call_status);
      if (!interactive) break;
    }
  }
  return exit_code;
}

}  // namespace

void add_chat_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand("chat", "talk with the model, one line per turn (/exit quits)");
  add_target_option(*cmd, args->model);
  add_model_options(*cmd, args->model);
  add_sampling_options(*cmd, args->sampling);
  cmd->add_option("--system", args->system, "system prompt (of a new context)");
  cmd->add_option("--context", args->context, "persistent context id: resumed if it exists, else created; kept after")
      ->check([](const std::string& v) { return persist::valid_context_id(v) ? "" : "must be 1..64 of [A-Za-z0-9._-]"; });
  cmd->callback([args, &exit_code] { exit_code = chat(*args); });
}

}  // namespace llmsvc::cli
