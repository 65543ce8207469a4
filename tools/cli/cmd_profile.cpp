// SPDX-License-Identifier: Apache-2.0
// `llmsvc profile`: measures the switch costs the swap-recompute planner uses (recompute and
// cold chunk-file loads on this device and storage) and writes them as a profile; for an
// elastic model also each level's TTFT and TPOT, which choose a call's level from its SLO.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "base/file_io.h"
#include "hal/devices/device_registry.h"
#include "runtime/core/graph/level_profiler.h"
#include "runtime/core/graph/switch_profiler.h"
#include "runtime/core/persist/state_dir.h"
#include "runtime/core/persist/state_root.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace llmsvc::cli {
namespace {

struct ProfileArgs {
  ModelArgs model;
  std::string out;  // empty: <state root>/switch-profile.json
  std::string levels_out;  // empty: <state root>/level-profile.json
  int reps = 3;
};

// An elastic model's levels: TTFT and TPOT of each on this device (policy/planning/level_cost.h).
int write_level_profile(const ProfileArgs& a, const Model& model, hal::Device& device, const std::string& root,
                        const fileio::SafeDir& dir) {
  std::fprintf(stderr, "profiling the elastic levels ...\n");
  auto costs = profile_levels(model, device, a.reps);
  if (!costs.ok()) return report(costs.status());
  std::printf("\n%-6s %14s %14s %22s %10s %16s\n", "level", "ttft fixed ms", "ttft ms/token", "ttft ms/token/context",
              "tpot ms", "tpot ms/context");
  for (const policy::LevelCost& l : costs->levels)
    std::printf("%5d%% %14.3f %14.4f %22.8f %10.3f %16.6f\n", l.percent, l.ttft_fixed_ms, l.ttft_token_ms,
                l.ttft_context_ms, l.tpot_ms, l.tpot_context_ms);
  const std::string text = policy::level_costs_to_json(*costs);
  const Status written = a.levels_out.empty() ? dir.write_atomic(persist::layout::kLevelProfile, text)
                                              : fileio::write_atomic(a.levels_out, text);
  if (!written.ok()) return report(written);
  std::printf("wrote %s\n", a.levels_out.empty() ? (root + "/" + std::string(persist::layout::kLevelProfile)).c_str()
                                                    : a.levels_out.c_str());
  return 0;
}

int run_profile(const ProfileArgs& a) {
  auto path = model_path(a.model);
  if (!path.ok()) return report(path.status());
  auto root = persist::resolve_state_root(a.model.state_dir);
  if (!root.ok()) return report(root.status());
  auto state = persist::open_state_root(*root);  // made 0700 if absent; refused if others can write it
  if (!state.ok()) return report(state.status());
  const int threads = a.model.threads > 0 ? a.model.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // The first device of the list: where the weights load and, with one device, everything runs.
  auto devices = hal::open_devices(a.model.device, hal::DeviceOptions{threads});
  if (!devices.ok()) return report(devices.status());
  auto& device = devices->front();
  auto model = Model::load(*path, *device);
  if (!model.ok()) return report(model.status());
  std::fprintf(stderr, "profiling recompute and chunk loads on %s under %s ...\n", device->name().c_str(), root->c_str());
  auto prof = profile_switch_cost(**model, *device, *state->dir, a.reps);
  if (!prof.ok()) return report(prof.status());
  std::printf("%-10s %10s %14s %12s %12s\n", "sample", "n", "ctx / bytes", "ms/layer", "fitted");
  for (const ProfileSample& s : prof->samples)
    std::printf("%-10s %10.0f %14.0f %12.4f %12.4f\n", s.what.c_str(), s.x1, s.x2, 1e3 * s.seconds, 1e3 * s.fitted);
  const policy::SwitchCost& c = prof->cost;
  std::printf("\nrecompute per layer: %.4f ms + n x (%.4f ms + ctx x %.3g ms)\n", 1e3 * c.rc_fixed_s, 1e3 * c.rc_token_s,
              1e3 * c.rc_token_ctx_s);
  std::printf("load per layer:      %.4f ms + chunks x %.4f ms + bytes / %.1f MB/s\n", 1e3 * c.io_fixed_s, 1e3 * c.io_chunk_s,
              c.io_byte_s > 0 ? 1e-6 / c.io_byte_s : 0.0);
  const std::string out = a.out.empty() ? *root + "/" + std::string(persist::layout::kSwitchProfile) : a.out;
  const std::string text = policy::switch_cost_to_json(c);
  const Status written = a.out.empty() ? state->dir->write_atomic(persist::layout::kSwitchProfile, text)
                                       : fileio::write_atomic(out, text);
  if (!written.ok()) return report(written);
  std::printf("wrote %s\n", out.c_str());
  if ((*model)->elastic()) return write_level_profile(a, **model, *device, *root, *state->dir);
  return 0;
}

}  // namespace

void add_profile_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand("profile", "Measure recompute and swap-load costs for the swap-recompute planner");
  add_model_options(*cmd, args->model);
  cmd->add_option("--out", args->out, "Profile file (default: <state dir>/switch-profile.json)");
  cmd->add_option("--levels-out", args->levels_out, "Level profile of an elastic model (default: <state dir>/level-profile.json)");
  cmd->add_option("--reps", args->reps, "Repetitions per measured point")->check(CLI::Range(1, 50));
  cmd->callback([args, &exit_code] { exit_code = run_profile(*args); });
}

}  // namespace llmsvc::cli
