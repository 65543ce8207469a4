// SPDX-License-Identifier: Apache-2.0
// The elastic model end to end on committed random models: elastify writes a file whose full
// model is the input's; each level computes exactly the sub-model of its kept neurons (the
// same bits as a file physically pruned to them); switching levels leaves nothing behind;
// inconsistent elastic metadata is refused naming the field; elastify refuses bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "hal/devices/device_registry.h"
#include "hal/weight_type.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/gguf/gguf_writer.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/elastic_spec.h"
#include "runtime/core/model/weight_residency.h"
#include "tests/elastic/elastic_util.h"
#include "tests/model/bad_input_util.h"
#include "tools/elastify/elastify.h"

namespace llmsvc {
namespace {

using test::ScratchDir;
using test::small_options;

std::unique_ptr<hal::Device> cpu() {
  auto d = hal::open_device("cpu", hal::DeviceOptions{2});
  if (!d.ok()) throw std::runtime_error(d.status().message());
  return std::move(d).value();
}

std::unique_ptr<Model> load(const std::string& path, hal::Device& dev) {
  auto m = Model::load(path, dev);
  if (!m.ok()) throw std::runtime_error(path + ": " + m.status().message());
  return std::move(m).value();
}

std::vector<int32_t> probe_tokens(const Model& m, int n) {
  auto ids = m.tokenizer().encode(
      "The service owns the model, the memory and the accelerators; the applications own their conversations. "
      "In the evening the lights came on one by one, and the town was quiet again. What is the capital of France?",
      true, false);
  while (static_cast<int>(ids.size()) < n) ids.insert(ids.end(), ids.begin() + 1, ids.end());
  ids.resize(n);
  return ids;
}

// Every row's logits of `tokens` (micro-batches of 8, so several step shapes run), then the
// logits of 4 single-token decode steps; the KV chunks in kv_memory (null: the host's).
std::vector<float> logits_of(Forward& fwd, const Model& m, const std::vector<int32_t>& tokens,
                             hal::MemoryPool* kv_memory = nullptr) {
  const ModelConfig& c = m.config();
  policy::KvChunkStore store({c.n_layer, c.n_head_kv, c.head_dim, 16}, 0, policy::EvictionOrder::lctru, kv_memory);
  policy::KvSequence seq(store);
  std::vector<float> all, step;
  EXPECT_TRUE(fwd.eval(seq, tokens, 0, true, all).ok());
  for (int i = 0; i < 4; ++i) {
    const int32_t t[] = {static_cast<int32_t>(i + 5)};
    EXPECT_TRUE(fwd.eval(seq, t, static_cast<int>(tokens.size()) + i, false, step).ok());
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// `elastic` with every layer cut to its first `keep` neurons and `heads` query heads (the first
// heads / n_head_kv of each KV group) as a plain model: gate and up keep their first rows,
// down the first blocks of each row, Q the kept heads' rows and O their columns; no elastic keys.
void write_pruned(const std::string& elastic, int keep, int heads, const std::string& out) {
  auto f = gguf::GgufFile::open(elastic);
  ASSERT_TRUE(f.ok());
  const gguf::GgufFile& src = **f;
  auto w = gguf::GgufWriter::from_file(src);
  ASSERT_TRUE(w.ok());
  std::vector<std::string> elastic_keys;
  for (const auto& [k, v] : src.metadata())
    if (k.rfind(kElasticPrefix, 0) == 0) elastic_keys.push_back(k);
  for (const auto& k : elastic_keys) w->remove(k);
  const std::string arch(*src.get_string("general.architecture"));
  ASSERT_TRUE(w->set(arch + ".feed_forward_length", gguf::uint_value(gguf::ValueType::u32, keep)).ok());
  const auto n_head = static_cast<int>(*src.get_uint(arch + ".attention.head_count"));
  const auto n_kv = static_cast<int>(*src.get_uint(arch + ".attention.head_count_kv"));
  const int head_dim = static_cast<int>(src.find(arch + ".attention.key_length") ? *src.get_uint(arch + ".attention.key_length")
                                                                                  : *src.get_uint(arch + ".embedding_length") / n_head);
  ASSERT_TRUE(w->set(arch + ".attention.head_count", gguf::uint_value(gguf::ValueType::u32, heads)).ok());
  ASSERT_TRUE(w->set(arch + ".attention.key_length", gguf::uint_value(gguf::ValueType::u32, head_dim)).ok());
  ASSERT_TRUE(w->set(arch + ".attention.value_length", gguf::uint_value(gguf::ValueType::u32, head_dim)).ok());
  // The kept heads in the pruned model's grouped order: member r of group g is the file's
  // head g * (n_head / n_kv) + r.
  std::vector<int> kept_heads;
  for (int g = 0; g < n_kv; ++g)
    for (int r = 0; r < heads / n_kv; ++r) kept_heads.push_back(g * (n_head / n_kv) + r);
  ASSERT_TRUE(w->add_tensors_from(src).ok());
  std::vector<std::vector<uint8_t>> kept;  // alive until write()
  kept.reserve(64);
  for (const gguf::TensorInfo& t : src.tensors()) {
    const bool rows = t.name.ends_with("ffn_gate.weight") || t.name.ends_with("ffn_up.weight");
    const bool cols = t.name.ends_with("ffn_down.weight");
    const bool q = t.name.ends_with("attn_q.weight"), o = t.name.ends_with("attn_output.weight");
    if (!rows && !cols && !q && !o) continue;
    ASSERT_TRUE(w->remove_tensor(t.name));
    const size_t row_bytes = t.n_bytes / t.ne[1];
    std::vector<uint8_t>& b = kept.emplace_back();
    if (rows) {
      b.assign(t.data, t.data + row_bytes * keep);
      ASSERT_TRUE(w->add_tensor(t.name, t.type, {t.ne[0], static_cast<uint64_t>(keep)}, b).ok());
    } else if (cols) {
      const size_t part = hal::row_bytes(static_cast<hal::WeightType>(t.type), keep);  // whole blocks
      for (uint64_t r = 0; r < t.ne[1]; ++r) b.insert(b.end(), t.data + r * row_bytes, t.data + r * row_bytes + part);
      ASSERT_TRUE(w->add_tensor(t.name, t.type, {static_cast<uint64_t>(keep), t.ne[1]}, b).ok());
    } else if (q) {
      for (int h : kept_heads) b.insert(b.end(), t.data + h * head_dim * row_bytes, t.data + (h + 1) * head_dim * row_bytes);
      ASSERT_TRUE(w->add_tensor(t.name, t.type, {t.ne[0], static_cast<uint64_t>(heads * head_dim)}, b).ok());
    } else {
      const size_t head_bytes = hal::row_bytes(static_cast<hal::WeightType>(t.type), head_dim);  // whole blocks
      for (uint64_t r = 0; r < t.ne[1]; ++r)
        for (int h : kept_heads) b.insert(b.end(), t.data + r * row_bytes + h * head_bytes, t.data + r * row_bytes + (h + 1) * head_bytes);
      ASSERT_TRUE(w->add_tensor(t.name, t.type, {static_cast<uint64_t>(heads * head_dim), t.ne[1]}, b).ok());
    }
  }
  ASSERT_TRUE(w->write(out).ok());
}

// The same function up to summation order: every row's argmax agrees, the logits within 2 %
// of their largest magnitude.
void expect_same_function(const std::vector<float>& a, const std::vector<float>& b, int V) {
  ASSERT_EQ(a.size(), b.size());
  double max_diff = 0, max_abs = 0;
  for (size_t r = 0; r < a.size() / V; ++r) {
    const float* x = a.data() + r * V;
    const float* y = b.data() + r * V;
    EXPECT_EQ(std::max_element(x, x + V) - x, std::max_element(y, y + V) - y) << "row " << r;
    for (int v = 0; v < V; ++v) {
      max_diff = std::max<double>(max_diff, std::fabs(x[v] - y[v]));
      max_abs = std::max<double>(max_abs, std::fabs(x[v]));
    }
  }
  EXPECT_LE(max_diff, 0.02 * max_abs);
}

class Elastic : public ::testing::TestWithParam<const char*> {};

TEST_P(Elastic, FullModelIsTheInputsAndEachLevelIsExactlyItsSubModel) {
  ScratchDir dir;
  const std::string in = test::test_model(GetParam()), out = dir.file("elastic.gguf");
  elastify::Options o = small_options(in, out);
  o.anchor_share = 0;  // every layer cut alike, so a level is one plain model of n_ff = keep
  auto rep = elastify::run(o);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_TRUE(rep->anchors.empty());
  EXPECT_EQ(rep->layer_importance.size(), static_cast<size_t>(rep->n_layer));
  EXPECT_EQ(rep->argmax_agree, rep->argmax_positions);
  EXPECT_LT(std::fabs(rep->loss_out - rep->loss_in), 1e-3 * std::max(1.0, rep->loss_in));

  auto dev = cpu();
  auto original = load(in, *dev), elastic = load(out, *dev);
  ASSERT_NE(elastic->elastic(), nullptr);
  ASSERT_TRUE(elastic->levels_status().ok()) << elastic->levels_status().message();
  const ElasticSpec& spec = *elastic->elastic();
  EXPECT_EQ(spec.levels, o.levels);
  EXPECT_EQ(spec.score, "activation");
  const auto tokens = probe_tokens(*elastic, 24);

  // The full level: the input's function. down's blocks are summed in another order, and a
  // last-bit difference can move an activation's int8 rounding in a later matmul by one step:
  // most rows are the same bits, a few differ by such a step, every row's argmax agrees.
  Forward f_in(*original, *dev, 8), f_el(*elastic, *dev, 8);
  const auto a = logits_of(f_in, *original, tokens), b = logits_of(f_el, *elastic, tokens);
  expect_same_function(a, b, elastic->config().n_vocab);

  // Each level against a file pruned to its neurons and heads: the same bits where the heads
  // are in the same order. A level's heads are rank-major in memory (one of each KV group, then
  // the next), the pruned file's grouped: the orders agree where a level keeps one rank or the
  // model has one KV group. Where it keeps more, O sums its heads in another order: the same
  // function (and test_attention checks rank-major attention bit for bit).
  const ModelConfig& ec = elastic->config();
  EXPECT_EQ(spec.cuts_heads(), ec.n_head > ec.n_head_kv);
  for (int lv = 0; lv < spec.full(); lv += 3) {
    SCOPED_TRACE("level " + std::to_string(spec.levels[lv]));
    const int keep = spec.ffn_keep[lv][0];
    const int heads = spec.cuts_heads() ? spec.head_keep[lv][0] : ec.n_head;
    ASSERT_LT(keep, ec.n_ff);
    const std::string pruned_path = dir.file("pruned-" + std::to_string(lv) + ".gguf");
    write_pruned(out, keep, heads, pruned_path);
    auto pruned = load(pruned_path, *dev);
    ASSERT_EQ(pruned->config().n_ff, keep);
    ASSERT_EQ(pruned->config().n_head, heads);
    Forward f_pr(*pruned, *dev, 8);
    ASSERT_TRUE(f_el.set_level(lv).ok());
    EXPECT_EQ(f_el.level(), lv);
    const auto level = logits_of(f_el, *elastic, tokens), sub = logits_of(f_pr, *pruned, tokens);
    if (heads == ec.n_head_kv || ec.n_head_kv == 1 || !ec.q_heads_rank_major) {
      EXPECT_TRUE(same_bits(level, sub));
    } else {
      expect_same_function(level, sub, ec.n_vocab);
    }
  }
  // Back to the full level: the bits of a forward that never left it.
  ASSERT_TRUE(f_el.set_level(spec.full()).ok());
  EXPECT_EQ(f_el.level(), -1);
  EXPECT_TRUE(same_bits(logits_of(f_el, *elastic, tokens), b));
}

// The same on the OpenCL device (PoCL here, a GPU's driver on the lent machine): each level,
// through the device's weight views (its kernels' row stride apart from the columns computed)
// and rank-major attention, computes what the pruned file computes on that device.
// The pruned models' small shapes also found a race: ClDevice fused a residual add with the norm
// after it where the memory plan had put the norm's output over the add's input, a few rows
// apart, so one work-group overwrote rows another had yet to read. Each pruned model's logits
// are therefore the same bits from a second Forward too.
TEST_P(Elastic, EachLevelOnOpenClIsItsSubModelThere) {
  ScratchDir dir;
  const std::string in = test::test_model(GetParam()), out = dir.file("elastic.gguf");
  elastify::Options o = small_options(in, out);
  o.anchor_share = 0;
  ASSERT_TRUE(elastify::run(o).ok());
  auto d = hal::open_device("opencl", hal::DeviceOptions{1});
  ASSERT_TRUE(d.ok()) << d.status().message();
  hal::Device& cl = **d;
  ASSERT_TRUE(cl.caps().slices_weights);
  auto elastic = load(out, cl);
  ASSERT_TRUE(elastic->levels_status().ok()) << elastic->levels_status().message();
  const ElasticSpec& spec = *elastic->elastic();
  const ModelConfig& ec = elastic->config();
  const auto tokens = probe_tokens(*elastic, 24);
  Forward f_el(*elastic, cl, 8);
  for (int lv : {0, spec.full() / 2}) {
    SCOPED_TRACE("level " + std::to_string(spec.levels[lv]));
    const int keep = spec.ffn_keep[lv][0];
    const int heads = spec.cuts_heads() ? spec.head_keep[lv][0] : ec.n_head;
    const std::string pruned_path = dir.file("pruned-" + std::to_string(lv) + ".gguf");
    write_pruned(out, keep, heads, pruned_path);
    auto pruned = load(pruned_path, cl);
    Forward f_pr(*pruned, cl, 8);
    ASSERT_TRUE(f_el.set_level(lv).ok());
    const auto level = logits_of(f_el, *elastic, tokens, &cl.kv_memory());
    const auto sub = logits_of(f_pr, *pruned, tokens, &cl.kv_memory());
    Forward f_again(*pruned, cl, 8);
    EXPECT_TRUE(same_bits(logits_of(f_again, *pruned, tokens, &cl.kv_memory()), sub)) << "a second Forward";
    if (heads == ec.n_head_kv || ec.n_head_kv == 1 || !ec.q_heads_rank_major) {
      EXPECT_TRUE(same_bits(level, sub));
    } else {
      expect_same_function(level, sub, ec.n_vocab);
    }
  }
}

TEST_P(Elastic, AnchorsStayWholeAndLevelsSwitchWithoutResidue) {
  ScratchDir dir;
  const std::string out = dir.file("elastic.gguf");
  elastify::Options o = small_options(test::test_model(GetParam()), out);
  o.anchor_share = 0.5;
  o.heads = false;
  auto rep = elastify::run(o);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_EQ(rep->anchors.size(), static_cast<size_t>((rep->n_layer + 1) / 2));
  // The anchors are the layers whose removal cost the most.
  double min_anchor = 1e300, max_other = -1e300;
  for (int il = 0; il < rep->n_layer; ++il) {
    const bool anchor = std::find(rep->anchors.begin(), rep->anchors.end(), il) != rep->anchors.end();
    if (anchor) {
      min_anchor = std::min(min_anchor, rep->layer_importance[il]);
    } else {
      max_other = std::max(max_other, rep->layer_importance[il]);
    }
  }
  EXPECT_GE(min_anchor, max_other);

  auto dev = cpu();
  auto m = load(out, *dev);
  const ElasticSpec& spec = *m->elastic();
  EXPECT_FALSE(spec.cuts_heads());  // not asked
  for (int il = 0; il < m->config().n_layer; ++il) {
    if (!spec.anchor[il]) continue;
    for (size_t lv = 0; lv < spec.levels.size(); ++lv) EXPECT_EQ(spec.ffn_keep[lv][il], m->config().n_ff);
  }
  const auto tokens = probe_tokens(*m, 20);
  // Each level's bits on a fresh forward, then the levels visited in another order on one forward.
  std::vector<std::vector<float>> fresh;
  for (int lv = 0; lv <= spec.full(); ++lv) {
    Forward f(*m, *dev, 8);
    ASSERT_TRUE(f.set_level(lv).ok());
    fresh.push_back(logits_of(f, *m, tokens));
  }
  EXPECT_FALSE(same_bits(fresh.front(), fresh.back()));  // the smallest level is another model
  Forward f(*m, *dev, 8);
  for (int lv : {spec.full(), 0, 4, 0, spec.full(), 2}) {
    ASSERT_TRUE(f.set_level(lv).ok());
    EXPECT_TRUE(same_bits(logits_of(f, *m, tokens), fresh[lv])) << "level index " << lv;
  }
  EXPECT_EQ(f.set_level(spec.full() + 1).code(), Code::invalid_argument);
}

// Memory pressure (WeightResidency): in the layers levels cut, every cut weight's tail goes back
// (gate's, up's and Q's rows, down's and O's columns; the anchors keep everything); each level up
// to the floor computes its own bits on what is left; restoring a middle level, then all (from
// the floor, and from the middle) brings back each level's bits. Q and O, held rank-major where
// levels cut heads, are moved again from the file to be restored. On `dev` (the CPU: pages of
// its repacked panels; OpenCL: buffers of fewer rows, or of a narrower row pitch).
void expect_release_round_trip(const std::string& model, hal::Device& dev) {
  ScratchDir dir;
  const std::string out = dir.file("elastic.gguf");
  auto rep = elastify::run(small_options(test::test_model(model), out));
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  auto m = load(out, dev);
  const ElasticSpec& spec = *m->elastic();
  const auto tokens = probe_tokens(*m, 20);
  Forward f(*m, dev, 8);
  std::vector<std::vector<float>> fresh;
  for (int lv = 0; lv <= spec.full(); ++lv) {
    ASSERT_TRUE(f.set_level(lv).ok());
    fresh.push_back(logits_of(f, *m, tokens, &dev.kv_memory()));
  }
  WeightResidency r(*m, dev);
  if (!m->layer_weight(0, Model::LevelPart::gate).owns_copy()) {
    EXPECT_FALSE(r.can_release());  // read in place (the CPU's float weights): the file's pages
    EXPECT_EQ(r.release_above(0), 0u);
    return;
  }
  ASSERT_TRUE(r.can_release());
  const uint64_t given = r.release_above(0);
  ASSERT_GT(given, 0u);
  EXPECT_EQ(r.released_bytes(), given);
  EXPECT_EQ(r.resident_level(), 0);
  int cut_cols = 0;
  for (int il = 0; il < m->config().n_layer; ++il) {
    for (Model::LevelPart part : {Model::LevelPart::q, Model::LevelPart::o, Model::LevelPart::gate,
                                  Model::LevelPart::up, Model::LevelPart::down}) {
      const hal::PreparedWeight& w = m->layer_weight(il, part);
      const hal::PreparedWeight* v = m->level_weight(0, il, part);
      if (spec.anchor[il] || v == nullptr) {  // read whole at level 0: all of it stays
        EXPECT_EQ(w.resident_rows(), w.ref().rows);
        EXPECT_EQ(w.resident_cols(), w.ref().cols);
        continue;
      }
      const bool cols = part == Model::LevelPart::o || part == Model::LevelPart::down;
      SCOPED_TRACE("layer " + std::to_string(il) + " part " + std::to_string(static_cast<int>(part)));
      // Level 0's rows or columns stay; the device's granule (pages, blocks) may keep a few more.
      if (cols) {
        EXPECT_EQ(w.resident_rows(), w.ref().rows);
        EXPECT_GE(w.resident_cols(), v->ref().cols);
        EXPECT_LT(w.resident_cols(), w.ref().cols);
        ++cut_cols;
      } else {
        EXPECT_EQ(w.resident_cols(), w.ref().cols);
        EXPECT_GE(w.resident_rows(), v->ref().rows);
        EXPECT_LT(w.resident_rows(), w.ref().rows);
      }
    }
  }
  EXPECT_GT(cut_cols, 0);
  const int middle = std::max(1, spec.full() / 2);
  for (int lv = 0; lv <= spec.full(); lv += middle) {
    if (lv > 0) {
      ASSERT_TRUE(r.make_resident(lv).ok());
    }
    EXPECT_EQ(r.resident_level(), lv);
    ASSERT_TRUE(f.set_level(lv).ok());
    EXPECT_TRUE(same_bits(logits_of(f, *m, tokens, &dev.kv_memory()), fresh[lv])) << "level index " << lv;
    ASSERT_TRUE(f.set_level(0).ok());
    EXPECT_TRUE(same_bits(logits_of(f, *m, tokens, &dev.kv_memory()), fresh[0]));
  }
  EXPECT_EQ(r.released_bytes(), 0u);
  // From the floor to the full model at once.
  EXPECT_EQ(r.release_above(0), given);
  ASSERT_TRUE(r.make_resident(spec.full()).ok());
  ASSERT_TRUE(f.set_level(spec.full()).ok());
  EXPECT_TRUE(same_bits(logits_of(f, *m, tokens, &dev.kv_memory()), fresh.back()));
}

TEST_P(Elastic, ReleasedWeightsComeBackWithTheSameBits) {
  auto dev = cpu();
  expect_release_round_trip(GetParam(), *dev);
}

TEST_P(Elastic, ReleasedWeightsComeBackWithTheSameBitsOnOpenCl) {
  auto d = hal::open_device("opencl", hal::DeviceOptions{1});
  ASSERT_TRUE(d.ok()) << d.status().message();
  expect_release_round_trip(GetParam(), **d);
}

INSTANTIATE_TEST_SUITE_P(Models, Elastic, ::testing::Values("llama-Q8_0.gguf", "llama-Q4_0.gguf", "llama-F16.gguf", "gemma3-Q8_0.gguf"),
                         [](const auto& info) {
                           std::string n = info.param;
                           n = n.substr(0, n.find('.'));
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(ElasticModel, APlainModelHasNoLevels) {
  auto dev = cpu();
  auto m = load(test::test_model(test::kLlama), *dev);
  EXPECT_EQ(m->elastic(), nullptr);
  EXPECT_EQ(m->levels_status().code(), Code::unsupported);
  Forward f(*m, *dev, 8);
  EXPECT_TRUE(f.set_level(-1).ok());
  EXPECT_TRUE(f.set_level(0).ok());  // its one level, the full model
  EXPECT_EQ(f.set_level(1).code(), Code::invalid_argument);
}

// An elastic file (elastify's output) with one key changed is refused, the field named.
class ElasticMetadata : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    elastify::Options o = small_options(test::test_model(test::kLlama), dir_->file("elastic.gguf"));
    auto rep = elastify::run(o);
    ASSERT_TRUE(rep.ok()) << rep.status().message();
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  // Model::load of the elastic file with `key` set to `v` (or removed when v is null).
  static Status load_with(const std::string& key, const gguf::Value* v) {
    auto f = gguf::GgufFile::open(dir_->file("elastic.gguf"));
    if (!f.ok()) return f.status();
    auto w = gguf::GgufWriter::from_file(**f);
    if (!w.ok()) return w.status();
    LLMSVC_RETURN_IF_ERROR(w->add_tensors_from(**f));
    if (v) {
      LLMSVC_RETURN_IF_ERROR(w->set(std::string(kElasticPrefix) + key, *v));
    } else {
      w->remove(std::string(kElasticPrefix) + key);
    }
    const std::string path = dir_->file("mutated.gguf");
    LLMSVC_RETURN_IF_ERROR(w->write(path));
    auto dev = cpu();
    auto m = Model::load(path, *dev);
    return m.ok() ? Status::Ok() : m.status();
  }
  static void expect_refused(const std::string& key, const gguf::Value* v, Code code, const std::string& says) {
    SCOPED_TRACE(key);
    const Status s = load_with(key, v);
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
  }
  static ScratchDir* dir_;
};
ScratchDir* ElasticMetadata::dir_ = nullptr;

TEST_F(ElasticMetadata, EachInconsistencyIsNamed) {
  using gguf::ValueType;
  auto dev = cpu();
  auto good = load(dir_->file("elastic.gguf"), *dev);
  const ModelConfig& c = good->config();
  const ElasticSpec& spec = *good->elastic();
  const size_t n_levels = spec.levels.size();
  auto keep_with = [&](size_t at, uint64_t value) {
    std::vector<uint64_t> k;
    for (const auto& level : spec.ffn_keep) k.insert(k.end(), level.begin(), level.end());
    k[at] = value;
    return gguf::uint_array(ValueType::u32, k);
  };
  const gguf::Value v2 = gguf::uint_value(ValueType::u32, 2);
  expect_refused("version", &v2, Code::unsupported, "elastic format version 2");
  const gguf::Value bad_levels = gguf::uint_array(ValueType::u32, {20, 10, 100});
  expect_refused("levels", &bad_levels, Code::model_invalid, "llmsvc.elastic.levels");
  const gguf::Value no_full = gguf::uint_array(ValueType::u32, {20, 90});
  expect_refused("levels", &no_full, Code::model_invalid, "the last level is not 100");
  const gguf::Value odd_unit = gguf::uint_value(ValueType::u32, 48);
  expect_refused("ffn_unit", &odd_unit, Code::model_invalid, "llmsvc.elastic.ffn_unit");
  const gguf::Value small_unit = gguf::uint_value(ValueType::u32, 16);  // splits Q8_0's blocks of 32
  expect_refused("ffn_unit", &small_unit, Code::model_invalid, "block of 32");
  const gguf::Value short_keep = gguf::uint_array(ValueType::u32, {64});
  expect_refused("ffn_keep", &short_keep, Code::model_invalid, "levels x n_layer");
  const gguf::Value not_unit = keep_with(0, 40);
  expect_refused("ffn_keep", &not_unit, Code::model_invalid, "layer 0");
  const int cut_layer = spec.anchor[0] ? 1 : 0;  // a layer the levels cut
  const gguf::Value full_cut = keep_with((n_levels - 1) * c.n_layer + cut_layer, 64);
  expect_refused("ffn_keep", &full_cut, Code::model_invalid, "the full level");
  const gguf::Value shrinking = keep_with(cut_layer, spec.ffn_keep[1][cut_layer] + 32);  // level 0 above level 1
  expect_refused("ffn_keep", &shrinking, Code::model_invalid, "fewer neurons than the level below");
  const gguf::Value far_anchor = gguf::uint_array(ValueType::u32, {static_cast<uint64_t>(c.n_layer)});
  expect_refused("anchor_layers", &far_anchor, Code::model_invalid, "out of range");
  const gguf::Value twice = gguf::uint_array(ValueType::u32, {0, 0});
  expect_refused("anchor_layers", &twice, Code::model_invalid, "named twice");
  // A layer made an anchor although its levels cut it.
  const gguf::Value cut_anchor = gguf::uint_array(ValueType::u32, {static_cast<uint64_t>(cut_layer)});
  expect_refused("anchor_layers", &cut_anchor, Code::model_invalid, "an anchor layer");
  const gguf::Value nan_imp = gguf::float_array(ValueType::f32, std::vector<double>(c.n_layer, std::nan("")));
  expect_refused("layer_importance", &nan_imp, Code::model_invalid, "not finite");
  expect_refused("ffn_keep", nullptr, Code::model_invalid, "llmsvc.elastic.ffn_keep");

  // Query heads: whole ranks (one head per KV group), the full level and anchors whole.
  ASSERT_TRUE(spec.cuts_heads());
  auto heads_with = [&](size_t at, uint64_t value) {
    std::vector<uint64_t> k;
    for (const auto& level : spec.head_keep) k.insert(k.end(), level.begin(), level.end());
    k[at] = value;
    return gguf::uint_array(ValueType::u32, k);
  };
  const gguf::Value short_heads = gguf::uint_array(ValueType::u32, {2});
  expect_refused("head_keep", &short_heads, Code::model_invalid, "levels x n_layer");
  const gguf::Value split_rank = heads_with(0, static_cast<uint64_t>(c.n_head_kv) + 1);
  expect_refused("head_keep", &split_rank, Code::model_invalid, "whole ranks of " + std::to_string(c.n_head_kv));
  const gguf::Value no_head = heads_with(0, 0);
  expect_refused("head_keep", &no_head, Code::model_invalid, "layer 0");
  const gguf::Value heads_full_cut = heads_with((n_levels - 1) * c.n_layer + cut_layer, static_cast<uint64_t>(c.n_head_kv));
  expect_refused("head_keep", &heads_full_cut, Code::model_invalid, "the full level");
  const gguf::Value heads_shrinking = heads_with(cut_layer, static_cast<uint64_t>(c.n_head));  // level 0 above level 1
  ASSERT_LT(spec.head_keep[1][cut_layer], c.n_head);
  expect_refused("head_keep", &heads_shrinking, Code::model_invalid, "fewer query heads than the level below");
}

TEST(Elastify, RefusesBadInput) {
  ScratchDir dir;
  const std::string in = test::test_model(test::kLlama);
  elastify::Options o = small_options(in, dir.file("e.gguf"));
  o.score = "magic";
  EXPECT_EQ(elastify::run(o).status().code(), Code::invalid_argument);
  o.score = "taylor";  // without --scores
  EXPECT_EQ(elastify::run(o).status().code(), Code::invalid_argument);
  // Taylor scores of the wrong shape.
  std::ofstream(dir.file("scores.json")) << R"({"ffn": [[1, 2, 3]]})";
  o.scores_path = dir.file("scores.json");
  EXPECT_EQ(elastify::run(o).status().code(), Code::invalid_argument);
  o = small_options(in, dir.file("e.gguf"));
  o.levels = {20, 50};  // does not end at the full model
  EXPECT_EQ(elastify::run(o).status().code(), Code::invalid_argument);
  o = small_options(in, dir.file("e.gguf"));
  o.calib_path = dir.file("missing.txt");
  EXPECT_EQ(elastify::run(o).status().code(), Code::not_found);
  // An elastic file is not elastified again; K-quants of one superblock have nothing to reorder.
  o = small_options(in, dir.file("e.gguf"));
  ASSERT_TRUE(elastify::run(o).ok());
  EXPECT_EQ(elastify::run(small_options(dir.file("e.gguf"), dir.file("e2.gguf"))).status().code(), Code::invalid_argument);
  EXPECT_EQ(elastify::run(small_options(test::test_model("llama-Q4_K.gguf"), dir.file("k.gguf"))).status().code(),
            Code::unsupported);
  // A failed run writes nothing.
  EXPECT_FALSE(std::filesystem::exists(dir.file("e2.gguf")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("k.gguf")));
}

TEST(Elastify, TaylorScoresOrderTheUnitsAndRandomOrderFollowsItsSeed) {
  ScratchDir dir;
  const std::string in = test::test_model(test::kLlama);
  auto dev = cpu();
  auto m = load(in, *dev);
  const ModelConfig& c = m->config();
  // Scores that rank unit u of every layer by u (last unit most important): the reordered
  // gate's first rows are the input's last unit's.
  std::string json = R"({"ffn": [)";
  for (int il = 0; il < c.n_layer; ++il) {
    json += il ? ",[" : "[";
    for (int j = 0; j < c.n_ff; ++j) {
      if (j) json.push_back(',');
      json.append(std::to_string(j));
    }
    json += "]";
  }
  json += "]}";
  std::ofstream(dir.file("scores.json")) << json;
  elastify::Options o = small_options(in, dir.file("t.gguf"));
  o.score = "taylor";
  o.scores_path = dir.file("scores.json");
  auto rep = elastify::run(o);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  auto src = gguf::GgufFile::open(in), got = gguf::GgufFile::open(dir.file("t.gguf"));
  ASSERT_TRUE(src.ok() && got.ok());
  const gguf::TensorInfo* a = (*src)->find_tensor("blk.0.ffn_gate.weight");
  const gguf::TensorInfo* b = (*got)->find_tensor("blk.0.ffn_gate.weight");
  const size_t unit_bytes = a->n_bytes / a->ne[1] * rep->ffn_unit, n_units = c.n_ff / rep->ffn_unit;
  for (size_t k = 0; k < n_units; ++k)
    EXPECT_EQ(std::memcmp(b->data + k * unit_bytes, a->data + (n_units - 1 - k) * unit_bytes, unit_bytes), 0) << k;
  EXPECT_EQ(*(*got)->get_string("llmsvc.elastic.score"), "taylor");

  // Random order: the same seed, the same file; another seed, another order.
  o = small_options(in, dir.file("r1.gguf"));
  o.score = "random";
  ASSERT_TRUE(elastify::run(o).ok());
  o.output = dir.file("r2.gguf");
  ASSERT_TRUE(elastify::run(o).ok());
  o.output = dir.file("r3.gguf");
  o.seed = 99;
  ASSERT_TRUE(elastify::run(o).ok());
  auto bytes = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  EXPECT_EQ(bytes(dir.file("r1.gguf")), bytes(dir.file("r2.gguf")));
  EXPECT_NE(bytes(dir.file("r1.gguf")), bytes(dir.file("r3.gguf")));
}

}  // namespace
}  // namespace llmsvc
