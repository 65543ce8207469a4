// SPDX-License-Identifier: Apache-2.0
// LoRA adapters through the Engine, on a committed random model with random adapters: the
// engine offers them by name; a context's adapter and a call's give the same replies, which
// differ from the plain model's; a context keeps its adapter across a restart and a fork;
// names the engine does not offer are refused before anything changes; a bad adapter file
// fails the engine's creation naming it; the C API's list syntax.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/core/engine/call_types.h"
#include "runtime/core/engine/engine.h"
#include "tests/common/random_lora.h"
#include "tests/model/bad_input_util.h"

namespace llmsvc {
namespace {

using test::ScratchDir;

class AdapterEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    test::write_random_lora(test::test_model(test::kLlama), path("a"), 8, 16.0f, 1, 0.1f);
    test::write_random_lora(test::test_model(test::kLlama), path("b"), 8, 16.0f, 2, 0.1f);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string path(const std::string& name) { return dir_->file(name + ".lora.gguf"); }

  static Result<std::unique_ptr<Engine>> make(const std::string& state, std::vector<std::string> names) {
    EngineOptions eo;
    eo.model_path = test::test_model(test::kLlama);
    eo.n_threads = 2;
    eo.n_ctx = 1024;
    eo.state_dir = dir_->file("state-" + state);
    for (const std::string& n : names) eo.adapters.emplace_back(n, path(n));
    return Engine::create(eo);
  }
  static std::unique_ptr<Engine> engine(const std::string& state, std::vector<std::string> names = {"a", "b"}) {
    auto e = make(state, std::move(names));
    if (!e.ok()) throw std::runtime_error("cannot create the engine: " + e.status().message());
    return std::move(e).value();
  }
  static std::string context(Engine& e, const std::string& adapter, const std::string& id = "") {
    ContextOptions o;
    o.raw = true;
    o.id = id;
    o.adapter = adapter;
    auto made = e.create_context(o);
    EXPECT_TRUE(made.ok()) << made.status().message();
    return made.ok() ? *made : std::string();
  }
  static Status call(Engine& e, const std::string& id, const std::string& prompt, const std::string& adapter,
                     std::vector<int32_t>* out) {
    CallParams p;
    p.max_tokens = 12;
    p.adapter = adapter;
    CallStats st;
    Status s = e.call(id, prompt, p, [](std::string_view, int32_t) { return true; }, &st);
    if (out) *out = st.generated_ids;
    return s;
  }
  static std::vector<int32_t> reply(Engine& e, const std::string& id, const std::string& prompt,
                                    const std::string& adapter = "") {
    std::vector<int32_t> out;
    Status s = call(e, id, prompt, adapter, &out);
    EXPECT_TRUE(s.ok()) << s.message();
    return out;
  }
  static ScratchDir* dir_;
};
ScratchDir* AdapterEngine::dir_ = nullptr;

TEST_F(AdapterEngine, OffersItsAdaptersByName) {
  auto e = engine("names");
  EXPECT_EQ(e->model_info().adapters, (std::vector<std::string>{"a", "b"}));
  auto plain = engine("names-none", {});
  EXPECT_TRUE(plain->model_info().adapters.empty());
}

TEST_F(AdapterEngine, ContextAndCallAdaptersGiveTheSameReply) {
  auto e = engine("same");
  const std::string with_a = context(*e, "a"), plain = context(*e, ""), by_call = context(*e, "");
  const std::string prompt = "the river runs north past the mill";
  const auto a = reply(*e, with_a, prompt);
  const auto p = reply(*e, plain, prompt);
  const auto c = reply(*e, by_call, prompt, "a");
  EXPECT_EQ(a, c);
  EXPECT_NE(a, p) << "the adapter changed nothing";
  // Another adapter, another reply; a call's adapter overrides its context's.
  const std::string other = context(*e, "");
  const auto b = reply(*e, other, prompt, "b");
  EXPECT_NE(b, a);
  const std::string with_a2 = context(*e, "a");
  EXPECT_EQ(reply(*e, with_a2, prompt, "b"), b);
}

TEST_F(AdapterEngine, ContextKeepsItsAdapterAcrossRestartAndFork) {
  const std::string prompt = "copper lamps and seven quiet stones", next = "echo of the maple orbit";
  std::string kept, replayed;
  {
    auto e = engine("restart");
    kept = context(*e, "a", "kept");
    replayed = context(*e, "", "replayed");
    EXPECT_EQ(reply(*e, kept, prompt), reply(*e, replayed, prompt, "a"));
  }
  auto e = engine("restart");
  ASSERT_TRUE(e->open_context(kept).ok());
  ASSERT_TRUE(e->open_context(replayed).ok());
  auto child = e->fork_context(kept, "child");
  ASSERT_TRUE(child.ok()) << child.status().message();
  const auto k = reply(*e, kept, next);
  EXPECT_EQ(k, reply(*e, replayed, next, "a"));
  EXPECT_EQ(k, reply(*e, *child, next));
}

TEST_F(AdapterEngine, NamesNotOfferedAreRefusedBeforeAnythingChanges) {
  auto e = engine("refused");
  ContextOptions o;
  o.raw = true;
  o.id = "nope";
  o.adapter = "zz";
  auto made = e->create_context(o);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), Code::invalid_argument);
  EXPECT_NE(made.status().message().find("a, b"), std::string::npos) << made.status().message();
  EXPECT_EQ(e->context_info("nope").status().code(), Code::not_found);

  const std::string id = context(*e, "");
  reply(*e, id, "quiet north");
  const int32_t before = e->context_info(id)->tokens;
  Status s = call(*e, id, "more", "zz", nullptr);
  EXPECT_EQ(s.code(), Code::invalid_argument) << s.message();
  EXPECT_EQ(e->context_info(id)->tokens, before);
  CallParams bad;
  bad.adapter = "../x";
  EXPECT_EQ(check_call_params(bad).code(), Code::invalid_argument);
}

TEST_F(AdapterEngine, AContextWhoseAdapterIsGoneCannotBeCalled) {
  {
    auto e = engine("gone");
    reply(*e, context(*e, "b", "orphan"), "seven stones");
  }
  auto e = engine("gone", {"a"});
  ASSERT_TRUE(e->open_context("orphan").ok());  // still readable, deletable
  Status s = call(*e, "orphan", "more", "", nullptr);
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_NE(s.message().find("orphan"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'b'"), std::string::npos) << s.message();
  // A call naming an adapter the engine offers runs.
  EXPECT_TRUE(call(*e, "orphan", "more", "a", nullptr).ok());
  EXPECT_TRUE(e->delete_context("orphan").ok());
}

TEST_F(AdapterEngine, BadAdapterFilesFailTheEngineNamingThem) {
  EngineOptions eo;
  eo.model_path = test::test_model(test::kLlama);
  eo.n_threads = 2;
  eo.state_dir = dir_->file("state-bad");
  eo.adapters = {{"missing", dir_->file("no-such.gguf")}};
  auto e = Engine::create(eo);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("adapter 'missing'"), std::string::npos) << e.status().message();
  // An adapter made for another model (another shape): refused.
  test::write_random_lora(test::test_model("gemma3-F16.gguf"), dir_->file("gemma.lora.gguf"), 8, 16.0f, 3);
  eo.adapters = {{"other", dir_->file("gemma.lora.gguf")}};
  e = Engine::create(eo);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("adapter 'other'"), std::string::npos) << e.status().message();
  eo.adapters = {{"a", path("a")}, {"a", path("b")}};
  e = Engine::create(eo);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Code::invalid_argument);
}

TEST(AdapterList, ParsesNamePathEntries) {
  auto l = parse_adapter_list("a=/x/a.gguf;;b.2=rel/b.gguf;");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(*l, (std::vector<std::pair<std::string, std::string>>{{"a", "/x/a.gguf"}, {"b.2", "rel/b.gguf"}}));
  EXPECT_TRUE(parse_adapter_list("")->empty());
  EXPECT_EQ(parse_adapter_list("nopath").status().code(), Code::invalid_argument);
  EXPECT_EQ(parse_adapter_list("a=").status().code(), Code::invalid_argument);
  EXPECT_EQ(parse_adapter_list("=p").status().code(), Code::invalid_argument);
  EXPECT_EQ(parse_adapter_list("a/b=p").status().code(), Code::invalid_argument);
}

}  // namespace
}  // namespace llmsvc
