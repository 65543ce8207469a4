// SPDX-License-Identifier: Apache-2.0
// `llmsvc ctx list|show|delete`: the persistent contexts of the service --target names (the
// embedded engine's state directory, or the caller's own contexts in llmsvcd).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tools/cli/api_client.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace llmsvc::cli {
namespace {

struct CtxArgs {
  ModelArgs model;
  std::string id;
  bool json = false;
};

// Every field of llmsvc_context_info, so --json says the same through every target.
nlohmann::json to_json(const llmsvc_context_info& i) {
  return {{"id", i.id},
          {"tokens", i.tokens},
          {"turns", i.turns},
          {"raw", i.raw != 0},
          {"chunks", {{"total", i.chunks_total}, {"resident", i.chunks_resident}, {"swapped", i.chunks_swapped},
                      {"dropped", i.chunks_dropped},
                      {"resident_by_format", {{"f16", i.chunks_f16}, {"q8", i.chunks_q8}, {"q4", i.chunks_q4},
                                              {"q3", i.chunks_q3}, {"q2", i.chunks_q2}}}}},
          {"kv_resident_bytes", i.kv_resident_bytes}};
}

Result<llmsvc_context_info> info_of(llmsvc_service* svc, const std::string& id) {
  llmsvc_context_info info;
  llmsvc_context_info_init(&info);
  if (llmsvc_status st = llmsvc_context_info_get(svc, id.c_str(), &info); st != LLMSVC_OK) return api_status(st);
  return info;
}

int list(const CtxArgs& a) {
  auto svc = bind_service(a.model);
  if (!svc.ok()) return report(svc.status());
  std::vector<std::string> ids;
  const llmsvc_status st = llmsvc_context_list(
      svc->get(),
      [](const char* id, void* user) {
        static_cast<std::vector<std::string>*>(user)->emplace_back(id);
        return 0;
      },
      &ids);
  if (st != LLMSVC_OK) return report(api_status(st));
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const std::string& id : ids) {
      auto info = info_of(svc->get(), id);
      if (info.ok()) arr.push_back(to_json(*info));
    }
    std::printf("%s\n", arr.dump(2).c_str());
    return 0;
  }
  for (const std::string& id : ids) {
    auto info = info_of(svc->get(), id);
    if (!info.ok()) {
      std::printf("%-40s (unreadable: %s)\n", id.c_str(), info.status().message().c_str());
      continue;
    }
    std::printf("%-40s %6d tokens %4d turns%s\n", id.c_str(), info->tokens, info->turns, info->raw ? " raw" : "");
  }
  return 0;
}

int show(const CtxArgs& a) {
  auto svc = bind_service(a.model);
  if (!svc.ok()) return report(svc.status());
  auto info = info_of(svc->get(), a.id);
  if (!info.ok()) return report(info.status());
  if (a.json) {
    std::printf("%s\n", to_json(*info).dump(2).c_str());
    return 0;
  }
  std::printf("id        %s\ntokens    %d\nturns     %d\nmode      %s\nchunks    %d (resident %d, swapped %d, dropped %d)\n",
              info->id, info->tokens, info->turns, info->raw ? "raw" : "chat", info->chunks_total, info->chunks_resident,
              info->chunks_swapped, info->chunks_dropped);
  return 0;
}

int remove(const CtxArgs& a) {
  auto svc = bind_service(a.model);
  if (!svc.ok()) return report(svc.status());
  if (llmsvc_status st = llmsvc_context_delete(svc->get(), a.id.c_str()); st != LLMSVC_OK) return report(api_status(st));
  return 0;
}

}  // namespace

void add_ctx_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CtxArgs>();
  CLI::App* ctx = app.add_subcommand("ctx", "list, show and delete persistent contexts");
  ctx->require_subcommand(1);
  CLI::App* ls = ctx->add_subcommand("list", "the persistent contexts");
  add_target_option(*ls, args->model);
  add_model_options(*ls, args->model);
  ls->add_flag("--json", args->json, "JSON output");
  ls->callback([args, &exit_code] { exit_code = list(*args); });
  CLI::App* sh = ctx->add_subcommand("show", "one context: tokens, turns, KV chunks by state and format");
  add_target_option(*sh, args->model);
  add_model_options(*sh, args->model);
  sh->add_option("id", args->id, "context id")->required();
  sh->add_flag("--json", args->json, "JSON output");
  sh->callback([args, &exit_code] { exit_code = show(*args); });
  CLI::App* rm = ctx->add_subcommand("delete", "delete a context and its files");
  add_target_option(*rm, args->model);
  add_model_options(*rm, args->model);
  rm->add_option("id", args->id, "context id")->required();
  rm->callback([args, &exit_code] { exit_code = remove(*args); });
}

}  // namespace llmsvc::cli
