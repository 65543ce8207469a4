// SPDX-License-Identifier: Apache-2.0
// The whole model on an OpenCL device (PoCL here and in CI; a GPU driver where there is one)
// against the CPU backend on the same GGUF: every golden model (each weight type, llama, qwen2,
// gemma3, SmolLM2), logits of a prompt in several micro-batch shapes (max abs difference and
// KL divergence per position), top-1 agreement, then greedy decoding. The KV cache stays in the
// device's arena; the attention mass the policy reads comes back from the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "hal/devices/device_registry.h"
#include "hal/opencl/cl_device.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/graph/forward.h"
#include "tests/common/test_paths.h"
#include "tests/golden/golden_file.h"
#include "tests/opencl/logit_compare.h"

namespace llmsvc {
namespace {

constexpr int kPrompt = 48, kDecode = 8, kBatch = 16;
// A greedy step whose two best logits are closer than this is a tie for the comparison (logit
// units; SmolLM2's logits move by up to ~2.4 at single positions between the CPU and the device).
constexpr float kTieMargin = 0.5f;

std::vector<int32_t> prompt_tokens(const Model& model, int n) {
  std::ifstream in(test::data_dir() + "/golden/ppl_text.txt", std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  auto ids = model.tokenizer().encode(text, true, false);
  ids.resize(std::min<size_t>(ids.size(), n));
  return ids;
}

struct Outcome {
  std::vector<float> prompt_logits;  // every prompt row
  std::vector<int32_t> tokens;       // greedy continuation (each step's argmax)
  std::vector<float> decode_logits;  // every decode step's row (the GEMVs of decode)
  std::vector<float> margins;        // per greedy step: the chosen logit over the runner-up
  std::vector<float> mass;           // attention mass of the prompt's positions, after the run
};

// got's greedy tokens are want's, up to a step where want's two best logits nearly tie: such a
// step may go either way under any change of rounding (the CPU's own micro-batch size flips
// some), and past it the continuations differ by right.
void expect_same_greedy(const Outcome& want, const Outcome& got) {
  ASSERT_EQ(got.tokens.size(), want.tokens.size());
  for (size_t i = 0; i < want.tokens.size(); ++i) {
    if (got.tokens[i] == want.tokens[i]) continue;
    EXPECT_LT(want.margins[i], kTieMargin) << "greedy step " << i << " differs where the first run's choice leads by "
                                           << want.margins[i];
    break;
  }
}

// feed: the tokens to decode (another run's greedy ones, so that both runs' decode logits are of
// the same sequence); null: each step's own argmax.
Outcome run(Forward& fwd, const Model& model, hal::MemoryPool* kv_memory, const std::vector<int32_t>* feed = nullptr) {
  const ModelConfig& c = model.config();
  policy::KvChunkStore store(policy::KvGeometry{c.n_layer, c.n_head_kv, c.head_dim, 16}, 0,
                             policy::EvictionOrder::lctru, kv_memory);
  policy::KvSequence seq(store);
  Outcome o;
  const auto prompt = prompt_tokens(model, kPrompt);
  Status s = fwd.eval(seq, prompt, 0, true, o.prompt_logits);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<float> logits(o.prompt_logits.end() - c.n_vocab, o.prompt_logits.end());
  for (int i = 0; i < kDecode && s.ok(); ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    float second = -INFINITY;
    for (size_t v = 0; v < logits.size(); ++v)
      if (static_cast<int32_t>(v) != next) second = std::max(second, logits[v]);
    o.tokens.push_back(next);
    o.margins.push_back(logits[static_cast<size_t>(next)] - second);
    const int32_t one[] = {feed ? (*feed)[static_cast<size_t>(i)] : next};
    s = fwd.eval(seq, one, kPrompt + i, false, logits);
    EXPECT_TRUE(s.ok()) << s.message();
    o.decode_logits.insert(o.decode_logits.end(), logits.begin(), logits.end());
  }
  for (int ch = 0; ch * 16 < kPrompt; ++ch)
    for (int j = 0; j < 16 && ch * 16 + j < kPrompt; ++j) o.mass.push_back(seq.mass(ch)[j]);
  return o;
}

class ClForward : public ::testing::TestWithParam<std::string> {};

TEST_P(ClForward, LogitsAndTokensFollowTheCpu) {
  const test::Golden g = test::load_golden(GetParam());
  test::LoadedModel cpu = test::load_model(g);
  ASSERT_TRUE(cpu.model);
  auto dev = hal::open_device("opencl", hal::DeviceOptions{1});
  ASSERT_TRUE(dev.ok()) << dev.status().message() << " (install pocl-opencl-icd: tools/scripts/install_deps.sh)";
  auto gpu_model = Model::load(g.model_path, **dev);
  ASSERT_TRUE(gpu_model.ok()) << gpu_model.status().message();

  Forward cpu_fwd(*cpu.model, *cpu.device, kBatch);
  const Outcome want = run(cpu_fwd, *cpu.model, nullptr);
  Forward gpu_fwd(**gpu_model, **dev, kBatch);
  const Outcome got = run(gpu_fwd, **gpu_model, &(*dev)->kv_memory(), &want.tokens);

  const int V = cpu.model->config().n_vocab;
  ASSERT_EQ(got.prompt_logits.size(), want.prompt_logits.size());
  // The CPU quantizes activations to 8 bits for its dot products and rounds attention's query
  // and accumulator to f16 (as llama.cpp does); the device multiplies in f32 and sums in other
  // orders (its norms, RoPE and elementwise ops give the CPU's bits). Measured on PoCL: KL mean
  // 0.0025..0.0063, max 0.04, max |d| under 7 % of the logit scale (SmolLM2 amplifies a
  // one-ulp change of any op to about this much); the bounds leave 3x. The random-weight
  // models' distributions are nearly flat (their top two often tie within the rounding); the
  // real model's argmax must hold.
  const bool real = GetParam().starts_with("SmolLM2");
  // The decode steps (one token: the GEMVs, the int8 one by default) of the CPU's greedy tokens
  // are held to the same bounds but top-1: the real model's near-ties there are checked below.
  const auto expect_follows_cpu = [&](const Outcome& o, const char* run) {
    test::LogitFigures first;
    for (bool decode : {false, true}) {
      const test::LogitFigures f = decode ? test::compare_logits(want.decode_logits, o.decode_logits, V)
                                          : test::compare_logits(want.prompt_logits, o.prompt_logits, V);
      std::printf("%s (%s%s): %d positions, max |dlogit| %.5f (logit scale %.2f), KL mean %.3g max %.3g, top-1 %d/%d\n",
                  GetParam().c_str(), run, decode ? ", decode" : "", f.rows, f.max_abs, f.scale, f.mean_kl, f.max_kl,
                  f.top1_agree, f.rows);
      EXPECT_LT(f.max_abs, 0.2 * f.scale) << run << (decode ? ", decode" : "");
      EXPECT_LT(f.mean_kl, 0.02) << run << (decode ? ", decode" : "");
      EXPECT_LT(f.max_kl, 0.12) << run << (decode ? ", decode" : "");
      if (!decode) {
        EXPECT_GE(f.top1_agree, real ? f.rows - 1 : f.rows * 4 / 5) << run;
      }
      if (!decode) first = f;
    }
    return first;
  };
  const test::LogitFigures f = expect_follows_cpu(got, "key mass tracked");
  RecordProperty("max_abs", std::to_string(f.max_abs));
  RecordProperty("mean_kl", std::to_string(f.mean_kl));
  // Greedy decoding: the CPU's tokens (expect_same_greedy); decoding the CPU's tokens, every
  // step's choice where the CPU's does not nearly tie.
  if (real) {
    std::printf("greedy: the CPU's margins");
    for (float m : want.margins) std::printf(" %.3f", m);
    std::printf("\n");
    expect_same_greedy(want, got);
    for (size_t i = 0; i < want.tokens.size(); ++i) {
      if (want.margins[i] >= kTieMargin) {
        EXPECT_EQ(got.tokens[i], want.tokens[i]) << "decode step " << i;
      }
    }
  }
  // Attention mass came back from the device for every prompt position: in all the same (each
  // query row's weights sum to one per head and layer), spread over the keys as the CPU spreads
  // it up to the two runs' own difference of softmax.
  ASSERT_EQ(got.mass.size(), want.mass.size());
  double total_got = 0, total_want = 0, l1 = 0;
  for (size_t i = 0; i < got.mass.size(); ++i) {
    total_got += got.mass[i], total_want += want.mass[i];
    l1 += std::fabs(got.mass[i] - want.mass[i]);
  }
  EXPECT_NEAR(total_got, total_want, 1e-2 * total_want);  // decode queries put some on their own positions
  EXPECT_LT(l1 / total_want, 0.05);
  // Without mass tracking (as the engine runs a GPU whose KV the policy does not compress) decode
  // steps take the one-launch attention kernel, and a prompt the tensor-core one where the GPU
  // has it (its sums in another order): as close to the CPU, the same tokens up to a near-tie.
  Forward lean_fwd(**gpu_model, **dev, kBatch);
  lean_fwd.set_mass_tracking(false);
  const Outcome lean = run(lean_fwd, **gpu_model, &(*dev)->kv_memory(), &want.tokens);
  expect_follows_cpu(lean, "no key mass");
  expect_same_greedy(got, lean);
  // A decode step's attention writes the o-projection's int8 input itself (one launch fewer a
  // layer) where that GEMV is the int8 one and a work-group's outputs are whole blocks: every
  // model of blocks of 32 here. LLMSVC_CL_ATTN_Q8=0 keeps the launch of its own (and
  // LLMSVC_CL_ROPE_SCALE=0 Gemma-3's q scale apart from the RoPE + store): as close to the CPU,
  // the same tokens up to a near-tie.
  const auto* cl = dynamic_cast<const hal::opencl::ClDevice*>(dev->get());
  ASSERT_NE(cl, nullptr);
  const int64_t fused = cl->attention_q8_fused();
  std::printf("%s: %lld attention launches wrote the o-projection's int8 input\n", GetParam().c_str(),
              static_cast<long long>(fused));
  const ModelConfig& mc = cpu.model->config();
  const std::string& name = GetParam();
  const bool blocks_of_32 = name.find("_K") == std::string::npos && name.find("F16") == std::string::npos &&
                            name.find("F32") == std::string::npos && name.find("BF16") == std::string::npos;
  if (blocks_of_32) {
    EXPECT_EQ(fused, int64_t{2} * kDecode * mc.n_layer);  // two runs' decode steps, every layer
  }
  ::setenv("LLMSVC_CL_ATTN_Q8", "0", 1);
  ::setenv("LLMSVC_CL_ROPE_SCALE", "0", 1);
  auto plain_dev = hal::open_device("opencl", hal::DeviceOptions{1});
  ::unsetenv("LLMSVC_CL_ATTN_Q8");
  ::unsetenv("LLMSVC_CL_ROPE_SCALE");
  ASSERT_TRUE(plain_dev.ok()) << plain_dev.status().message();
  auto plain_model = Model::load(g.model_path, **plain_dev);
  ASSERT_TRUE(plain_model.ok()) << plain_model.status().message();
  Forward plain_fwd(**plain_model, **plain_dev, kBatch);
  const Outcome plain = run(plain_fwd, **plain_model, &(*plain_dev)->kv_memory(), &want.tokens);
  expect_follows_cpu(plain, "decode fusions off");
  expect_same_greedy(got, plain);
  EXPECT_EQ(dynamic_cast<const hal::opencl::ClDevice&>(**plain_dev).attention_q8_fused(), 0);
  // The KV cache lived in the device's arena, activations and weights in its pool.
  EXPECT_GT((*dev)->kv_memory().peak(), 0u);
  EXPECT_EQ((*dev)->kv_memory().used(), 0u);
  EXPECT_GT((*dev)->memory().used(), 0u);
}

// The real models over windows of 1,024 positions of a real text (each from BOS): perplexity
// against the CPU's, the logits' divergence over every position, top-1 agreement. (Release
// only: PoCL on two cores takes a minute or two a window.)
//
// One window's perplexity moves with any change of rounding, the CPU's own included: between
// micro-batches of 256 and 1 the CPU moved by -0.41 / +0.83 / +0.31 / -0.16 % on Gemma-3-270M's
// first four windows, the device (PoCL) by -0.96 / +1.50 / +0.30 / -0.49 %, an H100 (its
// tensor cores round to f16 as well) by -1.50 / +0.80 / +1.33 / -0.38 %; the logits are as far
// from the CPU's, by KL, as the CPU's two batch sizes are from each other. Over the four
// windows: CPU +0.14 %, PoCL +0.08 %, H100 +0.05 % (SmolLM2: +0.27 %, -0.03 %, +0.16 %). So the
// bound of issue 21 (0.5 %) holds for the mean over LLMSVC_CL_PPL_WINDOWS=4 windows; CI runs one
// window per model and holds it to the single-window spread measured above.
class ClPerplexity : public ::testing::TestWithParam<std::string> {};

TEST_P(ClPerplexity, FollowsTheCpuOverWindowsOf1024Positions) {
  constexpr int kPositions = 1024;
  const char* env = std::getenv("LLMSVC_CL_PPL_WINDOWS");
  const int windows = env ? std::clamp(std::atoi(env), 1, 8) : 1;
  const std::string path = GetParam() == "smollm2" ? test::default_model_path() : test::gemma_model_path();
  // tools/scripts/test.sh fetches both models: one missing is a failure, not a skip.
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is not fetched (tools/scripts/fetch_model.sh, fetch_gemma.sh)";
  auto cpu_dev = hal::open_device("cpu", hal::DeviceOptions{2});
  ASSERT_TRUE(cpu_dev.ok());
  auto cpu_model = Model::load(path, **cpu_dev);
  ASSERT_TRUE(cpu_model.ok()) << cpu_model.status().message();
  auto dev = hal::open_device("opencl", hal::DeviceOptions{1});
  ASSERT_TRUE(dev.ok()) << dev.status().message();
  auto gpu_model = Model::load(path, **dev);
  ASSERT_TRUE(gpu_model.ok()) << gpu_model.status().message();
  const ModelConfig& c = (*cpu_model)->config();
  const auto text = prompt_tokens(**cpu_model, windows * kPositions + 1);
  ASSERT_EQ(text.size(), size_t(windows * kPositions + 1));
  const int V = c.n_vocab;
  Forward cpu_fwd(**cpu_model, **cpu_dev, 256);
  Forward gpu_fwd(**gpu_model, **dev, 256);
  double d_nll = 0;  // summed over windows: log(perplexity ratio) per window
  for (int w = 0; w < windows; ++w) {
    // Window w: BOS, then the text's positions 1024 w + 1 ..; the last one only as a target.
    std::vector<int32_t> ids(text.begin() + w * kPositions, text.begin() + (w + 1) * kPositions + 1);
    ids[0] = text[0];
    const std::span<const int32_t> input(ids.data(), kPositions);
    auto logits_of = [&](Forward& fwd) {
      policy::KvChunkStore store(policy::KvGeometry{c.n_layer, c.n_head_kv, c.head_dim, 16}, 0,
                                 policy::EvictionOrder::lctru, &fwd.kv_memory());
      policy::KvSequence seq(store);
      std::vector<float> logits;
      const Status s = fwd.eval(seq, input, 0, true, logits);
      EXPECT_TRUE(s.ok()) << s.message();
      return logits;
    };
    auto nll = [&](const std::vector<float>& logits) {
      double sum = 0;
      for (int i = 0; i < kPositions; ++i) sum -= test::log_prob(logits.data() + size_t(i) * V, V, ids[i + 1]);
      return sum / kPositions;
    };
    const std::vector<float> want = logits_of(cpu_fwd);
    const std::vector<float> got = logits_of(gpu_fwd);
    ASSERT_EQ(got.size(), want.size());
    const double n_cpu = nll(want), n_gpu = nll(got);
    d_nll += n_gpu - n_cpu;
    const test::LogitFigures f = test::compare_logits(want, got, V);
    std::printf("%s window %d (%d positions): perplexity cpu %.4f opencl %.4f (%+.3f %%); max |dlogit| %.4f, KL mean "
                "%.3g max %.3g, top-1 %d/%d\n", GetParam().c_str(), w, kPositions, std::exp(n_cpu), std::exp(n_gpu),
                100 * (std::exp(n_gpu - n_cpu) - 1), f.max_abs, f.mean_kl, f.max_kl, f.top1_agree, f.rows);
    // The CPU's two micro-batch sizes (256 and 1) agree on the argmax at 957-994 of Gemma-3's
    // 1,024 positions per window and differ by KL 0.005-0.030; the device is held to that.
    EXPECT_LT(f.mean_kl, 0.04);
    EXPECT_GE(f.top1_agree, f.rows * 92 / 100);
  }
  const double change = std::exp(d_nll / windows) - 1;
  std::printf("%s over %d window(s): perplexity %+.3f %% against the CPU's\n", GetParam().c_str(), windows, 100 * change);
  // One window: SmolLM2 +0.37 % (PoCL) / +0.72 % (H100), Gemma-3 -0.96 % / -1.50 % (see above).
  const double bound = windows >= 4 ? 0.005 : GetParam() == "smollm2" ? 0.01 : 0.02;
  EXPECT_LT(std::fabs(change), bound);
}

INSTANTIATE_TEST_SUITE_P(RealModels, ClPerplexity, ::testing::Values("smollm2", "gemma3_270m"));

// The OpenCL device's host-pointer ops (for callers outside the graph: each stages its operands
// through device buffers) give what the CPU's give: exactly for the elementwise ops, norms,
// RoPE and the f16 store, to float rounding for attention and matmul.
TEST(ClDeviceHostOps, FollowTheCpu) {
  auto gpu = hal::open_device("opencl", hal::DeviceOptions{1});
  auto cpu = hal::open_device("cpu", hal::DeviceOptions{1});
  ASSERT_TRUE(gpu.ok() && cpu.ok());
  hal::Device& g = **gpu;
  hal::Device& c = **cpu;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return v;
  };
  const int rows = 3, dim = 128;
  const auto x = random(rows * dim), w = random(dim), y0 = random(rows * dim);
  {
    std::vector<float> a(x.size()), b(x.size());
    g.rms_norm(x.data(), w.data(), rows, dim, 1e-6f, a.data());
    c.rms_norm(x.data(), w.data(), rows, dim, 1e-6f, b.data());
    EXPECT_EQ(a, b);
  }
  {
    std::vector<float> a = x, b = x;
    const int32_t pos[rows] = {0, 7, 300};
    g.rope(a.data(), rows, 2, 64, 64, pos, 10000.0f, 1.0f, hal::RopeStyle::neox);
    c.rope(b.data(), rows, 2, 64, 64, pos, 10000.0f, 1.0f, hal::RopeStyle::neox);
    EXPECT_EQ(a, b);
  }
  for (int op = 0; op < 5; ++op) {
    std::vector<float> a = y0, b = y0;
    auto both = [&](auto f) { f(g, a.data()), f(c, b.data()); };
    if (op == 0) both([&](hal::Device& d, float* p) { d.add(p, x.data(), x.size()); });
    if (op == 1) both([&](hal::Device& d, float* p) { d.swiglu(p, x.data(), x.size()); });
    if (op == 2) both([&](hal::Device& d, float* p) { d.geglu(p, x.data(), x.size()); });
    if (op == 3) both([&](hal::Device& d, float* p) { d.scale(p, x.size(), 0.37f); });
    if (op == 4) both([&](hal::Device& d, float* p) { d.add_bias(p, w.data(), rows, dim); });
    EXPECT_EQ(a, b) << "op " << op;
  }
  {
    std::vector<uint16_t> a(dim), b(dim);
    g.store_f16(x.data(), a.data(), dim);
    c.store_f16(x.data(), b.data(), dim);
    EXPECT_EQ(a, b);
  }
  {
    // Attention: 2 query tokens at positions 20, 21 over two f16 chunks of 16 (the second partial).
    const int n_head = 4, n_head_kv = 2, head_dim = 64, kv_dim = n_head_kv * head_dim;
    std::vector<uint16_t> k(32 * kv_dim), v(32 * kv_dim);
    const auto kf = random(k.size()), vf = random(v.size());
    c.store_f16(kf.data(), k.data(), k.size());
    c.store_f16(vf.data(), v.data(), v.size());
    std::vector<float> mass_g(32), mass_c(32);
    hal::KvChunkView chunks_g[2], chunks_c[2];
    for (int i = 0; i < 2; ++i) {
      chunks_g[i].k = chunks_c[i].k = k.data() + size_t(i) * 16 * kv_dim;
      chunks_g[i].v = chunks_c[i].v = v.data() + size_t(i) * 16 * kv_dim;
      chunks_g[i].n_tokens = chunks_c[i].n_tokens = i == 0 ? 16 : 6;
      chunks_g[i].first_pos = chunks_c[i].first_pos = 16 * i;
      chunks_g[i].mass = mass_g.data() + 16 * i;
      chunks_c[i].mass = mass_c.data() + 16 * i;
    }
    hal::AttentionParams p;
    p.n_head = n_head;
    p.n_head_kv = n_head_kv;
    p.head_dim = head_dim;
    p.scale = 0.125f;
    const auto q = random(2 * n_head * head_dim);
    const int32_t qpos[2] = {20, 21};
    std::vector<float> a(q.size()), b(q.size());
    g.attention(q.data(), 2, qpos, chunks_g, 2, p, a.data());
    c.attention(q.data(), 2, qpos, chunks_c, 2, p, b.data());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-3f) << i;
    for (size_t i = 0; i < mass_g.size(); ++i) EXPECT_NEAR(mass_g[i], mass_c[i], 1e-3f) << i;
  }
  {
    const auto wf = random(64 * dim);
    const hal::WeightRef ref{hal::WeightType::F32, wf.data(), 64, dim, dim * sizeof(float)};
    auto pg = g.prepare_weight(ref);
    auto pc = c.prepare_weight(ref);
    ASSERT_TRUE(pg.ok() && pc.ok());
    std::vector<float> a(rows * 64), b(rows * 64);
    g.matmul(**pg, x.data(), rows, a.data());
    c.matmul(**pc, x.data(), rows, b.data());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-3f) << i;
  }
  auto* cl = dynamic_cast<hal::opencl::ClDevice*>(&g);
  ASSERT_NE(cl, nullptr);
  EXPECT_TRUE(cl->host_op_status().ok());
}

INSTANTIATE_TEST_SUITE_P(Models, ClForward, ::testing::ValuesIn(test::golden_names()), [](const auto& info) {
  std::string n = info.param;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

// A 1 x n F32 weight is both a vector (a norm's scale: the ops read its floats) and a matrix:
// a rank-1 adapter's A is one, and its product (and a view of it, as a level takes) follows
// the CPU's. Before, the device kept such a weight as plain floats only, and a matmul on it
// failed.
TEST(ClDeviceHostOps, ARowVectorIsAMatrixToo) {
  auto gpu = hal::open_device("opencl", hal::DeviceOptions{1});
  auto cpu = hal::open_device("cpu", hal::DeviceOptions{1});
  ASSERT_TRUE(gpu.ok() && cpu.ok());
  std::vector<float> a(96), x(3 * 96);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.3f * static_cast<float>(i));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.7f * static_cast<float>(i));
  const hal::WeightRef ref{hal::WeightType::F32, a.data(), 1, 96, 96 * sizeof(float)};
  auto pg = (*gpu)->prepare_weight(ref);
  auto pc = (*cpu)->prepare_weight(ref);
  ASSERT_TRUE(pg.ok() && pc.ok()) << pg.status().message();
  for (int64_t cols : {int64_t{96}, int64_t{40}}) {
    auto vg = cols == 96 ? nullptr : std::move((*gpu)->slice_weight(**pg, 1, cols)).value();
    auto vc = cols == 96 ? nullptr : std::move((*cpu)->slice_weight(**pc, 1, cols)).value();
    std::vector<float> xs(3 * cols);
    for (int t = 0; t < 3; ++t) std::copy_n(x.begin() + t * 96, cols, xs.begin() + t * cols);
    std::vector<float> yg(3, NAN), yc(3, NAN);
    (*gpu)->matmul(vg ? *vg : **pg, xs.data(), 3, yg.data());
    (*cpu)->matmul(vc ? *vc : **pc, xs.data(), 3, yc.data());
    ASSERT_TRUE(dynamic_cast<hal::opencl::ClDevice&>(**gpu).host_op_status().ok());
    for (int t = 0; t < 3; ++t) EXPECT_NEAR(yg[t], yc[t], 1e-4f * (1.0f + std::fabs(yc[t]))) << cols << " cols, token " << t;
  }
  // (As a norm's scale, through the graph: every ClForward model's norms read such weights.)
}

// A weight's upload lives as long as what holds it: once a model is unloaded its weights go
// back to the device's pool, and a new model's tensor at the same address (a file mapped where
// the last one was) gets its own upload, not the old bytes. Before, the device kept every
// upload and matched a new tensor to an old one by address and shape.
TEST(ClDeviceHostOps, AnUnloadedWeightIsNotTakenForANewOneAtItsAddress) {
  auto gpu = hal::open_device("opencl", hal::DeviceOptions{1});
  ASSERT_TRUE(gpu.ok());
  hal::Device& g = **gpu;
  std::vector<float> bytes(64 * 64), x(64), y(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f + static_cast<float>(i % 3);
  const hal::WeightRef ref{hal::WeightType::F32, bytes.data(), 64, 64, 64 * sizeof(float)};
  float sum_x = 0;
  for (float v : x) sum_x += v;
  std::vector<uint64_t> after;  // the pool's bytes in use once each weight is gone
  for (float value : {1.0f, 2.0f, 3.0f}) {
    std::fill(bytes.begin(), bytes.end(), value);  // the same address, other contents
    {
      auto w = g.prepare_weight(ref);
      ASSERT_TRUE(w.ok()) << w.status().message();
      g.matmul(**w, x.data(), 1, y.data());
      ASSERT_TRUE(dynamic_cast<hal::opencl::ClDevice&>(g).host_op_status().ok());
      EXPECT_FLOAT_EQ(y[0], value * sum_x) << "weights of " << value;
      if (!after.empty()) {
        EXPECT_GE(g.memory().used(), after.back() + bytes.size() * sizeof(float));
      }
    }
    after.push_back(g.memory().used());
  }
  EXPECT_EQ(after[2], after[1]) << "an unloaded weight's upload is given back";
}

}  // namespace
}  // namespace llmsvc
