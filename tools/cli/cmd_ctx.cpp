// `llmsvc ctx list|show|delete`: the persistent contexts in the state directory.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace llmsvc::cli {
namespace {

struct CtxArgs {
  ModelArgs model;
  std::string id;
  bool json = false;
};

nlohmann::json to_json(const ContextInfo& i) {
  return {{"id", i.id},
          {"tokens", i.tokens},
          {"turns", i.turns},
          {"raw", i.raw},
          {"loaded", i.loaded},
          {"system_prompt", i.system_prompt},
          {"chunks", {{"total", i.chunks_total}, {"resident", i.chunks_resident}, {"swapped", i.chunks_swapped},
                      {"dropped", i.chunks_dropped},
                      {"resident_by_format", {{"f16", i.chunks_f16}, {"q8", i.chunks_q8}, {"q4", i.chunks_q4},
                                              {"q2", i.chunks_q2}}}}},
          {"kv_resident_bytes", i.kv_resident_bytes}};
}

int list(const CtxArgs& a) {
  auto engine = load_engine(a.model);
  if (!engine.ok()) return report(engine.status());
  auto ids = (*engine)->list_contexts();
  if (!ids.ok()) return report(ids.status());
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const std::string& id : *ids) {
      auto info = (*engine)->context_info(id);
      if (info.ok()) arr.push_back(to_json(*info));
    }
    std::printf("%s\n", arr.dump(2).c_str());
    return 0;
  }
  for (const std::string& id : *ids) {
    auto info = (*engine)->context_info(id);
    if (!info.ok()) {
      std::printf("%-40s (unreadable: %s)\n", id.c_str(), info.status().message().c_str());
      continue;
    }
    std::printf("%-40s %6d tokens %4d turns%s\n", id.c_str(), info->tokens, info->turns, info->raw ? " raw" : "");
  }
  return 0;
}

int show(const CtxArgs& a) {
  auto engine = load_engine(a.model);
  if (!engine.ok()) return report(engine.status());
  auto info = (*engine)->context_info(a.id);
  if (!info.ok()) return report(info.status());
  if (a.json) {
    std::printf("%s\n", to_json(*info).dump(2).c_str());
    return 0;
  }
  std::printf("id        %s\ntokens    %d\nturns     %d\nmode      %s\nchunks    %d (resident %d, swapped %d, dropped %d)\n",
              info->id.c_str(), info->tokens, info->turns, info->raw ? "raw" : "chat", info->chunks_total,
              info->chunks_resident, info->chunks_swapped, info->chunks_dropped);
  if (!info->system_prompt.empty()) std::printf("system    %s\n", info->system_prompt.c_str());
  return 0;
}

int remove(const CtxArgs& a) {
  auto engine = load_engine(a.model);
  if (!engine.ok()) return report(engine.status());
  if (Status st = (*engine)->delete_context(a.id); !st.ok()) return report(st);
  return 0;
}

}  // namespace

void add_ctx_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CtxArgs>();
  CLI::App* ctx = app.add_subcommand("ctx", "list, show and delete persistent contexts");
  ctx->require_subcommand(1);
  CLI::App* ls = ctx->add_subcommand("list", "the contexts in the state directory");
  add_model_options(*ls, args->model);
  ls->add_flag("--json", args->json, "JSON output");
  ls->callback([args, &exit_code] { exit_code = list(*args); });
  CLI::App* sh = ctx->add_subcommand("show", "one context: tokens, turns, KV chunks by state");
  add_model_options(*sh, args->model);
  sh->add_option("id", args->id, "context id")->required();
  sh->add_flag("--json", args->json, "JSON output");
  sh->callback([args, &exit_code] { exit_code = show(*args); });
  CLI::App* rm = ctx->add_subcommand("delete", "delete a context and its files");
  add_model_options(*rm, args->model);
  rm->add_option("id", args->id, "context id")->required();
  rm->callback([args, &exit_code] { exit_code = remove(*args); });
}

}  // namespace llmsvc::cli
