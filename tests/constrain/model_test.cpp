// SPDX-License-Identifier: Apache-2.0
// Structured output end to end with the default model (SmolLM2-135M-Instruct): for every
// schema x prompt, generate with the constraint's mask applied to the logits (greedy, and
// seeded sampling) and check that the reply parses as JSON and validates against the schema
// with the tests' own validator (json_validator.h), independent of the matcher.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "hal/cpu/cpu_device.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/constrain/constraint.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/model.h"
#include "runtime/core/sampler/sampler.h"
#include "tests/common/test_paths.h"
#include "tests/constrain/json_validator.h"

namespace llmsvc::constrain::test {
namespace {

constexpr int kMaxTokens = 128;

struct SchemaCase {
  const char* name;
  const char* prompt;
  const char* schema;
};

// 22 schemas: nested objects, arrays, enums, numbers with bounds, strings with escapes,
// optional properties, anyOf / oneOf, $ref (plain and recursive), nullable, any JSON.
const SchemaCase kSchemas[] = {
    {"person", "Describe a fictional person.",
     R"({"type":"object","properties":{"name":{"type":"string","maxLength":30},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"]})"},
    {"color_enum", "What color is the sky?", R"({"enum":["red","green","blue","yellow"]})"},
    {"boolean", "Is water wet? Answer true or false.", R"({"type":"boolean"})"},
    {"rating", "Rate the movie Inception from 0 to 5.",
     R"({"type":"object","properties":{"rating":{"type":"number","minimum":0,"maximum":5},"reason":{"type":"string","maxLength":60}},"required":["rating","reason"]})"},
    {"tags", "List three tags for a blog post about cooking.",
     R"({"type":"array","items":{"type":"string","maxLength":20},"minItems":1,"maxItems":3})"},
    {"nested_address", "Give the address of a famous museum.",
     R"({"type":"object","properties":{"museum":{"type":"string","maxLength":40},"address":{"type":"object","properties":{"city":{"type":"string","maxLength":30},"country":{"type":"string","maxLength":30},"zip":{"type":["string","null"],"maxLength":10}},"required":["city","country"]}},"required":["museum","address"]})"},
    {"quote_escapes", "Write a sentence containing a quotation in double quotes and a backslash.",
     R"({"type":"object","properties":{"text":{"type":"string","minLength":5,"maxLength":80}},"required":["text"]})"},
    {"optional_fields", "Describe a book.",
     R"({"type":"object","properties":{"title":{"type":"string","maxLength":40},"subtitle":{"type":"string","maxLength":40},"pages":{"type":"integer","minimum":1,"maximum":5000},"isbn":{"type":"string","maxLength":20}},"required":["title"]})"},
    {"any_of", "Give either a number or a short word.",
     R"({"anyOf":[{"type":"integer","minimum":-100,"maximum":100},{"type":"string","maxLength":12}]})"},
    {"one_of_objects", "Describe a shape.",
     R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"circle"},"radius":{"type":"number","minimum":0,"maximum":100}},"required":["kind","radius"]},{"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"number","minimum":0,"maximum":100}},"required":["kind","side"]}]})"},
    {"ref_defs", "Give two points on a plane.",
     R"({"$defs":{"point":{"type":"object","properties":{"x":{"type":"integer","minimum":-50,"maximum":50},"y":{"type":"integer","minimum":-50,"maximum":50}},"required":["x","y"]}},"type":"object","properties":{"a":{"$ref":"#/$defs/point"},"b":{"$ref":"#/$defs/point"}},"required":["a","b"]})"},
    {"recursive_tree", "Describe a small family tree.",
     R"({"$ref":"#/definitions/node","definitions":{"node":{"type":"object","properties":{"name":{"type":"string","maxLength":16},"children":{"type":"array","maxItems":2,"items":{"$ref":"#/definitions/node"}}},"required":["name"]}}})"},
    {"integer_range", "Pick a number between 10 and 20.", R"({"type":"integer","minimum":10,"maximum":20})"},
    {"negative_numbers", "Give a temperature in Antarctica in winter.",
     R"({"type":"object","properties":{"celsius":{"type":"number","minimum":-90,"maximum":-10}},"required":["celsius"]})"},
    {"weather", "What is the weather like in Paris today?",
     R"({"type":"object","properties":{"city":{"type":"string","maxLength":20},"condition":{"enum":["sunny","cloudy","rainy","snowy"]},"temperature":{"type":"integer","minimum":-30,"maximum":45},"humidity":{"type":"number","minimum":0,"maximum":100}},"required":["city","condition","temperature"]})"},
    {"todo_list", "Make a short todo list for a weekend.",
     R"({"type":"object","properties":{"items":{"type":"array","maxItems":3,"items":{"type":"object","properties":{"task":{"type":"string","maxLength":30},"done":{"type":"boolean"}},"required":["task","done"]}}},"required":["items"]})"},
    {"nullable_fields", "Describe a pet that may not have a name.",
     R"({"type":"object","properties":{"species":{"type":"string","maxLength":20},"name":{"type":["string","null"],"maxLength":20},"age":{"type":"integer","nullable":true,"minimum":0,"maximum":40}},"required":["species","name","age"]})"},
    {"unicode_text", "Translate 'good morning' into French.",
     R"({"type":"object","properties":{"language":{"const":"fr"},"text":{"type":"string","maxLength":40}},"required":["language","text"]})"},
    {"matrix", "Give a 2 by 2 matrix of small integers.",
     R"({"type":"array","minItems":2,"maxItems":2,"items":{"type":"array","minItems":2,"maxItems":2,"items":{"type":"integer","minimum":-9,"maximum":9}}})"},
    {"enum_mixed", "Pick a value.", R"({"enum":[1,"two",null,true,{"four":4}]})"},
    {"any_json", "Give any JSON describing a car.", R"({})"},
    {"event", "Plan a meeting.",
     R"({"type":"object","properties":{"title":{"type":"string","maxLength":30},"priority":{"enum":["low","medium","high"]},"attendees":{"type":"array","maxItems":3,"items":{"type":"string","maxLength":15}},"duration_minutes":{"type":"integer","exclusiveMinimum":0,"maximum":240}},"required":["title","priority","attendees","duration_minutes"]})"},
};

struct Harness {
  std::unique_ptr<hal::Device> device;
  std::unique_ptr<Model> model;
  std::unique_ptr<Forward> fwd;
  std::unique_ptr<policy::KvChunkStore> store;
  std::shared_ptr<const TokenVocab> vocab;
};

Harness& harness() {
  static Harness h = [] {
    Harness x;
    x.device = hal::cpu::make_cpu_device(2);
    auto m = Model::load(llmsvc::test::default_model_path(), *x.device);
    if (!m.ok()) return x;
    x.model = std::move(m).value();
    const ModelConfig& cfg = x.model->config();
    x.fwd = std::make_unique<Forward>(*x.model, *x.device, 256);
    x.store = std::make_unique<policy::KvChunkStore>(policy::KvGeometry{cfg.n_layer, cfg.n_head_kv, cfg.head_dim, 16}, 0);
    x.vocab = TokenVocab::from_tokenizer(x.model->tokenizer());
    return x;
  }();
  return h;
}

struct Reply {
  std::string text;
  bool ended = false;  // an end-of-generation token closed it
  int tokens = 0;
  double mask_us = 0;  // total time computing masks
};

Reply generate(Harness& h, Constraint& c, const std::string& user, const SamplerParams& sp) {
  const ChatTemplate& chat = h.model->chat_template();
  const std::string system = "You are a helpful assistant. Reply only with JSON.";
  const std::string text = chat.system_prefix(system) + chat.user_turn(user, system, true);
  std::vector<int32_t> history = h.model->tokenizer().encode(text, true, true);
  policy::KvSequence seq(*h.store);
  std::vector<float> logits;
  Reply r;
  EXPECT_TRUE(h.fwd->eval(seq, history, 0, false, logits).ok());
  Sampler sampler(sp);
  const uint64_t ns0 = c.stats().mask_ns;
  for (int i = 0; i < kMaxTokens; ++i) {
    c.set_budget(kMaxTokens - i);
    c.apply(logits);
    const int32_t t = sampler.sample(logits, history);
    const Status s = c.accept(t);
    EXPECT_TRUE(s.ok()) << s.message();
    if (!s.ok()) break;
    ++r.tokens;
    if (h.vocab->is_eog(t)) {
      r.ended = true;
      break;
    }
    r.text += h.vocab->piece(t);
    history.push_back(t);
    EXPECT_TRUE(h.fwd->eval(seq, std::span<const int32_t>(&t, 1), static_cast<int>(history.size()) - 1, false, logits).ok());
  }
  r.mask_us = static_cast<double>(c.stats().mask_ns - ns0) / 1e3;
  return r;
}

TEST(ConstrainedModel, EveryReplyParsesAndValidates) {
  ASSERT_TRUE(std::filesystem::exists(llmsvc::test::default_model_path()))
      << "the default model is absent: tools/scripts/fetch_model.sh (tools/scripts/test.sh fetches it)";
  Harness& h = harness();
  ASSERT_NE(h.model, nullptr);
  const char* styles[] = {"", " Be brief.", " Answer in JSON."};
  int total = 0, valid = 0, tokens = 0;
  double mask_us = 0;
  for (const auto& sc : kSchemas) {
    auto grammar = compile_json_schema(sc.schema);
    ASSERT_TRUE(grammar.ok()) << sc.name << ": " << grammar.status().message();
    const nlohmann::json schema = nlohmann::json::parse(sc.schema);
    for (int variant = 0; variant < 2; ++variant) {  // greedy, and one seeded sampling
      auto c = Constraint::create(*grammar, h.vocab);
      ASSERT_TRUE(c.ok());
      SamplerParams sp;  // variant 0 greedy, then seeded sampling
      if (variant > 0) {
        sp.seed = 1000 + static_cast<uint64_t>(variant);
        sp.temperature = 0.8f;
        sp.top_k = 40;
        sp.top_p = 0.95f;
      }
      const std::string prompt = std::string(sc.prompt) + styles[variant] + " Schema: " + sc.schema;
      const Reply r = generate(h, **c, prompt, sp);
      ++total;
      tokens += r.tokens;
      mask_us += r.mask_us;
      const nlohmann::json v = nlohmann::json::parse(r.text, nullptr, false);
      std::string why = !r.ended ? "not finished within " + std::to_string(kMaxTokens) + " tokens"
                        : v.is_discarded() ? "not JSON"
                                           : validate(v, schema, schema);
      EXPECT_TRUE(why.empty()) << sc.name << " #" << variant << ": " << why << "\n" << r.text;
      valid += why.empty();
      std::printf("[ %-16s #%d ] %3d tokens %s %s\n", sc.name, variant, r.tokens, why.empty() ? "valid  " : "INVALID",
                  r.text.substr(0, 100).c_str());
    }
  }
  std::printf("structured output: %d of %d replies valid (%zu schemas x 2); mask %.1f us/token over %d tokens\n", valid,
              total, std::size(kSchemas), tokens ? mask_us / tokens : 0.0, tokens);
  RecordProperty("valid", valid);
  RecordProperty("total", total);
  EXPECT_EQ(valid, total);
}

}  // namespace
}  // namespace llmsvc::constrain::test
