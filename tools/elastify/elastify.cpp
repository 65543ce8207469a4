// SPDX-License-Identifier: Apache-2.0
// The elastify pipeline: scores, orders, anchors, levels, the rewritten file and its check.
#include "tools/elastify/elastify.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <numeric>
#include <thread>

#include "hal/devices/device_registry.h"
#include "hal/weight_type.h"
#include "runtime/core/gguf/gguf_writer.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/elastic_spec.h"
#include "runtime/core/model/model.h"
#include "tools/elastify/calibration.h"
#include "tools/elastify/ffn_permute.h"
#include "tools/elastify/unit_order.h"

namespace llmsvc::elastify {
namespace {

// The built-in calibration text (generated from the repository's public-domain text at build time).
constexpr char kDefaultCalib[] = {
#include "elastify_default_calib.inc"
};

std::string key(const char* field) { return std::string(kElasticPrefix) + field; }

// The calibration text, as much of it as `tokens` tokens can take (no token is longer than
// kMaxTokenBytes): a large file is not read whole to be cut after tokenizing.
Result<std::string> calibration_text(const Options& o, int tokens) {
  constexpr size_t kMaxTokenBytes = 64;
  if (o.calib_path.empty()) return std::string(kDefaultCalib, sizeof kDefaultCalib);
  std::ifstream in(o.calib_path, std::ios::binary);
  if (!in) return Status(Code::not_found, "elastify: cannot read the calibration text " + o.calib_path);
  std::string text(static_cast<size_t>(tokens) * kMaxTokenBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.gcount() == static_cast<std::streamsize>(tokens * kMaxTokenBytes))
    while (!text.empty() && static_cast<unsigned char>(text.back()) >= 0x80) text.pop_back();  // no cut character
  return text;
}

// The unit: whole blocks of every layer's ffn_down input (the largest block; all divide it).
Result<int> ffn_unit(const Model& m) {
  const ModelConfig& c = m.config();
  int64_t unit = 1;
  for (const LayerWeights& L : m.layers()) unit = std::lcm(unit, hal::block_elems(L.w_down->ref().type));
  if (c.n_ff % unit != 0)
    return Status(Code::unsupported, "elastify: n_ff " + std::to_string(c.n_ff) + " is not a whole number of ffn_down blocks (" +
                                         std::to_string(unit) + ")");
  if (c.n_ff / unit < 2) return Status(Code::unsupported, "elastify: the FFN has one block of neurons: nothing to reorder");
  return static_cast<int>(unit);
}

// Why the levels cannot cut query heads ("" when they can): a head must be a whole number of
// attn_output's blocks, and a KV group must hold more than one query head.
std::string heads_obstacle(const Model& m) {
  const ModelConfig& c = m.config();
  if (c.n_head <= c.n_head_kv) return "one query head per KV group";
  for (int il = 0; il < c.n_layer; ++il) {
    const int64_t block = hal::block_elems(m.layers()[il].wo->ref().type);
    if (c.head_dim % block != 0)
      return "a head of " + std::to_string(c.head_dim) + " columns splits blk." + std::to_string(il) +
             ".attn_output.weight's blocks of " + std::to_string(block);
  }
  return "";
}

Status check_options(const Options& o) {
  if (o.input.empty() || o.output.empty()) return Status(Code::invalid_argument, "elastify: an input and an output file");
  if (o.score != "activation" && o.score != "taylor" && o.score != "random")
    return Status(Code::invalid_argument, "elastify: --score is activation, taylor or random, not '" + o.score + "'");
  if ((o.score == "taylor") != !o.scores_path.empty())
    return Status(Code::invalid_argument, "elastify: --scores FILE goes with --score taylor, and only with it");
  if (!(o.anchor_share >= 0 && o.anchor_share <= 1)) return Status(Code::invalid_argument, "elastify: --anchors is a share in [0, 1]");
  if (o.levels.empty() || o.levels.back() != 100) return Status(Code::invalid_argument, "elastify: the levels end at 100");
  for (size_t i = 0; i < o.levels.size(); ++i)
    if (o.levels[i] < 1 || o.levels[i] > 100 || (i && o.levels[i] <= o.levels[i - 1]))
      return Status(Code::invalid_argument, "elastify: levels are per cent, strictly increasing");
  if (static_cast<int>(o.levels.size()) > kMaxElasticLevels) return Status(Code::invalid_argument, "elastify: too many levels");
  if (o.window < 16 || o.calib_tokens < o.window || o.layer_tokens < o.window)
    return Status(Code::invalid_argument, "elastify: calibration needs at least one window (>= 16 tokens)");
  return Status::Ok();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Result<Report> run(const Options& o, const Progress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  LLMSVC_RETURN_IF_ERROR(check_options(o));
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto device = hal::open_device("cpu", hal::DeviceOptions{threads});
  if (!device.ok()) return device.status();
  hal::Device& dev = **device;
  auto loaded = Model::load(o.input, dev);
  if (!loaded.ok()) return loaded.status();
  const Model& model = **loaded;
  if (model.elastic()) return Status(Code::invalid_argument, "elastify: " + o.input + " is elastic already");
  const ModelConfig& c = model.config();
  auto unit = ffn_unit(model);
  if (!unit.ok()) return unit.status();
  Report rep;
  rep.n_layer = c.n_layer;
  rep.n_ff = c.n_ff;
  rep.ffn_unit = *unit;

  const int need = std::max(o.calib_tokens, o.layer_tokens);
  auto text = calibration_text(o, need);
  if (!text.ok()) return text.status();
  std::vector<int32_t> tokens = model.tokenizer().encode(*text, true, false);
  if (static_cast<int>(tokens.size()) < o.window)
    return Status(Code::invalid_argument, "elastify: the calibration text has " + std::to_string(tokens.size()) +
                                              " tokens, fewer than one window of " + std::to_string(o.window));
  if (static_cast<int>(tokens.size()) > need) tokens.resize(need);
  const std::span<const int32_t> all(tokens);
  const auto calib = all.first(std::min<size_t>(all.size(), o.calib_tokens));
  const auto layer_text = all.first(std::min<size_t>(all.size(), o.layer_tokens));

  rep.heads_note = o.heads ? heads_obstacle(model) : "not asked (--heads)";
  rep.heads_cut = rep.heads_note.empty();

  // 1. Neuron and head scores, and unit orders. Taylor scores cover the FFN only: heads then
  // take the gradient-free order.
  std::vector<std::vector<int>> orders, head_orders;
  MeanAbs mean_abs;
  if (o.score != "random" && (o.score == "activation" || rep.heads_cut)) {
    say("scoring units on " + std::to_string(calib.size()) + " calibration tokens");
    auto m = mean_abs_activations(model, dev, calib, o.window);
    if (!m.ok()) return m.status();
    mean_abs = std::move(m).value();
  }
  if (o.score == "random") {
    orders = random_order(c.n_layer, c.n_ff / *unit, o.seed);
    head_orders = random_order(c.n_layer, c.n_head, o.seed + 1, c.n_head_kv);
  } else {
    std::vector<std::vector<double>> scores;
    if (o.score == "taylor") {
      auto s = read_neuron_scores(o.scores_path, c);
      if (!s.ok()) return s.status();
      scores = std::move(s).value();
    } else {
      scores = activation_scores(model, mean_abs.ffn);
    }
    orders = order_units(scores, *unit);
    if (rep.heads_cut) head_orders = order_heads(head_scores(model, mean_abs.attn), c.n_head_kv);
  }

  // 2. Layer scores: the loss increase with each layer removed; the top share are anchors.
  {
    Forward fwd(model, dev, std::min(o.window, Forward::kDefaultBatch));
    fwd.set_mass_tracking(false);
    auto base = mean_nll(fwd, model, layer_text, o.window);
    if (!base.ok()) return base.status();
    rep.base_loss = *base;
    for (int il = 0; il < c.n_layer; ++il) {
      std::vector<bool> skip(c.n_layer, false);
      skip[il] = true;
      fwd.set_skipped_layers(skip);
      auto loss = mean_nll(fwd, model, layer_text, o.window);
      if (!loss.ok()) return loss.status();
      rep.layer_importance.push_back(*loss - *base);
      say("layer " + std::to_string(il) + ": loss +" + std::to_string(*loss - *base));
    }
  }
  std::vector<int> by_importance(c.n_layer);
  std::iota(by_importance.begin(), by_importance.end(), 0);
  std::stable_sort(by_importance.begin(), by_importance.end(),
                   [&](int a, int b) { return rep.layer_importance[a] > rep.layer_importance[b]; });
  const int n_anchor = static_cast<int>(std::ceil(o.anchor_share * c.n_layer - 1e-9));
  rep.anchors.assign(by_importance.begin(), by_importance.begin() + n_anchor);
  std::sort(rep.anchors.begin(), rep.anchors.end());

  // 3. The file: the input's metadata and tensors, the FFN tensors reordered, the levels added.
  const gguf::GgufFile& in = model.file();
  auto writer = gguf::GgufWriter::from_file(in);
  if (!writer.ok()) return writer.status();
  gguf::GgufWriter& w = *writer;
  LLMSVC_RETURN_IF_ERROR(w.add_tensors_from(in));
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const std::span<const int> order = orders[il];
    for (const char* part : {"ffn_gate.weight", "ffn_up.weight"}) {
      const gguf::TensorInfo* t = in.find_tensor(p + part);
      LLMSVC_RETURN_IF_ERROR(check_row_order(*t, order, *unit));
      LLMSVC_RETURN_IF_ERROR(w.set_tensor_data(t->name, [t, order, u = *unit](const gguf::GgufWriter::Sink& sink) {
        return permute_rows(*t, order, u, sink);
      }));
    }
    const gguf::TensorInfo* down = in.find_tensor(p + "ffn_down.weight");
    LLMSVC_RETURN_IF_ERROR(check_col_order(*down, order, *unit));
    LLMSVC_RETURN_IF_ERROR(w.set_tensor_data(down->name, [down, order, u = *unit](const gguf::GgufWriter::Sink& sink) {
      return permute_cols(*down, order, u, sink);
    }));
    if (!rep.heads_cut) continue;
    // Query heads: Q's rows and q's bias (their outputs), O's columns (its input).
    const std::span<const int> heads = head_orders[il];
    const gguf::TensorInfo* q = in.find_tensor(p + "attn_q.weight");
    LLMSVC_RETURN_IF_ERROR(check_row_order(*q, heads, c.head_dim));
    LLMSVC_RETURN_IF_ERROR(w.set_tensor_data(q->name, [q, heads, u = c.head_dim](const gguf::GgufWriter::Sink& sink) {
      return permute_rows(*q, heads, u, sink);
    }));
    for (const char* part : {"attn_output.weight", "attn_q.bias"}) {
      const gguf::TensorInfo* t = in.find_tensor(p + part);
      if (!t) continue;  // no bias
      LLMSVC_RETURN_IF_ERROR(check_col_order(*t, heads, c.head_dim));
      LLMSVC_RETURN_IF_ERROR(w.set_tensor_data(t->name, [t, heads, u = c.head_dim](const gguf::GgufWriter::Sink& sink) {
        return permute_cols(*t, heads, u, sink);
      }));
    }
  }
  std::vector<uint64_t> keep, head_keep, levels(o.levels.begin(), o.levels.end()), anchors(rep.anchors.begin(), rep.anchors.end());
  std::vector<bool> is_anchor(c.n_layer, false);
  for (int a : rep.anchors) is_anchor[a] = true;
  for (int pct : o.levels)
    for (int il = 0; il < c.n_layer; ++il) {
      keep.push_back(is_anchor[il] ? c.n_ff : elastic_ffn_keep(c.n_ff, *unit, pct));
      head_keep.push_back(is_anchor[il] ? c.n_head : elastic_head_keep(c.n_head, c.n_head_kv, pct));
    }
  using gguf::ValueType;
  LLMSVC_RETURN_IF_ERROR(w.set(key("version"), gguf::uint_value(ValueType::u32, kElasticVersion)));
  LLMSVC_RETURN_IF_ERROR(w.set(key("levels"), gguf::uint_array(ValueType::u32, levels)));
  LLMSVC_RETURN_IF_ERROR(w.set(key("ffn_unit"), gguf::uint_value(ValueType::u32, static_cast<uint64_t>(*unit))));
  LLMSVC_RETURN_IF_ERROR(w.set(key("ffn_keep"), gguf::uint_array(ValueType::u32, keep)));
  if (rep.heads_cut) LLMSVC_RETURN_IF_ERROR(w.set(key("head_keep"), gguf::uint_array(ValueType::u32, head_keep)));
  LLMSVC_RETURN_IF_ERROR(w.set(key("anchor_layers"), gguf::uint_array(ValueType::u32, anchors)));
  LLMSVC_RETURN_IF_ERROR(w.set(key("score"), gguf::string_value(o.score)));
  LLMSVC_RETURN_IF_ERROR(
      w.set(key("layer_importance"), gguf::float_array(ValueType::f32, {rep.layer_importance.begin(), rep.layer_importance.end()})));
  say("writing " + o.output);
  LLMSVC_RETURN_IF_ERROR(w.write(o.output));

  // 4. The check: the written file's full model against the input on the first window.
  auto out_model = Model::load(o.output, dev);
  if (!out_model.ok()) return Status(out_model.status().code(), "elastify: the written file: " + out_model.status().message());
  const auto probe = calib.first(std::min<size_t>(calib.size(), o.window));
  std::vector<float> la, lb;
  for (auto [m, logits] : {std::pair<const Model*, std::vector<float>*>{&model, &la}, {out_model->get(), &lb}}) {
    policy::KvChunkStore store({c.n_layer, c.n_head_kv, c.head_dim, 16}, 0);
    policy::KvSequence seq(store);
    Forward fwd(*m, dev, std::min(o.window, Forward::kDefaultBatch));
    fwd.set_mass_tracking(false);
    LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, probe, 0, true, *logits));
  }
  for (size_t t = 0; t < probe.size(); ++t) {
    const float* a = la.data() + t * c.n_vocab;
    const float* b = lb.data() + t * c.n_vocab;
    for (int v = 0; v < c.n_vocab; ++v) rep.max_abs_logit_diff = std::max<double>(rep.max_abs_logit_diff, std::fabs(a[v] - b[v]));
    rep.argmax_agree += std::max_element(a, a + c.n_vocab) - a == std::max_element(b, b + c.n_vocab) - b;
    ++rep.argmax_positions;
  }
  {
    Forward fa(model, dev, std::min(o.window, Forward::kDefaultBatch)), fb(**out_model, dev, std::min(o.window, Forward::kDefaultBatch));
    fa.set_mass_tracking(false);
    fb.set_mass_tracking(false);
    auto a = mean_nll(fa, model, probe, o.window), b = mean_nll(fb, **out_model, probe, o.window);
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    rep.loss_in = *a;
    rep.loss_out = *b;
  }
  rep.seconds = seconds_since(t0);
  return rep;
}

}  // namespace llmsvc::elastify
