// SPDX-License-Identifier: Apache-2.0
// LoraAdapter::load on untrusted files: a good adapter loads with its rank, alpha and scale;
// every malformed case is refused with the right code, naming the key or tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>

#include "runtime/core/model/lora_adapter.h"
#include "tests/lora/lora_util.h"

namespace llmsvc::test {
namespace {

class LoraLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = load_model(test_model("llama-F32.gguf"));
    lora_ = random_lora(test_model("llama-F32.gguf"), 4, 8.0f, {0, 2, 6}, 7);
  }
  // The status of loading an adapter written by `edit` from the good one.
  Status load_edited(const std::function<void(gguf::GgufWriter&, RandomLora&)>& edit) {
    RandomLora l = lora_;
    gguf::GgufWriter w = adapter_writer("llama", l.alpha);
    edit(w, l);
    add_lora_tensors(w, l);
    const std::string path = dir_.file("a.gguf");
    EXPECT_TRUE(w.write(path).ok());
    auto a = LoraAdapter::load(path, *model_, test_device());
    return a.ok() ? Status::Ok() : a.status();
  }
  ScratchDir dir_;
  std::unique_ptr<Model> model_;
  RandomLora lora_;
};

TEST_F(LoraLoad, AGoodAdapterLoads) {
  const std::string path = dir_.file("good.gguf");
  write_adapter(lora_, "llama", path);
  auto a = LoraAdapter::load(path, *model_, test_device());
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ((*a)->rank(), 4);
  EXPECT_EQ((*a)->alpha(), 8.0f);
  EXPECT_EQ((*a)->scale(), 2.0f);
  EXPECT_TRUE((*a)->has(0, LoraMatrix::q));
  EXPECT_TRUE((*a)->has(1, LoraMatrix::down));
  EXPECT_FALSE((*a)->has(0, LoraMatrix::k));
  EXPECT_EQ((*a)->weight(-1, 0, LoraMatrix::k, LoraPart::a), nullptr);
  ASSERT_NE((*a)->weight(-1, 0, LoraMatrix::v, LoraPart::b), nullptr);
  EXPECT_EQ((*a)->weight(-1, 0, LoraMatrix::v, LoraPart::b)->ref().rows, 128);
  EXPECT_EQ((*a)->bytes(), 2u * (4 * 256 + 4 * 256 + 4 * 256 + 4 * 128 + 4 * 256 + 256 * 4) * 4);
  EXPECT_EQ(&(*a)->model(), model_.get());
  EXPECT_NE((*a)->name().find("good.gguf"), std::string::npos);
}

TEST_F(LoraLoad, AlphaZeroScalesByOne) {
  EXPECT_TRUE(load_edited([](gguf::GgufWriter& w, RandomLora&) { w.remove("adapter.lora.alpha"); }).ok());
  lora_.alpha = 0;
  const std::string path = dir_.file("zero.gguf");
  write_adapter(lora_, "llama", path);
  auto a = load_adapter(path, *model_);
  EXPECT_EQ(a->scale(), 1.0f);
}

TEST_F(LoraLoad, NormTensorsAreIgnoredAsLlamaCppDoes) {
  std::vector<float> norm(256, 1.0f);
  EXPECT_TRUE(load_edited([&](gguf::GgufWriter& w, RandomLora&) {
                (void)w.add_tensor("blk.0.attn_norm.weight", gguf::TensorType::F32, {256}, bytes_of(norm));
              }).ok());
}

TEST_F(LoraLoad, MalformedAdaptersAreRefusedNamingTheField) {
  using W = gguf::GgufWriter;
  std::vector<float> big(256 * 600, 0.01f), small(128 * 4, 0.01f);
  const struct Case {
    const char* what;
    std::function<void(W&, RandomLora&)> edit;
    Code code;
    std::vector<std::string_view> names;
  } cases[] = {
      {"not an adapter", [](W& w, RandomLora&) { (void)w.set("general.type", gguf::string_value("model")); },
       Code::model_invalid, {"general.type", "model"}},
      {"no general.type", [](W& w, RandomLora&) { w.remove("general.type"); }, Code::model_invalid, {"general.type"}},
      {"not LoRA", [](W& w, RandomLora&) { (void)w.set("adapter.type", gguf::string_value("control_vector")); },
       Code::unsupported, {"adapter.type", "control_vector"}},
      {"no adapter.type", [](W& w, RandomLora&) { w.remove("adapter.type"); }, Code::model_invalid, {"adapter.type"}},
      {"another architecture", [](W& w, RandomLora&) { (void)w.set("general.architecture", gguf::string_value("qwen2")); },
       Code::model_mismatch, {"general.architecture", "qwen2", "llama"}},
      {"NaN alpha", [](W& w, RandomLora&) { (void)w.set("adapter.lora.alpha", gguf::float_value(gguf::ValueType::f32, NAN)); },
       Code::model_invalid, {"adapter.lora.alpha"}},
      {"alpha a string", [](W& w, RandomLora&) { (void)w.set("adapter.lora.alpha", gguf::string_value("8")); },
       Code::model_invalid, {"adapter.lora.alpha"}},
      {"aLoRA", [](W& w, RandomLora&) {
         (void)w.set("adapter.alora.invocation_tokens", gguf::uint_array(gguf::ValueType::u32, {1, 2}));
       }, Code::unsupported, {"adapter.alora.invocation_tokens"}},
      {"token_embd", [&](W& w, RandomLora&) {
         (void)w.add_tensor("token_embd.weight.lora_a", gguf::TensorType::F32, {128, 4}, bytes_of(small));
         (void)w.add_tensor("token_embd.weight.lora_b", gguf::TensorType::F32, {4, 128}, bytes_of(small));
       }, Code::unsupported, {"token_embd.weight"}},
      {"output", [&](W& w, RandomLora&) {
         (void)w.add_tensor("output.weight.lora_a", gguf::TensorType::F32, {128, 4}, bytes_of(small));
         (void)w.add_tensor("output.weight.lora_b", gguf::TensorType::F32, {4, 128}, bytes_of(small));
       }, Code::unsupported, {"output.weight"}},
      {"a norm adapted", [&](W& w, RandomLora&) {
         (void)w.add_tensor("blk.0.attn_norm.weight.lora_a", gguf::TensorType::F32, {128, 4}, bytes_of(small));
         (void)w.add_tensor("blk.0.attn_norm.weight.lora_b", gguf::TensorType::F32, {4, 128}, bytes_of(small));
       }, Code::unsupported, {"blk.0.attn_norm.weight"}},
      {"a layer the model lacks", [&](W& w, RandomLora&) {
         (void)w.add_tensor("blk.7.attn_q.weight.lora_a", gguf::TensorType::F32, {128, 4}, bytes_of(small));
         (void)w.add_tensor("blk.7.attn_q.weight.lora_b", gguf::TensorType::F32, {4, 128}, bytes_of(small));
       }, Code::model_mismatch, {"blk.7.attn_q.weight"}},
      {"unpaired", [](W&, RandomLora& l) { l.pairs[1].b.clear(); l.pairs[1].base += "X"; },
       Code::model_invalid, {}},
      {"an unexpected suffix", [&](W& w, RandomLora&) {
         (void)w.add_tensor("blk.0.attn_q.weight.lora_c", gguf::TensorType::F32, {128, 4}, bytes_of(small));
       }, Code::model_invalid, {"blk.0.attn_q.weight.lora_c"}},
      {"shape of another model", [](W&, RandomLora& l) {
         l.pairs[0].n_in = 128;
         l.pairs[0].a.resize(4 * 128);
       }, Code::model_mismatch, {"blk.0.attn_q.weight.lora_a", "{128, 4}"}},
      {"ranks that differ", [&](W& w, RandomLora&) {
         (void)w.add_tensor("blk.0.attn_k.weight.lora_a", gguf::TensorType::F32, {256, 2}, bytes_of(small));
         (void)w.add_tensor("blk.0.attn_k.weight.lora_b", gguf::TensorType::F32, {2, 128}, bytes_of(small).first(2 * 128 * 4));
       }, Code::unsupported, {"rank", "one rank per adapter"}},
      {"a rank too large", [&](W& w, RandomLora& l) {
         l.pairs.clear();
         (void)w.add_tensor("blk.0.attn_q.weight.lora_a", gguf::TensorType::F32, {256, 600}, bytes_of(big));
         (void)w.add_tensor("blk.0.attn_q.weight.lora_b", gguf::TensorType::F32, {600, 256}, bytes_of(big));
       }, Code::unsupported, {"blk.0.attn_q.weight.lora_a", "600"}},
      {"a type the device cannot prepare", [&](W& w, RandomLora& l) {
         l.pairs.clear();
         (void)w.add_tensor("blk.0.attn_q.weight.lora_a", gguf::TensorType::I32, {256, 4}, bytes_of(big).first(256 * 4 * 4));
         (void)w.add_tensor("blk.0.attn_q.weight.lora_b", gguf::TensorType::I32, {4, 256}, bytes_of(big).first(256 * 4 * 4));
       }, Code::unsupported, {"blk.0.attn_q.weight.lora_", "I32"}},
      {"no tensors", [](W&, RandomLora& l) { l.pairs.clear(); }, Code::model_invalid, {"no LoRA tensors"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    if (std::string_view(c.what) == "unpaired") {
      // One half only: written by hand, the rest as usual.
      RandomLora l = lora_;
      gguf::GgufWriter w = adapter_writer("llama", l.alpha);
      const LoraPair p = l.pairs.back();
      l.pairs.pop_back();
      add_lora_tensors(w, l);
      ASSERT_TRUE(w.add_tensor(p.base + ".lora_a", gguf::TensorType::F32, {256, 4}, bytes_of(p.a)).ok());
      const std::string path = dir_.file("unpaired.gguf");
      ASSERT_TRUE(w.write(path).ok());
      auto a = LoraAdapter::load(path, *model_, test_device());
      EXPECT_TRUE(fails_with(a.status(), Code::model_invalid, {"blk.1.ffn_down.weight.lora_a", "lora_b"}));
      continue;
    }
    const Status s = load_edited(c.edit);
    ::testing::AssertionResult r = fails_with(s, c.code, {});
    for (std::string_view n : c.names) r = r ? fails_with(s, c.code, {n}) : r;
    EXPECT_TRUE(r);
  }
}

TEST_F(LoraLoad, FilesThatAreNotGgufOrMissing) {
  auto missing = LoraAdapter::load(dir_.file("none.gguf"), *model_, test_device());
  EXPECT_TRUE(fails_with(missing.status(), Code::model_not_found, {"none.gguf"}));
  const std::string junk = dir_.file("junk.gguf");
  std::ofstream(junk) << "not a gguf file at all";
  auto bad = LoraAdapter::load(junk, *model_, test_device());
  EXPECT_TRUE(fails_with(bad.status(), Code::model_invalid, {"junk.gguf"}));
}

TEST_F(LoraLoad, AnotherDeviceIsRefused) {
  const std::string path = dir_.file("good.gguf");
  write_adapter(lora_, "llama", path);
  auto other = hal::cpu::make_cpu_device(1);
  auto a = LoraAdapter::load(path, *model_, *other);
  EXPECT_TRUE(fails_with(a.status(), Code::invalid_argument, {"device"}));
}

}  // namespace
}  // namespace llmsvc::test
