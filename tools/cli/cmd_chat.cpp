// `llmsvc chat`: a multi-turn conversation on one context (a persistent one with --context).
// On a terminal it prompts with "> "; otherwise every input line is one turn. "/exit" or
// end of input quits.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "runtime/api/validate.h"
#include "runtime/core/persist/state_dir.h"
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

int chat(const ChatArgs& args) {
  if (auto st = api::check_utf8(args.system.data(), args.system.size(), "system prompt"); !st.ok()) return report(st);
  auto params = to_call_params(args.sampling);
  if (!params.ok()) return report(params.status());
  auto engine = load_engine(args.model);
  if (!engine.ok()) return report(engine.status());
  // A named context is resumed (or created) and kept; otherwise the conversation lives
  // only as long as this session.
  Result<std::string> id = args.context;
  if (args.context.empty() || (*engine)->open_context(args.context).code() == Code::not_found) {
    ContextOptions copts;
    copts.id = args.context;
    copts.system_prompt = args.system;
    id = (*engine)->create_context(copts);
  } else if (Status st = (*engine)->open_context(args.context); !st.ok()) {
    return report(st);
  } else if (!args.system.empty()) {
    std::fprintf(stderr, "llmsvc: note: --system is ignored when resuming context '%s'\n", args.context.c_str());
  }
  if (!id.ok()) return report(id.status());

  const bool interactive = isatty(STDIN_FILENO);
  install_interrupt_handler();
  params->cancel = &g_interrupted;
  // Seeded sampling would repeat the same "random" choices every turn; advance the seed.
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
    CallParams p = *params;
    p.sampling.seed = params->sampling.seed + turn++;
    bool wrote_newline = true;
    auto on_piece = [&](std::string_view piece, int32_t) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      if (!piece.empty()) wrote_newline = piece.back() == '\n';
      return true;
    };
    CallStats stats;
    Status st = (*engine)->call(*id, line, p, on_piece, &stats);
    if (!wrote_newline) std::fputc('\n', stdout);
    std::fflush(stdout);
    if (st.code() == Code::cancelled && g_interrupted.load()) {
      if (!interactive) return kExitInterrupted;
      continue;  // Ctrl-C stopped this reply; the conversation goes on
    }
    if (!st.ok()) {
      exit_code = report(st);
      if (!interactive) break;
    }
  }
  if (args.context.empty()) (void)(*engine)->delete_context(*id);  // the conversation ends with the session
  return exit_code;
}

}  // namespace

void add_chat_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand("chat", "talk with the model, one line per turn (/exit quits)");
  add_model_options(*cmd, args->model);
  add_sampling_options(*cmd, args->sampling);
  cmd->add_option("--system", args->system, "system prompt (of a new context)");
  cmd->add_option("--context", args->context, "persistent context id: resumed if it exists, else created; kept after")
      ->check([](const std::string& v) { return persist::valid_context_id(v) ? "" : "must be 1..64 of [A-Za-z0-9._-]"; });
  cmd->callback([args, &exit_code] { exit_code = chat(*args); });
}

}  // namespace llmsvc::cli
