// SPDX-License-Identifier: Apache-2.0
// A model split across two CPU devices with their own memory pools ("cpu" and "cpu:1"), by
// layer and by op, gives the very bits one device gives (logits of a prompt, then greedy
// tokens), with the transfers counted; a device that lacks an op has it run elsewhere; step
// shapes are prepared once and reused; a device out of memory fails the call cleanly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include "hal/devices/device_registry.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/graph/forward.h"
#include "tests/common/test_paths.h"
#include "tests/golden/golden_file.h"

namespace llmsvc {
namespace {

constexpr int kPrompt = 40, kDecode = 12;

std::vector<int32_t> prompt_tokens(const Model& model) {
  std::ifstream in(test::data_dir() + "/golden/ppl_text.txt", std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  auto ids = model.tokenizer().encode(text, true, false);
  ids.resize(kPrompt);
  return ids;
}

struct Outcome {
  std::vector<float> prompt_logits;  // every prompt row
  std::vector<int32_t> tokens;       // greedy continuation
};

// The prompt (all logits, micro-batches of 16 so several shapes run), then greedy decoding.
Outcome run(Forward& fwd, const Model& model) {
  const ModelConfig& c = model.config();
  policy::KvChunkStore store(policy::KvGeometry{c.n_layer, c.n_head_kv, c.head_dim, 16}, 0);
  policy::KvSequence seq(store);
  Outcome o;
  const auto prompt = prompt_tokens(model);
  Status s = fwd.eval(seq, prompt, 0, true, o.prompt_logits);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<float> logits(o.prompt_logits.end() - c.n_vocab, o.prompt_logits.end());
  for (int i = 0; i < kDecode && s.ok(); ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    o.tokens.push_back(next);
    const int32_t one[] = {next};
    s = fwd.eval(seq, one, kPrompt + i, false, logits);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  return o;
}

class GraphSplit : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    loaded_ = test::load_model(test::load_golden(GetParam()));
    ASSERT_TRUE(loaded_.model) << GetParam();
    auto b = hal::open_device("cpu:1", hal::DeviceOptions{2});
    ASSERT_TRUE(b.ok());
    b_ = std::move(b).value();
    Forward one(*loaded_.model, *loaded_.device, 16);
    reference_ = run(one, *loaded_.model);
  }

  // The model split by `spec` over its own device and cpu:1.
  void expect_identical(const std::string& spec) {
    SCOPED_TRACE(spec);
    const int n_layer = loaded_.model->config().n_layer;
    auto rule = hal::parse_placement(spec, n_layer, 2);
    ASSERT_TRUE(rule.ok()) << rule.status().message();
    hal::Device* devices[] = {loaded_.device.get(), b_.get()};
    auto fwd = Forward::create(*loaded_.model, devices, *rule, 16);
    ASSERT_TRUE(fwd.ok()) << fwd.status().message();
    const Outcome got = run(**fwd, *loaded_.model);
    ASSERT_EQ(got.prompt_logits.size(), reference_.prompt_logits.size());
    EXPECT_EQ(std::memcmp(got.prompt_logits.data(), reference_.prompt_logits.data(), got.prompt_logits.size() * 4), 0);
    EXPECT_EQ(got.tokens, reference_.tokens);
    // Transfers: counted on the device they move into, and both devices did work.
    const GraphFigures& f = (*fwd)->figures();
    ASSERT_EQ(f.devices.size(), 2u);
    EXPECT_GT(f.copies_per_step, 0);
    EXPECT_GT(f.devices[0].ops, 0u);
    EXPECT_GT(f.devices[1].ops, 0u);
    EXPECT_GT(f.devices[0].bytes, 0u);
    EXPECT_GT(f.devices[1].bytes, 0u);
    EXPECT_GT(f.devices[1].transfers, 0u);
    EXPECT_GT(f.devices[1].transfer_bytes, 0u);
    EXPECT_GT(b_->memory().used(), 0u);  // its activations live in its own pool
  }

  test::LoadedModel loaded_;
  std::unique_ptr<hal::Device> b_;  // the second device
  Outcome reference_;
};

TEST_P(GraphSplit, ByLayerGivesTheSameBits) {
  expect_identical("layers:" + std::to_string(loaded_.model->config().n_layer / 2));
}

TEST_P(GraphSplit, ByOpGivesTheSameBits) {
  expect_identical("ops:attention+store_kv");
  expect_identical("ops:matmul");
  expect_identical("ops:rms_norm+rope+add+swiglu+geglu");
}

INSTANTIATE_TEST_SUITE_P(Models, GraphSplit, ::testing::Values("SmolLM2-135M-Instruct.Q4_1", "qwen2-Q4_K", "gemma3-Q8_0"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// A device that runs every op but attention: the real CPU device behind a narrower capability
// list, as an accelerator without an attention kernel would report.
class NoAttention final : public hal::Device {
 public:
  // Faster at matmuls than the CPU, as an accelerator would say: placement brings them back.
  explicit NoAttention(hal::Device& d) : d_(d), caps_(d.caps()) {
    caps_.ops &= ~hal::op_bit(hal::OpKind::attention);
    caps_.matmul_gflops = 1000;
  }
  hal::DeviceKind kind() const override { return d_.kind(); }
  std::string name() const override { return "no-attention " + d_.name(); }
  const hal::Capabilities& caps() const override { return caps_; }
  bool supports(hal::WeightType t) const override { return d_.supports(t); }
  hal::MemoryPool& memory() override { return d_.memory(); }
  hal::Queue& queue() override { return d_.queue(); }
  Result<std::unique_ptr<hal::PreparedWeight>> prepare_weight(const hal::WeightRef& w) override { return d_.prepare_weight(w); }
  void matmul(const hal::PreparedWeight& w, const float* x, int n, float* y) override { d_.matmul(w, x, n, y); }
  void matmul_multi(const hal::PreparedWeight* const* ws, float* const* ys, int n, const float* x, int t) override {
    d_.matmul_multi(ws, ys, n, x, t);
  }
  void get_rows(const hal::WeightRef& w, const int32_t* ids, int n, float* out) override { d_.get_rows(w, ids, n, out); }
  void rms_norm(const float* x, const float* w, int r, int dim, float eps, float* out) override { d_.rms_norm(x, w, r, dim, eps, out); }
  void rope(float* x, int n, int h, int hd, int rot, const int32_t* p, float b, float s, hal::RopeStyle st) override {
    d_.rope(x, n, h, hd, rot, p, b, s, st);
  }
  void swiglu(float* g, const float* u, size_t n) override { d_.swiglu(g, u, n); }
  void geglu(float* g, const float* u, size_t n) override { d_.geglu(g, u, n); }
  void attention(const float*, int, const int32_t*, const hal::KvChunkView*, int, const hal::AttentionParams&, float*) override {
    ADD_FAILURE() << "attention ran on a device that does not offer it";
  }
  void store_f16(const float* s, uint16_t* d, size_t n) override { d_.store_f16(s, d, n); }
  void add(float* y, const float* x, size_t n) override { d_.add(y, x, n); }
  void add_bias(float* y, const float* b, int r, int dim) override { d_.add_bias(y, b, r, dim); }
  void scale(float* x, size_t n, float s) override { d_.scale(x, n, s); }

 private:
  hal::Device& d_;
  hal::Capabilities caps_;
};

class GraphFallback : public GraphSplit {};

TEST_P(GraphFallback, AttentionGoesToTheCpuWhenTheFirstDeviceLacksIt) {
  NoAttention limited(*b_);
  hal::Device* devices[] = {&limited, loaded_.device.get()};  // the embedder's preference: the limited one
  auto fwd = Forward::create(*loaded_.model, devices, hal::PlacementRule{}, 16);
  ASSERT_TRUE(fwd.ok()) << fwd.status().message();
  for (const hal::Op& op : (*fwd)->graph().ops) {
    if (op.kind == hal::OpKind::attention) {
      EXPECT_EQ(op.device, 1);
    }
    if (op.kind == hal::OpKind::matmul) {
      EXPECT_EQ(op.device, 0);
    }
  }
  const Outcome got = run(**fwd, *loaded_.model);
  EXPECT_EQ(std::memcmp(got.prompt_logits.data(), reference_.prompt_logits.data(), got.prompt_logits.size() * 4), 0);
  EXPECT_EQ(got.tokens, reference_.tokens);
  EXPECT_GT((*fwd)->figures().devices[1].transfers, 0u);
}

INSTANTIATE_TEST_SUITE_P(Models, GraphFallback, ::testing::Values("SmolLM2-135M-Instruct.Q4_1"));

TEST(GraphPrepared, AStepShapePreparedAheadIsReusedAcrossCalls) {
  auto m = test::load_model(test::load_golden("SmolLM2-135M-Instruct.Q4_1"));
  ASSERT_TRUE(m.model);
  Forward fwd(*m.model, *m.device, 16);
  // Prepared ahead: the prompt's shapes (16 and 8 tokens, every row out) and decoding's (1, 1).
  ASSERT_TRUE(fwd.prepare(16, 16).ok());
  ASSERT_TRUE(fwd.prepare(8, 8).ok());
  ASSERT_TRUE(fwd.prepare(1, 1).ok());
  EXPECT_FALSE(fwd.prepare(17, 1).ok());
  EXPECT_FALSE(fwd.prepare(4, 5).ok());
  const uint64_t after_warm_up = fwd.figures().preparations;
  EXPECT_EQ(after_warm_up, 3u);
  run(fwd, *m.model);  // nothing left to prepare
  EXPECT_EQ(fwd.figures().preparations, after_warm_up);
  const uint64_t runs = fwd.figures().runs;
  run(fwd, *m.model);  // a second call over a new context: the same shapes
  EXPECT_EQ(fwd.figures().preparations, after_warm_up);
  EXPECT_EQ(fwd.figures().runs, 2 * runs);
}

TEST(GraphMemory, ADeviceOutOfMemoryFailsTheCallCleanly) {
  auto m = test::load_model(test::load_golden("SmolLM2-135M-Instruct.Q4_1"));
  ASSERT_TRUE(m.model);
  const ModelConfig& c = m.model->config();
  // cpu:1 with 64 KiB: the layers placed there cannot have their activations.
  auto small = hal::open_device("cpu:1", hal::DeviceOptions{1, 64 << 10});
  ASSERT_TRUE(small.ok());
  hal::Device* devices[] = {m.device.get(), small->get()};
  auto rule = hal::parse_placement("layers:1", c.n_layer, 2);
  ASSERT_TRUE(rule.ok());
  auto fwd = Forward::create(*m.model, devices, *rule, 16);
  ASSERT_TRUE(fwd.ok()) << fwd.status().message();
  policy::KvChunkStore store(policy::KvGeometry{c.n_layer, c.n_head_kv, c.head_dim, 16}, 0);
  policy::KvSequence seq(store);
  std::vector<float> logits;
  const auto prompt = prompt_tokens(*m.model);
  Status s = (*fwd)->eval(seq, prompt, 0, false, logits);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::out_of_memory);
  EXPECT_NE(s.message().find("cpu:1"), std::string::npos) << s.message();
  EXPECT_EQ((*small)->memory().used(), 0u);

  // KV chunks in a pool too small for them: the sequence cannot grow, and says so.
  auto kv_dev = hal::open_device("cpu:1", hal::DeviceOptions{1, 4096});
  ASSERT_TRUE(kv_dev.ok());
  policy::KvChunkStore tiny(policy::KvGeometry{c.n_layer, c.n_head_kv, c.head_dim, 16}, 0, policy::EvictionOrder::lctru,
                            &(*kv_dev)->memory());
  policy::KvSequence seq2(tiny);
  Forward one(*m.model, *m.device, 16);
  s = one.eval(seq2, prompt, 0, false, logits);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::out_of_memory);
  EXPECT_EQ(tiny.used_bytes(), 0u);
  // The same Forward still serves a sequence whose memory is there.
  policy::KvSequence seq3(store);
  EXPECT_TRUE(one.eval(seq3, prompt, 0, false, logits).ok());
}

}  // namespace
}  // namespace llmsvc
