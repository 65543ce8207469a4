// SPDX-License-Identifier: Apache-2.0
// Bad model files above the GGUF parser: each case is a one-field mutation of a real test
// model that loads and runs, and must fail Model::load with the right code and a message
// naming the offending key, tensor or type — never crash.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "runtime/core/engine/engine.h"
#include "tests/model/bad_input_util.h"

namespace llmsvc::test {
namespace {

constexpr uint32_t kF32 = 0, kQ8_0 = 8, kQ8_1 = 9, kQ2_K = 10, kQ3_K = 11, kQ8_K = 15;
constexpr uint32_t kIQ2_XXS = 16, kIQ4_NL = 20;  // ggml types llmsvc does not compute with
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Case {
  std::string what;
  std::function<void(ModelImage&)> mutate;
  Code code;
  std::vector<std::string> names;  // each must appear in the message
};

// Loads every mutation of `base` and checks its status.
void run_cases(const ModelImage& base, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ModelImage m = base;
    c.mutate(m);
    const Status st = load_image(m);
    ASSERT_FALSE(st.ok()) << "the mutation was accepted";
    EXPECT_EQ(st.code(), c.code) << code_name(c.code) << " expected; got: " << st.message();
    for (const std::string& n : c.names) EXPECT_NE(st.message().find(n), std::string::npos) << st.message();
  }
}

// Greedy ids of a raw prompt, or the failure.
Result<std::vector<int32_t>> generate(const std::string& path, int max_tokens) {
  EngineOptions eo;
  eo.model_path = path;
  eo.n_threads = 2;
  eo.n_ctx = 64;
  auto engine = Engine::create(eo);
  if (!engine.ok()) return engine.status();
  ContextOptions co;
  co.raw = true;
  auto id = (*engine)->create_context(co);
  if (!id.ok()) return id.status();
  CallParams p;
  p.max_tokens = max_tokens;
  CallStats st;
  Status s = (*engine)->call(*id, "Hello world, the", p, nullptr, &st);
  if (!s.ok()) return s;
  return st.generated_ids;
}

class BadModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    llama_ = new ModelImage(ModelImage::load(test_model(kLlama)));
    qwen2_ = new ModelImage(ModelImage::load(test_model(kQwen2)));
    gemma3_ = new ModelImage(ModelImage::load(test_model(kGemma3)));
  }
  static void TearDownTestSuite() {
    delete llama_;
    delete qwen2_;
    delete gemma3_;
  }
  static ModelImage* llama_;
  static ModelImage* qwen2_;
  static ModelImage* gemma3_;
};
ModelImage* BadModel::llama_ = nullptr;
ModelImage* BadModel::qwen2_ = nullptr;
ModelImage* BadModel::gemma3_ = nullptr;

// The baselines, rewritten by ModelImage, load and generate exactly what the originals do:
// the failures below come from their one mutation, not from the rewriting.
TEST_F(BadModel, BaselinesLoadAndRunLikeTheOriginals) {
  for (auto [name, image] : {std::pair{kLlama, llama_}, std::pair{kQwen2, qwen2_}, std::pair{kGemma3, gemma3_}}) {
    SCOPED_TRACE(name);
    ScratchDir dir;
    const std::string copy = dir.file("copy.gguf");
    image->write(copy);
    auto want = generate(test_model(name), 4);
    ASSERT_TRUE(want.ok()) << want.status().message();
    auto got = generate(copy, 4);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_FALSE(got->empty());
    EXPECT_EQ(*got, *want);
  }
}

TEST_F(BadModel, UnsupportedArchitecture) {
  run_cases(*llama_, {
      {"gpt2", [](ModelImage& m) { m.set_string("general.architecture", "gpt2"); }, Code::unsupported, {"'gpt2'"}},
      {"mamba", [](ModelImage& m) { m.set_string("general.architecture", "mamba"); }, Code::unsupported, {"'mamba'"}},
      {"case matters", [](ModelImage& m) { m.set_string("general.architecture", "LLAMA"); }, Code::unsupported, {"'LLAMA'"}},
      {"empty", [](ModelImage& m) { m.set_string("general.architecture", ""); }, Code::unsupported, {"architecture ''"}},
      {"missing", [](ModelImage& m) { m.erase("general.architecture"); }, Code::model_invalid, {"general.architecture"}},
      {"not a string", [](ModelImage& m) { m.set_u32("general.architecture", 1); }, Code::model_invalid,
       {"general.architecture"}},
      // A supported name whose keys are not in the file: the first key it needs is named.
      {"qwen2 name on llama keys", [](ModelImage& m) { m.set_string("general.architecture", "qwen2"); },
       Code::model_invalid, {"qwen2.block_count"}},
  });
}

TEST_F(BadModel, UnsupportedWeightType) {
  const auto layer_type = [](uint32_t type) {
    return [type](ModelImage& m) { m.reshape("blk.1.attn_q.weight", type, {256, 256}); };
  };
  run_cases(*llama_, {
      {"Q2_K layer", layer_type(kQ2_K), Code::unsupported, {"blk.1.attn_q.weight", "Q2_K"}},
      {"Q3_K layer", layer_type(kQ3_K), Code::unsupported, {"blk.1.attn_q.weight", "Q3_K"}},
      {"Q8_1 layer", layer_type(kQ8_1), Code::unsupported, {"blk.1.attn_q.weight", "Q8_1"}},
      {"Q8_K layer", layer_type(kQ8_K), Code::unsupported, {"blk.1.attn_q.weight", "Q8_K"}},
      {"Q2_K embeddings", [](ModelImage& m) { m.reshape("token_embd.weight", kQ2_K, {256, 512}); }, Code::unsupported,
       {"token_embd.weight", "Q2_K"}},
      {"Q8_K norm", [](ModelImage& m) { m.reshape("blk.0.ffn_norm.weight", kQ8_K, {256}); }, Code::unsupported,
       {"blk.0.ffn_norm.weight", "Q8_K"}},
      // llama.cpp types llmsvc does not compute with parse, and are refused by name.
      {"IQ4_NL layer", layer_type(kIQ4_NL), Code::unsupported, {"blk.1.attn_q.weight", "IQ4_NL"}},
      {"IQ2_XXS layer", layer_type(kIQ2_XXS), Code::unsupported, {"blk.1.attn_q.weight", "IQ2_XXS"}},
  });
}

TEST_F(BadModel, AbsurdLayerCounts) {
  const std::string key = "llama.block_count";
  run_cases(*llama_, {
      {"0", [&](ModelImage& m) { m.set_u32(key, 0); }, Code::model_invalid, {key}},
      {"10^6", [&](ModelImage& m) { m.set_u32(key, 1000000); }, Code::model_invalid, {key}},
      {"2^40", [&](ModelImage& m) { m.set_u64(key, uint64_t{1} << 40); }, Code::model_invalid, {key}},
      {"-1", [&](ModelImage& m) { m.set_i32(key, -1); }, Code::model_invalid, {key}},
      {"string", [&](ModelImage& m) { m.set_string(key, "2"); }, Code::model_invalid, {key}},
      {"missing", [&](ModelImage& m) { m.erase(key); }, Code::model_invalid, {key}},
      // One more layer than the file has: the first tensor of the missing layer is named.
      {"3 of 2", [&](ModelImage& m) { m.set_u32(key, 3); }, Code::model_invalid, {"blk.2.attn_norm.weight", "missing"}},
  });
}

TEST_F(BadModel, AbsurdHeadCounts) {
  const std::string heads = "llama.attention.head_count", kv = "llama.attention.head_count_kv";
  run_cases(*llama_, {
      {"head_count 0", [&](ModelImage& m) { m.set_u32(heads, 0); }, Code::model_invalid, {heads}},
      {"head_count 2^40", [&](ModelImage& m) { m.set_u64(heads, uint64_t{1} << 40); }, Code::model_invalid, {heads}},
      {"head_count missing", [&](ModelImage& m) { m.erase(heads); }, Code::model_invalid, {heads}},
      {"head_count 3 vs head_count_kv 2", [&](ModelImage& m) { m.set_u32(heads, 3); }, Code::model_invalid,
       {kv, "head_count"}},
      {"head_count 6 does not divide 256", [&](ModelImage& m) { m.set_u32(heads, 6); }, Code::model_invalid,
       {"llama.embedding_length", "head_count"}},
      {"head_count_kv 0", [&](ModelImage& m) { m.set_u32(kv, 0); }, Code::model_invalid, {kv}},
      {"head_count_kv 3 does not divide 4", [&](ModelImage& m) { m.set_u32(kv, 3); }, Code::model_invalid, {kv}},
      {"head_count_kv 8 > head_count", [&](ModelImage& m) { m.set_u32(kv, 8); }, Code::model_invalid, {kv}},
      {"head_count_kv 2^33", [&](ModelImage& m) { m.set_u64(kv, uint64_t{1} << 33); }, Code::model_invalid, {kv}},
      // Consistent numbers the tensors do not match: the tensor is named.
      {"head_count_kv 4 vs attn_k rows", [&](ModelImage& m) { m.set_u32(kv, 4); }, Code::model_invalid,
       {"blk.0.attn_k.weight", "shape"}},
  });
}

TEST_F(BadModel, AbsurdSizes) {
  const std::string embd = "llama.embedding_length", ff = "llama.feed_forward_length", ctx = "llama.context_length";
  run_cases(*llama_, {
      {"embedding_length 0", [&](ModelImage& m) { m.set_u32(embd, 0); }, Code::model_invalid, {embd}},
      {"embedding_length 2^20", [&](ModelImage& m) { m.set_u32(embd, 1u << 20); }, Code::model_invalid, {embd}},
      {"embedding_length 2^40", [&](ModelImage& m) { m.set_u64(embd, uint64_t{1} << 40); }, Code::model_invalid, {embd}},
      {"embedding_length 512 vs tensors", [&](ModelImage& m) { m.set_u32(embd, 512); }, Code::model_invalid,
       {"token_embd.weight", "shape"}},
      {"feed_forward_length 0", [&](ModelImage& m) { m.set_u32(ff, 0); }, Code::model_invalid, {ff}},
      {"feed_forward_length 2^40", [&](ModelImage& m) { m.set_u64(ff, uint64_t{1} << 40); }, Code::model_invalid, {ff}},
      {"feed_forward_length 512 vs tensors", [&](ModelImage& m) { m.set_u32(ff, 512); }, Code::model_invalid,
       {"blk.0.ffn_gate.weight", "shape"}},
      {"context_length 0", [&](ModelImage& m) { m.set_u32(ctx, 0); }, Code::model_invalid, {ctx}},
      {"context_length 2^31", [&](ModelImage& m) { m.set_u32(ctx, 1u << 31); }, Code::model_invalid, {ctx}},
      {"context_length 2^40", [&](ModelImage& m) { m.set_u64(ctx, uint64_t{1} << 40); }, Code::model_invalid, {ctx}},
  });
}

TEST_F(BadModel, BadRopeAndAttentionShape) {
  const std::string rope = "llama.rope.dimension_count", key_len = "llama.attention.key_length",
                    val_len = "llama.attention.value_length", base = "llama.rope.freq_base";
  run_cases(*llama_, {
      {"rope dims odd", [&](ModelImage& m) { m.set_u32(rope, 63); }, Code::model_invalid, {rope}},
      {"rope dims > head size", [&](ModelImage& m) { m.set_u32(rope, 66); }, Code::model_invalid, {rope}},
      {"rope dims 2x head size", [&](ModelImage& m) { m.set_u32(rope, 128); }, Code::model_invalid, {rope}},
      {"rope dims 0", [&](ModelImage& m) { m.set_u32(rope, 0); }, Code::model_invalid, {rope}},
      {"rope base 0", [&](ModelImage& m) { m.set_f32(base, 0); }, Code::model_invalid, {base}},
      {"rope base NaN", [&](ModelImage& m) { m.set_f32(base, kNaN); }, Code::model_invalid, {base}},
      {"rope base -inf", [&](ModelImage& m) { m.set_f32(base, -kInf); }, Code::model_invalid, {base}},
      {"rope scaling yarn", [](ModelImage& m) { m.set_string("llama.rope.scaling.type", "yarn"); }, Code::unsupported,
       {"llama.rope.scaling.type", "'yarn'"}},
      {"rope scaling factor 0",
       [](ModelImage& m) {
         m.set_string("llama.rope.scaling.type", "linear");
         m.set_f32("llama.rope.scaling.factor", 0);
       },
       Code::model_invalid, {"llama.rope.scaling.factor"}},
      {"key_length odd", [&](ModelImage& m) { m.set_u32(key_len, 63); }, Code::model_invalid, {key_len}},
      {"key_length 0", [&](ModelImage& m) { m.set_u32(key_len, 0); }, Code::model_invalid, {key_len}},
      {"key_length 2^40", [&](ModelImage& m) { m.set_u64(key_len, uint64_t{1} << 40); }, Code::model_invalid, {key_len}},
      {"value_length != key_length", [&](ModelImage& m) { m.set_u32(val_len, 32); }, Code::unsupported, {val_len}},
  });
}

TEST_F(BadModel, BadRmsEpsilon) {
  const std::string eps = "llama.attention.layer_norm_rms_epsilon";
  run_cases(*llama_, {
      {"missing", [&](ModelImage& m) { m.erase(eps); }, Code::model_invalid, {eps}},
      {"negative", [&](ModelImage& m) { m.set_f32(eps, -1e-5f); }, Code::model_invalid, {eps}},
      {"zero", [&](ModelImage& m) { m.set_f32(eps, 0.0f); }, Code::model_invalid, {eps}},
      {"NaN", [&](ModelImage& m) { m.set_f32(eps, kNaN); }, Code::model_invalid, {eps}},
      {"inf", [&](ModelImage& m) { m.set_f32(eps, kInf); }, Code::model_invalid, {eps}},
      {"string", [&](ModelImage& m) { m.set_string(eps, "1e-5"); }, Code::model_invalid, {eps}},
  });
}

TEST_F(BadModel, MissingOrMisshapenTensors) {
  run_cases(*llama_, {
      {"no token_embd", [](ModelImage& m) { m.erase_tensor("token_embd.weight"); }, Code::model_invalid,
       {"token_embd.weight", "missing"}},
      {"no attn_v in layer 1", [](ModelImage& m) { m.erase_tensor("blk.1.attn_v.weight"); }, Code::model_invalid,
       {"blk.1.attn_v.weight", "missing"}},
      {"no ffn_norm in layer 0", [](ModelImage& m) { m.erase_tensor("blk.0.ffn_norm.weight"); }, Code::model_invalid,
       {"blk.0.ffn_norm.weight", "missing"}},
      {"no output_norm", [](ModelImage& m) { m.erase_tensor("output_norm.weight"); }, Code::model_invalid,
       {"output_norm.weight", "missing"}},
      {"ffn_up rows halved", [](ModelImage& m) { m.reshape("blk.1.ffn_up.weight", kQ8_0, {256, 128}); },
       Code::model_invalid, {"blk.1.ffn_up.weight", "{256, 128}", "expected {256, 256}"}},
      {"attn_k transposed", [](ModelImage& m) { m.reshape("blk.0.attn_k.weight", kQ8_0, {128, 256}); },
       Code::model_invalid, {"blk.0.attn_k.weight", "expected {256, 128}"}},
      {"attn_q 3-D", [](ModelImage& m) { m.reshape("blk.0.attn_q.weight", kQ8_0, {256, 256, 1}); }, Code::model_invalid,
       {"blk.0.attn_q.weight", "{256, 256, 1}"}},
      {"attn_q 1-D", [](ModelImage& m) { m.reshape("blk.0.attn_q.weight", kQ8_0, {65536}); }, Code::model_invalid,
       {"blk.0.attn_q.weight", "{65536}"}},
      {"norm of 128", [](ModelImage& m) { m.reshape("blk.0.attn_norm.weight", kF32, {128}); }, Code::model_invalid,
       {"blk.0.attn_norm.weight", "{128}", "expected {256}"}},
      {"norm of 512", [](ModelImage& m) { m.reshape("output_norm.weight", kF32, {512}); }, Code::model_invalid,
       {"output_norm.weight", "{512}"}},
      {"norm 2-D", [](ModelImage& m) { m.reshape("blk.1.ffn_norm.weight", kF32, {256, 1}); }, Code::model_invalid,
       {"blk.1.ffn_norm.weight", "{256, 1}"}},
      {"token_embd 1-D", [](ModelImage& m) { m.reshape("token_embd.weight", kQ8_0, {256 * 512}); }, Code::model_invalid,
       {"token_embd.weight"}},
      {"tokenizer larger than token_embd", [](ModelImage& m) { m.reshape("token_embd.weight", kQ8_0, {256, 256}); },
       Code::model_invalid, {"token_embd.weight", "512 tokens", "256 rows"}},
      {"output.weight with too few rows", [](ModelImage& m) { m.reshape("output.weight", kQ8_0, {256, 100}); },
       Code::model_invalid, {"output.weight", "{256, 100}"}},
  });
}

// A file may declare general.alignment 1 and place a tensor at any byte; the kernels read
// elements and block scales in place, so a misaligned tensor is refused by name.
TEST_F(BadModel, MisalignedTensorData) {
  const auto skew_last = [](const char* name, uint64_t skew) {
    return [name, skew](ModelImage& m) {
      m.alignment = 1;
      ModelImage::Tensor t = *m.tensor(name);  // moved last so only it is misaligned
      m.erase_tensor(name);
      m.reshape(name, t.type, t.ne);
      m.tensor(name)->data = t.data;
      m.tensor(name)->skew = skew;
    };
  };
  {
    // The rewriting itself is harmless: alignment 1 with every tensor where it was loads.
    ModelImage m = *llama_;
    m.alignment = 1;
    const Status st = load_image(m);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  run_cases(*llama_, {
      {"Q8_0 matrix at an odd offset", skew_last("blk.1.attn_q.weight", 1), Code::model_invalid,
       {"blk.1.attn_q.weight", "aligned"}},
      {"F32 norm at offset 2 mod 4", skew_last("blk.1.ffn_norm.weight", 2), Code::model_invalid,
       {"blk.1.ffn_norm.weight", "aligned"}},
  });
}

TEST_F(BadModel, Qwen2Biases) {
  run_cases(*qwen2_, {
      {"no attn_q.bias", [](ModelImage& m) { m.erase_tensor("blk.0.attn_q.bias"); }, Code::model_invalid,
       {"blk.0.attn_q.bias", "missing"}},
      {"attn_k.bias too long", [](ModelImage& m) { m.reshape("blk.1.attn_k.bias", kF32, {256}); }, Code::model_invalid,
       {"blk.1.attn_k.bias", "{256}", "expected {128}"}},
      {"output.weight one row short", [](ModelImage& m) { m.reshape("output.weight", kF32, {256, 511}); }, Code::model_invalid,
       {"output.weight", "{256, 511}"}},
  });
}

TEST_F(BadModel, Gemma3Keys) {
  run_cases(*gemma3_, {
      {"no sliding_window", [](ModelImage& m) { m.erase("gemma3.attention.sliding_window"); }, Code::model_invalid,
       {"gemma3.attention.sliding_window"}},
      {"sliding_window 0", [](ModelImage& m) { m.set_u32("gemma3.attention.sliding_window", 0); }, Code::model_invalid,
       {"gemma3.attention.sliding_window"}},
      {"value_length differs", [](ModelImage& m) { m.set_u32("gemma3.attention.value_length", 32); }, Code::unsupported,
       {"gemma3.attention.value_length"}},
      {"key_length odd", [](ModelImage& m) { m.set_u32("gemma3.attention.key_length", 63); }, Code::model_invalid,
       {"gemma3.attention.key_length"}},
      {"no k norm in layer 3", [](ModelImage& m) { m.erase_tensor("blk.3.attn_k_norm.weight"); }, Code::model_invalid,
       {"blk.3.attn_k_norm.weight", "missing"}},
      {"q norm of the wrong size", [](ModelImage& m) { m.reshape("blk.5.attn_q_norm.weight", kF32, {128}); },
       Code::model_invalid, {"blk.5.attn_q_norm.weight", "expected {64}"}},
      {"no post-FFN norm", [](ModelImage& m) { m.erase_tensor("blk.2.post_ffw_norm.weight"); }, Code::model_invalid,
       {"blk.2.post_ffw_norm.weight", "missing"}},
  });
}

// Metadata the loader only reads loosely must not stop a model from loading or crash it.
TEST_F(BadModel, OddOptionalMetadataStillLoads) {
  const std::vector<std::pair<std::string, std::function<void(ModelImage&)>>> cases = {
      {"template of invalid UTF-8", [](ModelImage& m) { m.set_string("tokenizer.chat_template", "\xff\xfe{% '<|im_start|>"); }},
      {"template not a string", [](ModelImage& m) { m.set_u32("tokenizer.chat_template", 7); }},
      {"template missing", [](ModelImage& m) { m.erase("tokenizer.chat_template"); }},
      {"unquoted ChatML markers", [](ModelImage& m) { m.set_string("tokenizer.chat_template", "<|im_start|>system\n"); }},
      {"rope scaling none", [](ModelImage& m) { m.set_string("llama.rope.scaling.type", "none"); }},
      // Padded embeddings (common in real models): sampled ids past the vocabulary have no text.
      {"tokenizer smaller than token_embd",
       [](ModelImage& m) {
         std::vector<std::string> tokens = model_strings(kLlama, "tokenizer.ggml.tokens");
         tokens.resize(300);
         m.set_strings("tokenizer.ggml.tokens", tokens);
         m.set_i32s("tokenizer.ggml.token_type", std::vector<int32_t>(300, 1));
       }},
  };
  for (const auto& [what, mutate] : cases) {
    SCOPED_TRACE(what);
    ModelImage m = *llama_;
    mutate(m);
    ScratchDir dir;
    const std::string path = dir.file("m.gguf");
    m.write(path);
    auto out = generate(path, 2);
    EXPECT_TRUE(out.ok()) << out.status().message();
  }
}

}  // namespace
}  // namespace llmsvc::test
