// SPDX-License-Identifier: Apache-2.0
// LoRA in the forward pass on the committed F32 random llama: an adapter computes what a model
// with W + scale * B A merged into its weights computes, at the full level and at an elastic
// level; switching adapters between evals gives each its own logits and -1 the base model's
// bits; an elastic model's recovery adapter runs at its level only; branches folded into their
// base matmul (the CPU's default) give the bits of the graph's separate ops.
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <utility>

#include "hal/cpu/cpu_device.h"
#include "hal/devices/device_registry.h"
#include "runtime/core/graph/model_graph.h"
#include "runtime/core/model/lora_adapter.h"
#include "tests/elastic/elastic_util.h"
#include "tests/lora/lora_util.h"

namespace llmsvc::test {
namespace {

const std::vector<int> kAll = {0, 1, 2, 3, 4, 5, 6};

// Float tolerance of "the same function": the branch rounds B A x in float where the merged
// weight rounds W + s B A once; through two layers and the output norm (x6) that is a few
// 1e-3 on logits of 20 (measured 0.003-0.005; a branch left out or mis-scaled moves them by > 1).
void expect_close(const std::vector<float>& a, const std::vector<float>& b) {
  double max_abs = 0;
  for (float v : b) max_abs = std::max<double>(max_abs, std::fabs(v));
  const double d = max_diff(a, b);
  EXPECT_LE(d, 1e-3 * std::max(1.0, max_abs)) << "max |logit| " << max_abs;
  std::printf("max |logit diff| %.3g (max |logit| %.3g)\n", d, max_abs);
}

TEST(LoraForward, AnAdapterComputesTheMergedModel) {
  ScratchDir dir;
  const std::string base = test_model("llama-F32.gguf");
  const RandomLora l = random_lora(base, 8, 16.0f, kAll, 11);
  write_adapter(l, "llama", dir.file("a.gguf"));
  write_merged(base, l, dir.file("merged.gguf"));
  auto m = load_model(base), merged = load_model(dir.file("merged.gguf"));
  auto a = load_adapter(dir.file("a.gguf"), *m);
  const auto tokens = probe_tokens(*m, 20);
  Forward f(*m, test_device(), 8), fm(*merged, test_device(), 8), f0(*m, test_device(), 8);
  ASSERT_TRUE(f.set_adapters({a.get()}).ok());
  ASSERT_TRUE(f.set_adapter(0).ok());
  const auto with = logits_of(f, *m, tokens), want = logits_of(fm, *merged, tokens), plain = logits_of(f0, *m, tokens);
  expect_close(with, want);
  EXPECT_GT(max_diff(with, plain), 0.5);  // the adapter does change the output
}

TEST(LoraForward, SwitchingGivesEachAdapterItsOwnLogitsAndNoneTheBaseBits) {
  ScratchDir dir;
  const std::string base = test_model("llama-F32.gguf");
  write_adapter(random_lora(base, 8, 16.0f, kAll, 1), "llama", dir.file("a1.gguf"));
  write_adapter(random_lora(base, 4, 0.0f, {0, 2, 6}, 2), "llama", dir.file("a2.gguf"));
  auto m = load_model(base);
  auto a1 = load_adapter(dir.file("a1.gguf"), *m), a2 = load_adapter(dir.file("a2.gguf"), *m);
  const auto tokens = probe_tokens(*m, 19);
  Forward plain(*m, test_device(), 8), only1(*m, test_device(), 8), only2(*m, test_device(), 8);
  ASSERT_TRUE(only1.set_adapters({a1.get()}).ok() && only1.set_adapter(0).ok());
  ASSERT_TRUE(only2.set_adapters({a2.get()}).ok() && only2.set_adapter(0).ok());
  const auto base_bits = logits_of(plain, *m, tokens), bits1 = logits_of(only1, *m, tokens),
             bits2 = logits_of(only2, *m, tokens);
  EXPECT_GT(max_diff(bits1, bits2), 0.5);

  Forward f(*m, test_device(), 8);
  ASSERT_TRUE(f.set_adapters({a1.get(), a2.get()}).ok());
  EXPECT_EQ(f.adapter(), -1);
  EXPECT_TRUE(same_bits(logits_of(f, *m, tokens), base_bits));
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(f.set_adapter(0).ok());
    EXPECT_TRUE(same_bits(logits_of(f, *m, tokens), bits1));
    ASSERT_TRUE(f.set_adapter(1).ok());
    EXPECT_TRUE(same_bits(logits_of(f, *m, tokens), bits2));
    ASSERT_TRUE(f.set_adapter(-1).ok());
    EXPECT_TRUE(same_bits(logits_of(f, *m, tokens), base_bits));
  }
  EXPECT_EQ(f.check_adapter(2).code(), Code::invalid_argument);
  EXPECT_EQ(f.check_adapter(-2).code(), Code::invalid_argument);
  EXPECT_EQ(f.set_adapter(5).code(), Code::invalid_argument);
  EXPECT_EQ(f.adapter(), -1);
  // An adapter made for another model is refused.
  auto other = load_model(base);
  auto foreign = load_adapter(dir.file("a1.gguf"), *other);
  EXPECT_EQ(f.set_adapters({foreign.get()}).code(), Code::invalid_argument);
  EXPECT_EQ(f.set_adapters({nullptr}).code(), Code::invalid_argument);
  // Back to no adapters at all: the graph without branches, the base bits.
  ASSERT_TRUE(f.set_adapters({}).ok());
  EXPECT_TRUE(same_bits(logits_of(f, *m, tokens), base_bits));
}

TEST(LoraForward, ElasticLevelsAndRecoveryAdapters) {
  ScratchDir dir;
  const std::string base = test_model("llama-F32.gguf"), elastic = dir.file("elastic.gguf");
  elastify::Options o = small_options(base, elastic);
  o.anchor_share = 0;
  o.levels = {40, 100};
  auto rep = elastify::run(o);
  ASSERT_TRUE(rep.ok()) << rep.status().message();

  // An adapter at a level against the merged elastic model at that level.
  const RandomLora l = random_lora(elastic, 8, 16.0f, kAll, 21);
  write_adapter(l, "llama", dir.file("a.gguf"));
  write_merged(elastic, l, dir.file("merged.gguf"));
  auto m = load_model(elastic), merged = load_model(dir.file("merged.gguf"));
  ASSERT_TRUE(m->levels_status().ok());
  EXPECT_EQ(m->recovery_adapter(0), nullptr);
  auto a = load_adapter(dir.file("a.gguf"), *m);
  ASSERT_TRUE(a->levels_status().ok()) << a->levels_status().message();
  const int keep = m->elastic()->ffn_keep[0][0];
  ASSERT_LT(keep, m->config().n_ff);
  EXPECT_EQ(a->weight(0, 0, LoraMatrix::gate, LoraPart::b)->ref().rows, keep);
  EXPECT_EQ(a->weight(0, 0, LoraMatrix::down, LoraPart::a)->ref().cols, keep);
  EXPECT_EQ(a->weight(0, 0, LoraMatrix::gate, LoraPart::a)->ref().cols, m->config().n_embd);
  // The level keeps one query head of each KV group: q's B rows and o's A columns of those
  // (the model holds them rank-major, and so does the adapter).
  ASSERT_TRUE(m->elastic()->cuts_heads());
  ASSERT_TRUE(m->config().q_heads_rank_major);
  const int q_cols = m->elastic()->head_keep[0][0] * m->config().head_dim;
  ASSERT_LT(q_cols, m->config().n_head * m->config().head_dim);
  EXPECT_EQ(a->weight(0, 0, LoraMatrix::q, LoraPart::b)->ref().rows, q_cols);
  EXPECT_EQ(a->weight(0, 0, LoraMatrix::o, LoraPart::a)->ref().cols, q_cols);
  const auto tokens = probe_tokens(*m, 20);
  Forward f(*m, test_device(), 8), fm(*merged, test_device(), 8);
  ASSERT_TRUE(f.set_adapters({a.get()}).ok());
  ASSERT_TRUE(f.set_adapter(0).ok());
  for (int lv : {0, 1}) {
    SCOPED_TRACE("level " + std::to_string(lv));
    ASSERT_TRUE(f.set_level(lv).ok());
    ASSERT_TRUE(fm.set_level(lv).ok());
    expect_close(logits_of(f, *m, tokens), logits_of(fm, *merged, tokens));
  }

  // The same adapter as the level-40 recovery adapter of the file (rcv.40.*).
  {
    auto src = gguf::GgufFile::open(elastic);
    ASSERT_TRUE(src.ok());
    auto w = gguf::GgufWriter::from_file(**src);
    ASSERT_TRUE(w.ok() && w->add_tensors_from(**src).ok());
    add_lora_tensors(*w, l, "rcv.40.");
    ASSERT_TRUE(w->set("llmsvc.elastic.recovery", gguf::uint_array(gguf::ValueType::u32, {40})).ok());
    ASSERT_TRUE(w->set("llmsvc.elastic.recovery_alpha", gguf::float_array(gguf::ValueType::f32, {16.0})).ok());
    ASSERT_TRUE(w->write(dir.file("rcv.gguf")).ok());
    // Inconsistent recovery fields are refused, naming them.
    ASSERT_TRUE(w->set("llmsvc.elastic.recovery", gguf::uint_array(gguf::ValueType::u32, {30})).ok());
    ASSERT_TRUE(w->write(dir.file("bad1.gguf")).ok());
    ASSERT_TRUE(w->set("llmsvc.elastic.recovery", gguf::uint_array(gguf::ValueType::u32, {40, 100})).ok());
    ASSERT_TRUE(w->write(dir.file("bad2.gguf")).ok());
    ASSERT_TRUE(w->set("llmsvc.elastic.recovery", gguf::uint_array(gguf::ValueType::u32, {100})).ok());
    ASSERT_TRUE(w->set("llmsvc.elastic.recovery_alpha", gguf::float_array(gguf::ValueType::f32, {1.0})).ok());
    ASSERT_TRUE(w->write(dir.file("bad3.gguf")).ok());
  }
  auto bad = [&](const char* file) { auto r = Model::load(dir.file(file), test_device()); return r.ok() ? Status::Ok() : r.status(); };
  EXPECT_TRUE(fails_with(bad("bad1.gguf"), Code::model_invalid, {"llmsvc.elastic.recovery", "30"}));
  EXPECT_TRUE(fails_with(bad("bad2.gguf"), Code::model_invalid, {"llmsvc.elastic.recovery_alpha"}));
  EXPECT_TRUE(fails_with(bad("bad3.gguf"), Code::model_invalid, {"llmsvc.elastic.recovery", "100", "rcv.100."}));

  auto r = load_model(dir.file("rcv.gguf"));
  ASSERT_NE(r->recovery_adapter(0), nullptr);
  EXPECT_EQ(r->recovery_adapter(1), nullptr);
  EXPECT_EQ(r->recovery_adapter(0)->rank(), 8);
  EXPECT_EQ(r->recovery_adapter(0)->scale(), 2.0f);
  auto a_r = load_adapter(dir.file("a.gguf"), *r);
  Forward with_rcv(*r, test_device(), 8), by_hand(*r, test_device(), 8), none(*r, test_device(), 8);
  by_hand.set_recovery(false);
  none.set_recovery(false);
  ASSERT_TRUE(by_hand.set_adapters({a_r.get()}).ok());
  for (Forward* x : {&with_rcv, &by_hand, &none}) ASSERT_TRUE(x->set_level(0).ok());
  ASSERT_TRUE(by_hand.set_adapter(0).ok());
  // At its level, the recovery adapter is what the same adapter chosen by hand computes.
  const auto at40 = logits_of(with_rcv, *r, tokens);
  EXPECT_TRUE(same_bits(at40, logits_of(by_hand, *r, tokens)));
  EXPECT_GT(max_diff(at40, logits_of(none, *r, tokens)), 0.5);
  // At the full level it does not run.
  ASSERT_TRUE(with_rcv.set_level(1).ok());
  ASSERT_TRUE(none.set_level(1).ok());
  EXPECT_TRUE(same_bits(logits_of(with_rcv, *r, tokens), logits_of(none, *r, tokens)));
  // Turned off: the level without it.
  ASSERT_TRUE(with_rcv.set_level(0).ok());
  with_rcv.set_recovery(false);
  ASSERT_TRUE(none.set_level(0).ok());
  EXPECT_TRUE(same_bits(logits_of(with_rcv, *r, tokens), logits_of(none, *r, tokens)));
}

// `model` elastified into dir with levels 40 and 100 (every layer cut), and a random rank-8
// adapter on all seven matrices for it, in F32 or F16: the files the folding tests run.
std::pair<std::string, std::string> elastic_with_adapter(const ScratchDir& dir, const std::string& model, bool f16) {
  const std::string elastic = dir.file("elastic-" + model);
  if (!std::filesystem::exists(elastic)) {
    elastify::Options o = small_options(test_model(model), elastic);
    o.anchor_share = 0;
    o.levels = {40, 100};
    if (!elastify::run(o).ok()) throw std::runtime_error("elastify " + model);
  }
  RandomLora l = random_lora(elastic, 8, 16.0f, kAll, 31);
  if (f16) make_f16(l);
  const std::string path = dir.file(std::string(f16 ? "f16-" : "f32-") + model);
  write_adapter(l, "llama", path);
  return {elastic, path};
}

// The CPU folds each branch into its base matmul's parallel region (Device::matmul_lora); the
// graph's separate A, B, scale and add ops are the reference: the same bits for F32 and F16
// adapters, on float and quantized (panel) base weights, at a level and in full, with 1 and 3
// threads (each thread adds the branch to the rows it computed), prompts and decode steps.
TEST(LoraForward, BranchesFoldedIntoTheirMatmulGiveTheSeparateOpsBits) {
  ScratchDir dir;
  for (const char* model : {"llama-F32.gguf", "llama-Q4_0.gguf"}) {
    SCOPED_TRACE(model);
    for (bool f16 : {false, true}) {
      const auto [elastic, path] = elastic_with_adapter(dir, model, f16);
      for (int threads : {1, 3}) {
        SCOPED_TRACE((f16 ? "F16, " : "F32, ") + std::to_string(threads) + " threads");
        auto dev = hal::cpu::make_cpu_device(threads);
        auto m = load_model(elastic, *dev);
        auto a = load_adapter(path, *m, *dev);
        const auto tokens = probe_tokens(*m, 21);
        Forward fused(*m, *dev, 8), separate(*m, *dev, 8);
        separate.set_fuse_lora(false);
        for (Forward* f : {&fused, &separate}) ASSERT_TRUE(f->set_adapters({a.get()}).ok() && f->set_adapter(0).ok());
        for (int lv : {0, 1}) {
          ASSERT_TRUE(fused.set_level(lv).ok() && separate.set_level(lv).ok());
          const auto want = logits_of(separate, *m, tokens);
          EXPECT_TRUE(same_bits(logits_of(fused, *m, tokens), want)) << "level " << lv << ": " << max_diff(logits_of(fused, *m, tokens), want);
        }
      }
    }
  }
}

// OpenCL folds them too (OpCall::lora: the A products in one launch, each B product added by
// the GEMV that makes it, or by one more launch after the GEMM of a prompt): the same bits as
// its separate graph ops, for F32 and F16 adapters, at a level and in full, prompts in
// micro-batches of 8 and decode steps.
TEST(LoraForward, OnOpenClBranchesFoldedGiveTheSeparateOpsBits) {
  ScratchDir dir;
  auto dev = hal::open_device("opencl", hal::DeviceOptions{1});
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  ASSERT_TRUE((*dev)->fuses_lora());
  for (const char* model : {"llama-F32.gguf", "llama-Q4_0.gguf"}) {
    SCOPED_TRACE(model);
    for (bool f16 : {false, true}) {
      SCOPED_TRACE(f16 ? "F16" : "F32");
      const auto [elastic, path] = elastic_with_adapter(dir, model, f16);
      auto m = load_model(elastic, **dev);
      auto a = load_adapter(path, *m, **dev);
      const auto tokens = probe_tokens(*m, 21);
      Forward fused(*m, **dev, 8), separate(*m, **dev, 8);
      separate.set_fuse_lora(false);
      for (Forward* f : {&fused, &separate}) ASSERT_TRUE(f->set_adapters({a.get()}).ok() && f->set_adapter(0).ok());
      for (int lv : {0, 1}) {
        ASSERT_TRUE(fused.set_level(lv).ok() && separate.set_level(lv).ok());
        const auto want = logits_of(separate, *m, tokens), got = logits_of(fused, *m, tokens);
        EXPECT_TRUE(same_bits(got, want)) << "level " << lv << ": " << max_diff(got, want);
        EXPECT_LT(fused.figures().devices.at(0).ops, separate.figures().devices.at(0).ops) << "the branches' ops left out";
      }
    }
  }
}

// A device that does not fuse branches gets Device::matmul_lora's default: the same separate
// matmuls, scale and add, so the same bits as the CPU's fused region.
TEST(LoraForward, TheDefaultMatmulLoraIsTheFusedOnesBits) {
  ScratchDir dir;
  const std::string base = test_model("llama-Q4_0.gguf");
  RandomLora l = random_lora(base, 8, 16.0f, kAll, 41);
  make_f16(l);
  write_adapter(l, "llama", dir.file("a.gguf"));
  auto dev = hal::cpu::make_cpu_device(2);
  auto m = load_model(base, *dev);
  auto a = load_adapter(dir.file("a.gguf"), *m, *dev);
  const hal::PreparedWeight* ws[2] = {model_weight(*m, weight_id(0, WeightSlot::gate)),
                                      model_weight(*m, weight_id(0, WeightSlot::up))};
  const hal::Device::LoraBranch branches[2] = {
      {0, a->weight(-1, 0, LoraMatrix::gate, LoraPart::a), a->weight(-1, 0, LoraMatrix::gate, LoraPart::b), a->scale()},
      {1, a->weight(-1, 0, LoraMatrix::up, LoraPart::a), a->weight(-1, 0, LoraMatrix::up, LoraPart::b), a->scale()}};
  const int tokens = 3;
  const int64_t cols = ws[0]->ref().cols, rows = ws[0]->ref().rows;
  std::vector<float> x(static_cast<size_t>(tokens * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 7919 % 2001) - 1000) / 1000.0f;
  std::vector<float> f0(static_cast<size_t>(tokens * rows)), f1(f0.size()), d0(f0.size()), d1(f0.size()), p0(f0.size()), p1(f0.size());
  float* fused[2] = {f0.data(), f1.data()};
  float* plain_ys[2] = {d0.data(), d1.data()};
  float* base_ys[2] = {p0.data(), p1.data()};
  dev->matmul_lora(ws, fused, 2, x.data(), tokens, branches, 2);
  dev->hal::Device::matmul_lora(ws, plain_ys, 2, x.data(), tokens, branches, 2);
  dev->matmul_multi(ws, base_ys, 2, x.data(), tokens);
  EXPECT_TRUE(same_bits(f0, d0) && same_bits(f1, d1));
  EXPECT_GT(max_diff(f0, p0), 1e-3);  // the branches did add something
}

}  // namespace
}  // namespace llmsvc::test
