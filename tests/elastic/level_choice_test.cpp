// SPDX-License-Identifier: Apache-2.0
// Choosing a call's elastic level: policy::choose_level over level costs, the level profile's
// JSON, and the engine's LevelSelector on an elastic model (asked levels, SLO choices,
// profiles of another model ignored).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "hal/devices/device_registry.h"
#include "policy/planning/level_cost.h"
#include "runtime/core/engine/level_selector.h"
#include "runtime/core/graph/level_profiler.h"
#include "tests/model/bad_input_util.h"
#include "tools/elastify/elastify.h"

namespace llmsvc {
namespace {

policy::LevelCosts three_levels() {
  policy::LevelCosts c;
  c.levels = {{20, 1.0, 0.2, 2.0}, {60, 1.0, 0.5, 5.0}, {100, 1.0, 1.0, 10.0}};
  return c;
}

TEST(LevelChoice, TheLargestLevelThatMeetsBothRatios) {
  const policy::LevelCosts c = three_levels();
  // Prompt of 100 tokens: TTFT 21 / 51 / 101 ms, TPOT 2 / 5 / 10 ms.
  EXPECT_EQ(policy::choose_level(c, 0, 0, {100, 0}, 0, 0).index, 2);     // no SLO: the full model
  EXPECT_EQ(policy::choose_level(c, 1.0, 1.0, {100, 0}, 0, 0).index, 2);
  EXPECT_EQ(policy::choose_level(c, 0.6, 0, {100, 0}, 0, 0).index, 1);   // 51 <= 60.6
  EXPECT_EQ(policy::choose_level(c, 0.5, 0, {100, 0}, 0, 0).index, 0);   // 51 > 50.5
  EXPECT_EQ(policy::choose_level(c, 0, 0.55, {100, 0}, 0, 0).index, 1);  // TPOT alone: 5 <= 0.95 * 5.5
  EXPECT_EQ(policy::choose_level(c, 0, 0.5, {100, 0}, 0, 0).index, 0);   // 5 is on the bound: no headroom
  EXPECT_EQ(policy::choose_level(c, 0.9, 0.3, {100, 0}, 0, 0).index, 0); // TPOT binds harder
  // An overhead counts inside the TTFT.
  EXPECT_EQ(policy::choose_level(c, 0.6, 0, {100, 0}, 0, 20.0).index, 0);
  // So does taking back released weights, per level: a level whose rows memory pressure gave
  // back costs its restore; a smaller one whose rows stayed does not.
  const double restore[] = {0.0, 15.0, 40.0};
  EXPECT_EQ(policy::choose_level(c, 1.0, 1.0, {100, 0}, 0, 0, restore).index, 1);  // 141 > 101; 66 <= 96
  EXPECT_EQ(policy::choose_level(c, 0.6, 0, {100, 0}, 0, 0, restore).index, 0);    // 66 > 57.6
  EXPECT_EQ(policy::choose_level(c, 1.5, 1.0, {100, 0}, 0, 0, restore).index, 2);  // 141 <= 151.5
  EXPECT_DOUBLE_EQ(policy::choose_level(c, 1.5, 1.0, {100, 0}, 0, 0, restore).ttft_ms, 141.0);
  const policy::LevelChoice none = policy::choose_level(c, 0.1, 0, {100, 0}, 0, 0);
  EXPECT_EQ(none.index, 0);
  EXPECT_FALSE(none.slo_met);
  EXPECT_TRUE(policy::choose_level(c, 0.6, 0, {100, 0}, 0, 0).slo_met);
}

// Prompt compression joins the choice: the largest level that meets the TPOT ratio, with the
// least compression (of kKeepSteps) that makes its TTFT fit; the fixed part of a prompt stays.
TEST(LevelChoice, CompressionMakesTheTtftFitAtTheLargestLevelTheTpotAllows) {
  const policy::LevelCosts c = three_levels();
  const policy::PromptShape prompt{100, 80};  // 20 tokens that always stay
  EXPECT_EQ(prompt.kept(1.0), 100);
  EXPECT_EQ(prompt.kept(0.5), 50);
  EXPECT_EQ(prompt.kept(0.1), 20);
  EXPECT_EQ((policy::PromptShape{100, 0}.kept(0.3)), 100);
  // TTFT 0.65 of 101 ms (62.4 with the margin) at the full level: 1 + 0.6 * 100 tokens fits,
  // 0.7's do not.
  policy::LevelChoice a = policy::choose_level(c, 0.65, 0, prompt, 0, 0);
  EXPECT_EQ(a.index, 2);
  EXPECT_DOUBLE_EQ(a.keep, 0.6);
  EXPECT_TRUE(a.slo_met);
  // TPOT 0.55 allows level 60 at most; TTFT 0.3 (28.8 ms with the margin) there needs
  // 1 + 0.5 * n <= 28.8: keep 0.5.
  a = policy::choose_level(c, 0.3, 0.55, prompt, 0, 0);
  EXPECT_EQ(a.index, 1);
  EXPECT_DOUBLE_EQ(a.keep, 0.5);
  // Nothing meets TTFT 0.05 (5.05 ms): the smallest level at the most compression, missed.
  a = policy::choose_level(c, 0.05, 0, prompt, 0, 0);
  EXPECT_EQ(a.index, 0);
  EXPECT_DOUBLE_EQ(a.keep, 0.3);
  EXPECT_FALSE(a.slo_met);
  // The TPOT alone misses: the smallest level, with no more compression than its TTFT needs.
  a = policy::choose_level(c, 0, 0.1, prompt, 0, 0);
  EXPECT_EQ(a.index, 0);
  EXPECT_DOUBLE_EQ(a.keep, 1.0);
  EXPECT_FALSE(a.slo_met);
  // A call's own share is the only one tried.
  a = policy::choose_level(c, 0.6, 0, prompt, 0.9f, 0);
  EXPECT_EQ(a.index, 1);
  EXPECT_DOUBLE_EQ(a.keep, static_cast<double>(0.9f));
  // The full model on the whole prompt is the reference: a ratio of 1 takes it, margin or not.
  a = policy::choose_level(c, 1.0, 1.0, prompt, 0, 0);
  EXPECT_EQ(a.index, 2);
  EXPECT_DOUBLE_EQ(a.keep, 1.0);
  EXPECT_TRUE(a.slo_met);
  // Nothing droppable: no compression, as before it existed.
  a = policy::choose_level(c, 0.6, 0, {100, 0}, 0, 0);
  EXPECT_EQ(a.index, 1);
  EXPECT_DOUBLE_EQ(a.keep, 1.0);
}

// A decode step grows with the context, and a level's share of the full model's with it: a
// TPOT ratio a level meets after a short context it misses after a long one.
// KV that smaller levels computed: a larger level recomputes it where the TTFT bound leaves
// room for the pass (at that level's cost), else reuses it; a level no larger recomputes nothing.
TEST(LevelChoice, ALargerLevelRecomputesSmallerLevelsKvWhereTheTtftAllows) {
  const policy::LevelCosts c = three_levels();
  policy::PromptShape p{100, 0, 200, {{20, 150}, {60, 50}}};
  EXPECT_EQ(p.below(20), 0);
  EXPECT_EQ(p.below(60), 150);
  EXPECT_EQ(p.below(100), 200);
  // No SLO: the full model, recomputing all 200 tokens.
  policy::LevelChoice a = policy::choose_level(c, 0, 0, p, 0, 0);
  EXPECT_EQ(a.index, 2);
  EXPECT_TRUE(a.recompute);
  EXPECT_DOUBLE_EQ(a.ttft_ms, 101.0 + 201.0);
  // TTFT 3.5x the full model's 101 ms: 302 fits.
  EXPECT_TRUE(policy::choose_level(c, 3.5, 0, p, 0, 0).recompute);
  // TTFT 2x: the full model with its 101 ms, reusing the KV.
  a = policy::choose_level(c, 2.0, 0, p, 0, 0);
  EXPECT_EQ(a.index, 2);
  EXPECT_FALSE(a.recompute);
  // TTFT 0.6 (57.6 ms with the margin) allows level 60 (51 ms), not its 150-token pass (76 ms more).
  a = policy::choose_level(c, 0.6, 0, p, 0, 0);
  EXPECT_EQ(a.index, 1);
  EXPECT_FALSE(a.recompute);
  // Level 20 has nothing below it: recompute stays true (it has nothing to do).
  a = policy::choose_level(c, 0.3, 0, p, 0, 0);
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(p.below(20), 0);
}

// A context term of the profile's JSON: kept through a round trip; absent (a profile written
// before it) it reads 0; a negative one is refused, the field named.
void expect_optional_in_json(const policy::LevelCosts& c, const std::string& name, double policy::LevelCost::*member) {
  auto back = policy::level_costs_from_json(policy::level_costs_to_json(c));
  ASSERT_TRUE(back.ok()) << back.status().message();
  for (size_t i = 0; i < c.levels.size(); ++i) EXPECT_DOUBLE_EQ(back->levels[i].*member, c.levels[i].*member) << name;
  const std::string head = R"({"version": 1, "levels": [{"percent": 100, "ttft_fixed_ms": 1, "ttft_token_ms": 1, "tpot_ms": 1)";
  auto old = policy::level_costs_from_json(head + "}]}");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->levels[0].*member, 0.0) << name;
  auto bad = policy::level_costs_from_json(head + R"(, ")" + name + R"(": -1}]})");
  ASSERT_FALSE(bad.ok()) << name;
  EXPECT_NE(bad.status().message().find("levels[0]." + name), std::string::npos) << bad.status().message();
}

TEST(LevelChoice, TheTpotBoundIsAfterTheCallsContext) {
  policy::LevelCosts c;
  c.levels = {{20, 1.0, 0.2, 2.0, 0.01}, {60, 1.0, 0.5, 5.0, 0.01}, {100, 1.0, 1.0, 10.0, 0.01}};
  // Level 60 at context 0 + 100 tokens: 6 of 11 ms (0.55); at 1,000 + 100: 16 of 21 (0.76).
  EXPECT_EQ(policy::choose_level(c, 0, 0.6, {100, 0, 0}, 0, 0).index, 1);
  EXPECT_EQ(policy::choose_level(c, 0, 0.6, {100, 0, 1000}, 0, 0).index, 0);
  EXPECT_NEAR(policy::choose_level(c, 0, 0.6, {100, 0, 1000}, 0, 0).tpot_ms, 13.0, 1e-9);
  expect_optional_in_json(c, "tpot_context_ms", &policy::LevelCost::tpot_context_ms);
}

TEST(LevelChoice, TheTtftBoundIsAfterTheCallsContext) {
  policy::LevelCosts c;
  // Prefill per prompt token: 0.2 / 0.5 / 1.0 ms alone, plus 0.001 ms per context token at
  // every level (attention over the context, which no FFN level cuts).
  c.levels = {{20, 0, 0.2, 0.5, 0, 0.001}, {60, 0, 0.5, 0.8, 0, 0.001}, {100, 0, 1.0, 1.0, 0, 0.001}};
  // 100 tokens after no context: level 60 is 0.5 of the full model's TTFT; after 1,000 tokens
  // it is 150 of 200 ms (0.75), and only level 20 (120 of 200: 0.6) fits a bound of 0.7.
  EXPECT_EQ(policy::choose_level(c, 0.7, 0, {100, 0, 0}, 0, 0).index, 1);
  const policy::LevelChoice after = policy::choose_level(c, 0.7, 0, {100, 0, 1000}, 0, 0);
  EXPECT_EQ(after.index, 0);
  EXPECT_NEAR(after.ttft_ms, 120.0, 1e-9);
  // Compression cuts both parts: with a TPOT bound of 0.9 (the full model out), level 60 keeps
  // 80 of the 100 tokens: 80 x 1.5 = 120 of 200 ms, within 0.7 less the margin.
  const policy::LevelChoice kept = policy::choose_level(c, 0.7, 0.9, {100, 100, 1000}, 0, 0);
  EXPECT_EQ(kept.index, 1);
  EXPECT_DOUBLE_EQ(kept.keep, 0.8);
  EXPECT_NEAR(kept.ttft_ms, 120.0, 1e-9);
  expect_optional_in_json(c, "ttft_context_ms", &policy::LevelCost::ttft_context_ms);
}

TEST(LevelChoice, MonotoneCostsNeverFallAsTheLevelGrows) {
  policy::LevelCosts c;
  c.levels = {{20, 1.0, 0.3, 5.5}, {40, 2.0, 0.2, 5.1}, {100, 1.5, 0.8, 6.5}};
  const policy::LevelCosts m = policy::monotone(c);
  EXPECT_DOUBLE_EQ(m.levels[1].tpot_ms, 5.5);  // a profile's noise put level 40 under level 20
  EXPECT_DOUBLE_EQ(m.levels[1].ttft_token_ms, 0.3);
  EXPECT_DOUBLE_EQ(m.levels[1].ttft_fixed_ms, 1.5);  // not above the full model's
  EXPECT_DOUBLE_EQ(m.levels[0].tpot_ms, 5.5);        // the smallest as measured
  // The full model is the reference: as measured.
  EXPECT_DOUBLE_EQ(m.levels[2].ttft_fixed_ms, 1.5);
  EXPECT_DOUBLE_EQ(m.levels[2].ttft_token_ms, 0.8);
  EXPECT_DOUBLE_EQ(m.levels[2].tpot_ms, 6.5);
}

TEST(LevelChoice, ProfileJsonRoundTripsAndBadOnesAreNamed) {
  policy::LevelCosts c = three_levels();
  c.source = "profile";
  c.model = "00ff";
  auto back = policy::level_costs_from_json(policy::level_costs_to_json(c));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->levels.size(), 3u);
  EXPECT_EQ(back->levels[1].percent, 60);
  EXPECT_DOUBLE_EQ(back->levels[1].tpot_ms, 5.0);
  EXPECT_EQ(back->model, "00ff");
  auto refused = [](const std::string& text, const std::string& says) {
    auto r = policy::level_costs_from_json(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), Code::invalid_argument);
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  };
  refused("[]", "not a JSON object");
  refused(R"({"version": 2, "levels": []})", "version");
  refused(R"({"version": 1, "levels": []})", "levels");
  refused(R"({"version": 1, "levels": [{"percent": 50, "ttft_fixed_ms": 1, "ttft_token_ms": 1, "tpot_ms": 1}]})",
          "the last level is not 100");
  refused(R"({"version": 1, "levels": [{"percent": 100, "ttft_fixed_ms": 1, "ttft_token_ms": 1, "tpot_ms": -1}]})",
          "levels[0].tpot_ms");
  refused(R"({"version": 1, "levels": [{"percent": 100, "ttft_fixed_ms": 1, "tpot_ms": 1}]})", "levels[0].ttft_token_ms");
  refused(R"({"version": 1, "levels": [{"percent": 100, "ttft_fixed_ms": 1, "ttft_token_ms": 1, "tpot_ms": 1},)"
          R"({"percent": 100, "ttft_fixed_ms": 1, "ttft_token_ms": 1, "tpot_ms": 1}]})",
          "levels[1].percent");
}

class LevelSelection : public ::testing::Test {
 protected:
  // elastify's options for the small test model, written to `name` in the scratch folder.
  elastify::Options small(const std::string& name) {
    elastify::Options o;
    o.input = test::test_model(test::kLlama);
    o.output = dir_.file(name);
    o.calib_tokens = 256;
    o.layer_tokens = 128;
    o.window = 64;
    o.threads = 2;
    o.anchor_share = 0;
    return o;
  }
  void SetUp() override {
    const elastify::Options o = small("elastic.gguf");
    ASSERT_TRUE(elastify::run(o).ok());
    auto d = hal::open_device("cpu", hal::DeviceOptions{2});
    ASSERT_TRUE(d.ok());
    dev_ = std::move(d).value();
    auto m = Model::load(o.output, *dev_);
    ASSERT_TRUE(m.ok());
    model_ = std::move(m).value();
  }
  test::ScratchDir dir_;
  std::unique_ptr<hal::Device> dev_;
  std::unique_ptr<Model> model_;
  std::vector<std::string> warnings_;
  LevelSelector::Warn warn() {
    return [this](const std::string& w) { warnings_.push_back(w); };
  }
};

TEST_F(LevelSelection, AskedLevelsAndTheirErrors) {
  LevelSelector sel(*model_, nullptr, "", warn());
  EXPECT_EQ(sel.costs().source, "weights");
  auto full = sel.choose(0, 0, 0, {10, 0}, 0);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->index, -1);
  EXPECT_EQ(full->percent, 100);
  auto l30 = sel.choose(30, 0, 0, {10, 0}, 0);
  ASSERT_TRUE(l30.ok());
  EXPECT_EQ(l30->index, 1);
  EXPECT_EQ(l30->percent, 30);
  auto bad = sel.choose(35, 0, 0, {10, 0}, 0);
  EXPECT_EQ(bad.status().code(), Code::invalid_argument);
  EXPECT_NE(bad.status().message().find("20, 30, 40"), std::string::npos) << bad.status().message();
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(LevelSelection, SloChoicesFollowTheCosts) {
  LevelSelector est(*model_, nullptr, "", warn());
  // Estimates: costs in proportion to weight bytes, so a ratio above 1 keeps the full model,
  // a tighter one never picks a larger level, and one below every level's share misses.
  int last = 100;
  for (float r : {1.0f, 0.95f, 0.9f, 0.8f, 0.7f, 0.6f}) {
    auto c = est.choose(0, 0, r, {10, 0}, 0);
    ASSERT_TRUE(c.ok());
    EXPECT_LE(c->percent, last) << r;
    last = c->percent;
  }
  auto missed = est.choose(0, 0, 0.01f, {10, 0}, 0);
  ASSERT_TRUE(missed.ok());
  EXPECT_TRUE(missed->slo_missed);
  EXPECT_EQ(missed->percent, 20);
  // A measured profile of this model is used; one of another model is ignored with a warning.
  policy::LevelCosts measured = estimate_level_costs(*model_);
  measured.source = "profile";
  for (auto& l : measured.levels) l.tpot_ms = l.percent <= 50 ? 1.0 : 10.0;  // a cliff at 50 %
  std::ofstream(dir_.file("mine.json")) << policy::level_costs_to_json(measured);
  LevelSelector prof(*model_, nullptr, dir_.file("mine.json"), warn());
  EXPECT_EQ(prof.costs().source, "profile");
  EXPECT_EQ(prof.choose(0, 0, 0.5f, {10, 0}, 0)->percent, 50);
  EXPECT_TRUE(warnings_.empty());
  measured.model = "0123456789abcdef";
  std::ofstream(dir_.file("theirs.json")) << policy::level_costs_to_json(measured);
  LevelSelector other(*model_, nullptr, dir_.file("theirs.json"), warn());
  EXPECT_EQ(other.costs().source, "weights");
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("another model"), std::string::npos) << warnings_[0];
}

// `llmsvc profile`'s level costs: one per level of the file, in its order, every figure finite
// and >= 0; they round-trip through JSON, and the selector takes them for this model.
TEST_F(LevelSelection, AMeasuredProfileIsOneThisModelsSelectorTakes) {
  auto costs = profile_levels(*model_, *dev_, 1);
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_EQ(costs->source, "profile");
  EXPECT_EQ(costs->model, level_profile_identity(*model_));
  ASSERT_EQ(costs->levels.size(), model_->elastic()->levels.size());
  for (size_t i = 0; i < costs->levels.size(); ++i) {
    const policy::LevelCost& l = costs->levels[i];
    EXPECT_EQ(l.percent, model_->elastic()->levels[i]);
    for (double v : {l.ttft_fixed_ms, l.ttft_token_ms, l.tpot_ms, l.tpot_context_ms, l.ttft_context_ms})
      EXPECT_TRUE(std::isfinite(v) && v >= 0) << v;
  }
  // No level cuts heads: every level attends over the context as the full model does, and
  // shares its growth with the context (one estimate over all of them).
  ASSERT_FALSE(model_->elastic()->cuts_heads());
  for (const policy::LevelCost& l : costs->levels) {
    EXPECT_EQ(l.ttft_context_ms, costs->levels.back().ttft_context_ms) << l.percent;
    EXPECT_EQ(l.tpot_context_ms, costs->levels.back().tpot_context_ms) << l.percent;
  }
  std::ofstream(dir_.file("measured.json")) << policy::level_costs_to_json(*costs);
  LevelSelector sel(*model_, nullptr, dir_.file("measured.json"), warn());
  EXPECT_EQ(sel.costs().source, "profile");
  EXPECT_TRUE(warnings_.empty());
}

// A model whose levels cut query heads: only the levels that keep every head share the full
// model's context slopes; the others keep their own (fewer heads attend less).
TEST_F(LevelSelection, OnlyLevelsWithEveryHeadShareTheContextSlopes) {
  elastify::Options o = small("heads.gguf");
  o.heads = true;
  ASSERT_TRUE(elastify::run(o).ok());
  auto m = Model::load(o.output, *dev_);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const ElasticSpec& spec = *(*m)->elastic();
  ASSERT_TRUE(spec.cuts_heads());
  auto costs = profile_levels(**m, *dev_, 1);
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  int whole = 0, cut = 0;
  for (size_t lv = 0; lv < costs->levels.size(); ++lv) {
    const policy::LevelCost& l = costs->levels[lv];
    for (double v : {l.ttft_context_ms, l.tpot_context_ms}) EXPECT_TRUE(std::isfinite(v) && v >= 0) << v;
    bool every_head = true;
    for (int kept : spec.head_keep[lv]) every_head = every_head && kept == (*m)->config().n_head;
    if (!every_head) {
      ++cut;
      continue;
    }
    ++whole;
    EXPECT_EQ(l.ttft_context_ms, costs->levels.back().ttft_context_ms) << l.percent;
    EXPECT_EQ(l.tpot_context_ms, costs->levels.back().tpot_context_ms) << l.percent;
  }
  EXPECT_GT(whole, 0);
  EXPECT_GT(cut, 0);
}

}  // namespace
}  // namespace llmsvc
