// SPDX-License-Identifier: Apache-2.0
// The swap-recompute planner against brute force over every split, and the switch-cost
// profile's JSON (round trip, defaults when absent, named errors when invalid).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>

#include "policy/planning/switch_planner.h"

namespace llmsvc::policy {
namespace {

// The plan's time, the cheaper of overlapped per layer and whole files then recompute,
// computed independently of the planner.
double plan_time(const std::vector<MissingChunk>& missing, const std::vector<int>& recompute, int n_layer, int ctx,
                 const SwitchCost& cost) {
  int tokens = 0, loads = 0;
  double bytes = 0;
  for (const MissingChunk& m : missing) {
    if (std::find(recompute.begin(), recompute.end(), m.index) != recompute.end()) {
      tokens += m.tokens;
    } else {
      ++loads;
      bytes += static_cast<double>(m.file_bytes);
    }
  }
  const double over = n_layer * std::max(cost.recompute_s(tokens, ctx), cost.load_s(loads, bytes / n_layer));
  const double seq = cost.load_s(loads, bytes) + n_layer * cost.recompute_s(tokens, ctx);
  return tokens > 0 && loads > 0 ? std::min(over, seq) : seq;
}

TEST(SwitchPlanner, MatchesBruteForceOverEverySplit) {
  std::mt19937 rng(7);
  const uint64_t sizes[] = {368640, 190000, 100000, 55000};  // f16, q8, q4, q2 chunk payloads
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 10);
    std::vector<MissingChunk> missing;
    for (int i = 0; i < n; ++i) {
      MissingChunk m;
      m.index = 3 * i + static_cast<int>(rng() % 3);
      m.tokens = 16;
      m.has_file = rng() % 4 != 0;
      m.file_bytes = m.has_file ? sizes[rng() % 4] : 0;
      missing.push_back(m);
    }
    SwitchCost cost;
    cost.io_byte_s = 1.0 / (50e6 + 1e6 * (rng() % 2000));
    cost.rc_token_s = 1e-6 * (1 + rng() % 200);
    const int ctx = 16 * (n + static_cast<int>(rng() % 40));
    const SwitchPlan plan = plan_switch_in(missing, 30, ctx, cost);

    // Every subset of the swapped chunks, recomputed along with the dropped ones.
    std::vector<int> swapped, dropped;
    for (const MissingChunk& m : missing) (m.has_file ? swapped : dropped).push_back(m.index);
    double best = 1e300;
    for (uint32_t mask = 0; mask < (1u << swapped.size()); ++mask) {
      std::vector<int> rc = dropped;
      for (size_t i = 0; i < swapped.size(); ++i)
        if (mask >> i & 1) rc.push_back(swapped[i]);
      best = std::min(best, plan_time(missing, rc, 30, ctx, cost));
    }
    EXPECT_NEAR(plan.estimate_s, best, 1e-12 + best * 1e-12) << "trial " << trial;
    EXPECT_NEAR(plan_time(missing, plan.recompute, 30, ctx, cost), plan.estimate_s, 1e-12 + best * 1e-12);
    EXPECT_LE(plan.estimate_s, plan.load_only_s + 1e-15);
    // Every missing chunk once, dropped ones recomputed.
    EXPECT_EQ(plan.load.size() + plan.recompute.size(), missing.size());
    for (int d : dropped) EXPECT_TRUE(std::binary_search(plan.recompute.begin(), plan.recompute.end(), d));
    EXPECT_TRUE(std::is_sorted(plan.load.begin(), plan.load.end()));
  }
}

TEST(SwitchPlanner, SlowStorageRecomputesFastStorageLoads) {
  std::vector<MissingChunk> missing;
  for (int i = 0; i < 8; ++i) missing.push_back({i, 16, true, 368640});
  SwitchCost slow, fast;
  slow.io_byte_s = 1.0 / 20e6;  // 20 MB/s
  fast.io_byte_s = 1.0 / 5e9;   // 5 GB/s
  EXPECT_FALSE(plan_switch_in(missing, 30, 128, slow).recompute.empty());
  EXPECT_TRUE(plan_switch_in(missing, 30, 128, fast).recompute.empty());
  // Compressed chunks are the last to be recomputed: the f16 one goes first.
  missing[3].file_bytes = 368640;
  for (int i : {0, 1, 2, 4, 5, 6, 7}) missing[i].file_bytes = 55000;
  const SwitchPlan p = plan_switch_in(missing, 30, 128, slow);
  ASSERT_FALSE(p.recompute.empty());
  EXPECT_TRUE(std::binary_search(p.recompute.begin(), p.recompute.end(), 3));
}

// A few tokens of a partial tail chunk are not worth a recompute pass when every other chunk
// loads anyway: whole files, nothing recomputed, no overlap (the profile measured on this
// machine: a pass costs 0.32 ms per layer however few its tokens).
TEST(SwitchPlanner, APartialTailLoadsWithTheRest) {
  std::vector<MissingChunk> missing;
  for (int i = 0; i < 39; ++i) missing.push_back({i, 16, true, 368640});
  missing.push_back({39, 5, true, 115200});
  SwitchCost measured;
  measured.rc_fixed_s = 3.2e-4;
  measured.rc_token_s = 1.87e-5;
  measured.rc_token_ctx_s = 2.2e-8;
  measured.io_fixed_s = 4.2e-5;
  measured.io_chunk_s = 2.1e-5;
  measured.io_byte_s = 1.0 / 13e9;
  const SwitchPlan p = plan_switch_in(missing, 30, 629, measured);
  EXPECT_TRUE(p.recompute.empty());
  EXPECT_FALSE(p.overlap);
  EXPECT_EQ(p.load.size(), 40u);
  EXPECT_LT(p.estimate_s, 5e-3);
}

TEST(SwitchCost, JsonRoundTripAndErrors) {
  SwitchCost c;
  c.rc_token_s = 1.25e-5;
  c.io_byte_s = 3e-10;
  c.source = "test device";
  auto back = switch_cost_from_json(switch_cost_to_json(c));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->rc_token_s, c.rc_token_s);
  EXPECT_EQ(back->io_byte_s, c.io_byte_s);
  EXPECT_EQ(back->source, "test device");

  auto bad = switch_cost_from_json(R"({"version":1,"rc_fixed_s":0,"rc_token_s":-1,"rc_token_ctx_s":0,
      "io_fixed_s":0,"io_chunk_s":0,"io_byte_s":0})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rc_token_s"), std::string::npos);
  auto missing = switch_cost_from_json(R"({"version":1})");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("rc_fixed_s"), std::string::npos);
  EXPECT_FALSE(switch_cost_from_json("not json").ok());
  EXPECT_FALSE(switch_cost_from_json(R"({"version":2})").ok());

  const std::string dir = std::getenv("LLMSVC_STATE_DIR");
  auto absent = load_switch_cost(dir + "/no-such-profile.json");
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(absent->source, "defaults");
  std::ofstream(dir + "/broken.json") << "{";
  EXPECT_FALSE(load_switch_cost(dir + "/broken.json").ok());
}

}  // namespace
}  // namespace llmsvc::policy
