// SPDX-License-Identifier: Apache-2.0
// `llmsvc elastify`: writes an elastic copy of a GGUF model (tools/elastify/elastify.h).
// Offline and on the CPU; it loads the model itself rather than through the C API.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/elastify/attach_recovery.h"
#include "tools/elastify/elastify.h"

namespace llmsvc::cli {
namespace {

struct ElastifyArgs {
  elastify::Options options;
  std::string model;
  bool json = false;
  bool quiet = false;
  std::vector<std::string> recovery;  // adapters to store in an elastic model (attach mode)
};

// --recovery: the model is elastic already; its levels' recovery adapters go into the output.
int run_attach(const ElastifyArgs& args, const std::string& input) {
  elastify::AttachOptions o;
  o.input = input;
  o.output = args.options.output;
  o.adapters = args.recovery;
  auto rep = elastify::attach_recovery(o);
  if (!rep.ok()) return report(rep.status());
  if (args.json) {
    nlohmann::json j;
    j["output"] = o.output;
    j["recovery_levels"] = rep->levels;
    j["adapter_bytes"] = rep->adapter_bytes;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("wrote %s: recovery adapters for levels", o.output.c_str());
    for (int l : rep->levels) std::printf(" %d", l);
    std::printf(" (%.1f MB added)\n", static_cast<double>(rep->adapter_bytes) / 1e6);
  }
  return 0;
}

int run_elastify(ElastifyArgs& args) {
  ModelArgs m;
  m.model = args.model;
  auto path = model_path(m);
  if (!path.ok()) return report(path.status());
  if (!args.recovery.empty()) return run_attach(args, *path);
  args.options.input = *path;
  auto rep = elastify::run(args.options, [&](const std::string& line) {
    if (!args.quiet) std::fprintf(stderr, "%s\n", line.c_str());
  });
  if (!rep.ok()) return report(rep.status());
  const elastify::Report& r = *rep;
  if (args.json) {
    nlohmann::json j;
    j["output"] = args.options.output;
    j["score"] = args.options.score;
    j["n_layer"] = r.n_layer;
    j["n_ff"] = r.n_ff;
    j["ffn_unit"] = r.ffn_unit;
    j["anchors"] = r.anchors;
    j["heads_cut"] = r.heads_cut;
    if (!r.heads_cut) j["heads_note"] = r.heads_note;
    j["layer_importance"] = r.layer_importance;
    j["levels"] = args.options.levels;
    j["base_loss"] = r.base_loss;
    j["check"] = {{"max_abs_logit_diff", r.max_abs_logit_diff},
                  {"argmax_agree", r.argmax_agree},
                  {"positions", r.argmax_positions},
                  {"loss_in", r.loss_in},
                  {"loss_out", r.loss_out}};
    j["seconds"] = r.seconds;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("wrote %s: %d layers, FFN units of %d of %d neurons, %s order\n", args.options.output.c_str(), r.n_layer,
                r.ffn_unit, r.n_ff, args.options.score.c_str());
    if (r.heads_cut) {
      std::printf("query heads ordered within their KV groups, cut by the levels\n");
    } else {
      std::printf("query heads kept whole: %s\n", r.heads_note.c_str());
    }
    std::printf("anchor layers:");
    for (int a : r.anchors) std::printf(" %d", a);
    std::printf("\ncheck (full model against the input): max |logit diff| %.3g, argmax %d of %d, loss %.6f vs %.6f\n",
                r.max_abs_logit_diff, r.argmax_agree, r.argmax_positions, r.loss_out, r.loss_in);
    std::printf("%.1f s\n", r.seconds);
  }
  return 0;
}

}  // namespace

void add_elastify_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ElastifyArgs>();
  elastify::Options& o = args->options;
  CLI::App* cmd = app.add_subcommand("elastify", "write an elastic copy of a model (levels of FFN neurons and query heads ordered by importance)");
  cmd->add_option("model", args->model, "GGUF model file (default: the default model)");
  cmd->add_option("-o,--output", o.output, "the elastic GGUF to write")->required();
  cmd->add_option("--calib", o.calib_path, "calibration text file (default: a built-in public-domain text)");
  cmd->add_option("--calib-tokens", o.calib_tokens, "tokens of it that score the neurons")->capture_default_str();
  cmd->add_option("--layer-tokens", o.layer_tokens, "tokens of it that score the layers")->capture_default_str();
  cmd->add_option("--window", o.window, "tokens per calibration sequence")->capture_default_str();
  cmd->add_option("--score", o.score, "neuron order: activation (gradient-free), taylor (with --scores), random")
      ->capture_default_str();
  cmd->add_option("--scores", o.scores_path, "per-neuron Taylor scores (JSON from tools/elastify/torch/taylor_scores.py)");
  cmd->add_option("--seed", o.seed, "seed of the random order")->capture_default_str();
  cmd->add_option("--anchors", o.anchor_share, "share of layers locked at full size")->capture_default_str();
  cmd->add_option("--levels", o.levels, "levels in per cent, ending at 100")->delimiter(',');
  cmd->add_option("-t,--threads", o.threads, "CPU threads (default: every core)");
  cmd->add_flag("--heads", o.heads, "levels cut query heads too (whole ranks: one head of every KV group)");
  cmd->add_option("--recovery", args->recovery,
                 "store these recovery adapters (LoRA, one per level: tools/elastify/torch/train_recovery.py) in "
                 "the elastic MODEL instead of elastifying it; each level then runs with its own (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::ExistingFile);
  cmd->add_flag("--json", args->json, "print the report as JSON");
  cmd->add_flag("-q,--quiet", args->quiet, "no progress lines");
  cmd->callback([args, &exit_code] { exit_code = run_elastify(*args); });
}

}  // namespace llmsvc::cli
