// SPDX-License-Identifier: Apache-2.0
// A call's elastic level through the Engine (CallParams::level_percent), on an elastic model made
// by elastify from a committed random model: calls report the level they ran at; level 0 is the
// full model, as 100 is; a call at a smaller level gives the greedy tokens a Forward set to that
// level gives; concurrent calls at different levels (one Forward, the level set per micro-batch
// and token under the compute lock) give what they give one at a time; a level the file does not
// have is refused naming its levels, the context unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hal/devices/device_registry.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/engine/engine.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/elastic_spec.h"
#include "runtime/core/model/model.h"
#include "tests/elastic/elastic_util.h"
#include "tests/model/bad_input_util.h"

namespace llmsvc {
namespace {

using test::ScratchDir;

// About 300 tokens: two prompt micro-batches of 256, so concurrent calls interleave in prefill too.
std::string long_prompt() {
  static const char* kWords[] = {"river", "stone", "lamp", "seven", "quiet", "orbit", "maple", "copper", "north", "echo"};
  std::string s;
  for (int i = 0; i < 300; ++i) s += std::string(kWords[(i * 7 + i / 3) % 10]) + (i % 11 == 10 ? ". " : " ");
  return s;
}

class ElasticEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    auto rep = elastify::run(test::small_options(test::test_model(test::kLlama), model_path()));
    ASSERT_TRUE(rep.ok()) << rep.status().message();
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string model_path() { return dir_->file("elastic.gguf"); }

  std::unique_ptr<Engine> engine(const std::string& name) {
    EngineOptions eo;
    eo.model_path = model_path();
    eo.n_threads = 2;
    eo.n_ctx = 2048;
    eo.state_dir = dir_->file("state-" + name);
    auto e = Engine::create(eo);
    if (!e.ok()) throw std::runtime_error("cannot create the engine: " + e.status().message());
    return std::move(e).value();
  }

  // A new raw context on `e`.
  static std::string raw_context(Engine& e) {
    ContextOptions o;
    o.raw = true;
    auto id = e.create_context(o);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return id.ok() ? *id : std::string();
  }

  // One greedy call of `prompt` at `level` per cent on `id`.
  static CallStats call(Engine& e, const std::string& id, const std::string& prompt, int level, int n = 16) {
    CallParams p;
    p.max_tokens = n;
    p.level_percent = level;
    CallStats st;
    Status s = e.call(id, prompt, p, [](std::string_view, int32_t) { return true; }, &st);
    EXPECT_TRUE(s.ok()) << "level " << level << ": " << s.message();
    return st;
  }

  static ScratchDir* dir_;
};

ScratchDir* ElasticEngine::dir_ = nullptr;

// The greedy tokens a Forward at level index `level` gives after `prompt` (as the engine
// evaluates a call: the prompt at once, then one token a step; ending at the end of generation).
std::vector<int32_t> forward_greedy(const Model& m, hal::Device& dev, int level, const std::vector<int32_t>& prompt,
                                    int n) {
  std::vector<hal::Device*> devs{&dev};
  Forward f(m, dev, Forward::batch_for(devs));
  EXPECT_TRUE(f.set_level(level).ok());
  const ModelConfig& c = m.config();
  policy::KvChunkStore store({c.n_layer, c.n_head_kv, c.head_dim, 16}, 0);
  policy::KvSequence seq(store);
  std::vector<float> logits;
  EXPECT_TRUE(f.eval(seq, prompt, 0, false, logits).ok());
  std::vector<int32_t> out;
  int pos = static_cast<int>(prompt.size());
  while (static_cast<int>(out.size()) < n) {
    const int32_t t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(t);
    if (m.tokenizer().is_end_of_generation(t) || static_cast<int>(out.size()) == n) break;
    const int32_t step[] = {t};
    EXPECT_TRUE(f.eval(seq, step, pos++, false, logits).ok());
  }
  return out;
}

TEST_F(ElasticEngine, CallsRunAtTheirLevelAndReportIt) {
  auto e = engine("levels");
  const std::string prompt = "The lighthouse keeper wrote in his log every evening:";
  const std::string a = raw_context(*e), b = raw_context(*e), c = raw_context(*e);
  const CallStats small = call(*e, a, prompt, 20);
  const CallStats full = call(*e, b, prompt, 100);
  const CallStats chosen = call(*e, c, prompt, 0);
  EXPECT_EQ(small.level_percent, 20);
  EXPECT_EQ(full.level_percent, 100);
  EXPECT_EQ(chosen.level_percent, 100);  // the engine's choice: the full model
  ASSERT_FALSE(full.generated_ids.empty());
  EXPECT_EQ(full.generated_ids, chosen.generated_ids);

  // Each level's tokens are a Forward's at that level (the engine's prompt ids, greedy).
  auto dev = hal::open_device("cpu", hal::DeviceOptions{2});
  ASSERT_TRUE(dev.ok());
  auto m = Model::load(model_path(), **dev);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const ElasticSpec& spec = *(*m)->elastic();
  ASSERT_EQ(spec.level_index(20), 0);
  const int n = static_cast<int>(small.generated_ids.size());
  EXPECT_EQ(small.generated_ids, forward_greedy(**m, **dev, spec.level_index(20), small.prompt_ids, n));
  EXPECT_EQ(full.generated_ids, forward_greedy(**m, **dev, -1, full.prompt_ids, 16));
  // The smallest level is another model: on the random model its reply differs.
  EXPECT_NE(small.generated_ids, full.generated_ids);

  // Deterministic, and a context goes on at any level: the second turn on `a` at 100 is what a
  // context whose first turn also ran at 20 gives.
  const std::string d = raw_context(*e);
  EXPECT_EQ(call(*e, d, prompt, 20).generated_ids, small.generated_ids);
  const CallStats a2 = call(*e, a, " And then?", 100, 8);
  const CallStats d2 = call(*e, d, " And then?", 100, 8);
  EXPECT_EQ(a2.level_percent, 100);
  EXPECT_EQ(a2.generated_ids, d2.generated_ids);
}

// One Forward serves every call: two (three) threads calling at once at different levels, each
// with a prompt of two micro-batches and a reply of many tokens, get the tokens each gets alone.
TEST_F(ElasticEngine, ConcurrentCallsAtDifferentLevelsGetTheirOwnTokens) {
  auto e = engine("concurrent");
  const std::string prompt = long_prompt();
  const std::vector<int> levels{20, 100, 50};
  std::vector<std::vector<int32_t>> alone;
  for (int level : levels) {
    const CallStats st = call(*e, raw_context(*e), prompt, level, 24);
    EXPECT_GT(st.prompt_tokens, 256);
    alone.push_back(st.generated_ids);
  }
  EXPECT_NE(alone[0], alone[1]);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::string> ids;
    for (size_t i = 0; i < levels.size(); ++i) ids.push_back(raw_context(*e));
    std::vector<CallStats> together(levels.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < levels.size(); ++i)
      threads.emplace_back([&, i] { together[i] = call(*e, ids[i], prompt, levels[i], 24); });
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < levels.size(); ++i) {
      SCOPED_TRACE("round " + std::to_string(round) + ", level " + std::to_string(levels[i]));
      EXPECT_EQ(together[i].level_percent, levels[i]);
      EXPECT_EQ(together[i].generated_ids, alone[i]);
    }
  }
}

// A level the file does not have (or one outside 0..100) is invalid_argument naming the file's
// levels, before the context changes; the context then goes on.
TEST_F(ElasticEngine, ALevelNotInTheFileIsRefusedNamingTheLevels) {
  auto e = engine("refused");
  const std::string id = raw_context(*e);
  call(*e, id, "Once upon a time", 30, 4);
  auto before = e->context_info(id);
  ASSERT_TRUE(before.ok());
  for (int level : {25, 99, 1, 101, -1}) {
    SCOPED_TRACE(level);
    CallParams p;
    p.max_tokens = 4;
    p.level_percent = level;
    int pieces = 0;
    CallStats st;
    Status s = e->call(id, " and", p, [&](std::string_view, int32_t) { return ++pieces > 0; }, &st);
    EXPECT_EQ(s.code(), Code::invalid_argument);
    EXPECT_NE(s.message().find("level_percent " + std::to_string(level)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("20, 30, 40, 50, 60, 70, 80, 90, 100"), std::string::npos) << s.message();
    EXPECT_EQ(pieces, 0);
    auto after = e->context_info(id);
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(after->tokens, before->tokens);
  }
  // The rules where every CallParams is checked: 0..100.
  CallParams p;
  p.level_percent = 101;
  EXPECT_EQ(check_call_params(p).code(), Code::invalid_argument);
  p.level_percent = -1;
  EXPECT_EQ(check_call_params(p).code(), Code::invalid_argument);
  p.level_percent = 25;  // in range: whether the model has it is the engine's to say
  EXPECT_TRUE(check_call_params(p).ok());
  EXPECT_EQ(call(*e, id, " and", 40, 4).level_percent, 40);
}

// With no level asked, the SLO picks one: from the estimates (each level's share of the weight
// bytes, no profile in the state directory), a TPOT ratio of 1 keeps the full model, a tighter
// one runs a smaller level that the result reports, and one below every level runs the
// smallest with the SLO missed (profiles: LevelSelection in level_choice_test.cpp).
TEST_F(ElasticEngine, TheSloChoosesTheLevel) {
  auto e = engine("slo");
  const std::string prompt = "A short note:";
  auto at = [&](float ttft, float tpot) {
    CallParams p;
    p.max_tokens = 2;
    p.slo_ttft_ratio = ttft;
    p.slo_tpot_ratio = tpot;
    CallStats st;
    const std::string id = raw_context(*e);
    EXPECT_TRUE(e->call(id, prompt, p, [](std::string_view, int32_t) { return true; }, &st).ok());
    return st;
  };
  const CallStats none = at(0, 0), one = at(1, 1), tight = at(0, 0.9f), lost = at(0, 0.01f);
  EXPECT_EQ(none.level_percent, 100);
  EXPECT_EQ(none.slo_missed, 0);
  EXPECT_EQ(one.level_percent, 100);
  EXPECT_EQ(one.slo_missed, 0);
  EXPECT_LT(tight.level_percent, 100);
  EXPECT_GT(tight.level_percent, 20);
  EXPECT_EQ(tight.slo_missed, 0);
  EXPECT_EQ(lost.level_percent, 20);
  EXPECT_EQ(lost.slo_missed, 1);
  // An asked level wins over the SLO.
  CallParams p;
  p.max_tokens = 2;
  p.level_percent = 100;
  p.slo_tpot_ratio = 0.01f;
  CallStats st;
  ASSERT_TRUE(e->call(raw_context(*e), prompt, p, [](std::string_view, int32_t) { return true; }, &st).ok());
  EXPECT_EQ(st.level_percent, 100);
  EXPECT_EQ(st.slo_missed, 0);
}


// KV across levels: a chunk records the level that computed it, through a restart too; a call
// at the same level or a smaller one recomputes nothing; a call at a larger level recomputes
// exactly what smaller levels computed, and then answers as a context computed at that level.
TEST_F(ElasticEngine, ALargerLevelRecomputesWhatSmallerLevelsComputed) {
  std::vector<int32_t> history;
  std::string id;
  int evaluated = 0;  // the context's tokens with KV after a call: all but the last generated
  auto record = [&](const CallStats& st) {
    history.insert(history.end(), st.prompt_ids.begin(), st.prompt_ids.end());
    history.insert(history.end(), st.generated_ids.begin(), st.generated_ids.end());
    evaluated = static_cast<int>(history.size()) - 1;
  };
  {
    auto e = engine("kv-levels");
    id = raw_context(*e);
    CallStats st = call(*e, id, "The lighthouse keeper wrote in his log every evening:", 20, 8);
    EXPECT_EQ(st.tokens_recomputed, 0);
    record(st);
    st = call(*e, id, " The storm came from the north.", 20, 8);  // the same level
    EXPECT_EQ(st.tokens_recomputed, 0);
    record(st);
    const int at_20 = evaluated;
    st = call(*e, id, " Then the lamp went out.", 60, 8);  // larger: everything so far
    EXPECT_EQ(st.level_percent, 60);
    EXPECT_EQ(st.tokens_recomputed, at_20);
    record(st);
    st = call(*e, id, " He climbed the stairs.", 20, 8);  // smaller: nothing
    EXPECT_EQ(st.tokens_recomputed, 0);
    record(st);
  }
  // A fresh engine on the same state: the chunk table kept each chunk's level. The full level
  // recomputes the whole context (the files hold KV of levels 20 and 60), not just what no
  // file holds.
  auto e = engine("kv-levels");
  ASSERT_TRUE(e->open_context(id).ok());
  const std::string last = " At dawn the ship was safe.";
  const CallStats st = call(*e, id, last, 100, 8);
  EXPECT_EQ(st.tokens_recomputed, evaluated);
  EXPECT_EQ(st.chunks_loaded, 0);
  // What it answers is the full model's on the whole history.
  auto dev = hal::open_device("cpu", hal::DeviceOptions{2});
  ASSERT_TRUE(dev.ok());
  auto m = Model::load(model_path(), **dev);
  ASSERT_TRUE(m.ok());
  std::vector<int32_t> all = history;
  all.insert(all.end(), st.prompt_ids.begin(), st.prompt_ids.end());
  EXPECT_EQ(st.generated_ids, forward_greedy(**m, **dev, -1, all, 8));
}

// Memory pressure (Engine::trim_weights): the weight rows above the smallest level go back
// (the engine's weight figure falls by as much), a call at the smallest level runs on what is
// left, a call at a larger level takes back what it reads first; every call answers what it
// answered before the trim.
TEST_F(ElasticEngine, TrimmedWeightsComeBackForTheLevelsThatReadThem) {
  auto e = engine("trim");
  const int smallest = 20;
  auto answer = [&](int level) {
    const std::string id = raw_context(*e);
    return call(*e, id, "The lighthouse keeper wrote in his log every evening:", level, 8).generated_ids;
  };
  const auto at_small = answer(smallest), at_60 = answer(60), at_full = answer(100);
  const uint64_t held = e->stats().weight_bytes;

  const uint64_t given = e->trim_weights();
  ASSERT_GT(given, 0u) << "an elastic model on the CPU gives back its levels' unused rows";
  EXPECT_EQ(e->stats().weight_bytes, held - given);
  EXPECT_EQ(e->trim_weights(), 0u);  // nothing more above the smallest level
  EXPECT_EQ(answer(smallest), at_small);
  EXPECT_EQ(e->stats().weight_bytes, held - given);  // the smallest level reads nothing released

  EXPECT_EQ(answer(60), at_60);  // part of it back
  const uint64_t at_60_held = e->stats().weight_bytes;
  EXPECT_GT(at_60_held, held - given);
  EXPECT_LT(at_60_held, held);
  EXPECT_EQ(answer(100), at_full);  // all of it back
  EXPECT_EQ(e->stats().weight_bytes, held);

  // A trim while a call computes waits for that call's next turn and keeps its level's rows.
  const std::string id = raw_context(*e);
  std::thread t([&] { EXPECT_EQ(call(*e, id, long_prompt(), 60, 24).level_percent, 60); });
  uint64_t during = 0;
  for (int i = 0; i < 200 && during == 0; ++i) {
    during = e->trim_weights();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  t.join();
  EXPECT_EQ(answer(100), at_full);
  EXPECT_EQ(e->stats().weight_bytes, held);
}

}  // namespace
}  // namespace llmsvc
