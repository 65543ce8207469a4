// SPDX-License-Identifier: Apache-2.0
// The op graph of a decoder layer with the per-architecture switches (qwen2's biases, gemma3's
// q/k norms, post-norms, GELU and embedding scale), in the order the numerics require.
#include "runtime/core/graph/model_graph.h"

#include <string>

namespace llmsvc {
namespace {

constexpr int32_t kWeightSlots = static_cast<int32_t>(WeightSlot::count_);
constexpr int32_t kParamSlots = static_cast<int32_t>(ParamSlot::count_);

}  // namespace

int32_t weight_id(int layer, WeightSlot slot) { return layer * kWeightSlots + static_cast<int32_t>(slot); }
int32_t output_weight_id(const ModelConfig& c) { return c.n_layer * kWeightSlots; }
int32_t embedding_weight_id(const ModelConfig& c) { return c.n_layer * kWeightSlots + 1; }
int32_t param_id(int layer, ParamSlot slot) { return layer * kParamSlots + static_cast<int32_t>(slot); }
int32_t output_norm_param_id(const ModelConfig& c) { return c.n_layer * kParamSlots; }

bool AdapterTargets::touched(int slot, int layer, WeightSlot w) const {
  const auto& t = touches[slot];
  const size_t i = static_cast<size_t>(layer) * kWeightSlots + static_cast<size_t>(w);
  return i < t.size() && t[i];
}

bool AdapterTargets::empty() const {
  for (const auto& t : touches)
    for (bool b : t)
      if (b) return false;
  return true;
}

namespace {
int32_t first_adapter_id(const ModelConfig& c) { return c.n_layer * kWeightSlots + 2; }
}  // namespace

int32_t adapter_weight_id(const ModelConfig& c, int slot, int layer, WeightSlot w, LoraPart part) {
  return first_adapter_id(c) +
         ((slot * c.n_layer + layer) * kWeightSlots + static_cast<int32_t>(w)) * 2 + static_cast<int32_t>(part);
}

std::optional<AdapterWeight> adapter_weight(const ModelConfig& c, int32_t id) {
  int32_t i = id - first_adapter_id(c);
  if (i < 0 || i >= kAdapterSlots * c.n_layer * kWeightSlots * 2) return std::nullopt;
  AdapterWeight a;
  a.part = static_cast<LoraPart>(i % 2);
  i /= 2;
  a.w = static_cast<WeightSlot>(i % kWeightSlots);
  i /= kWeightSlots;
  a.layer = i % c.n_layer;
  a.slot = i / c.n_layer;
  return a;
}

hal::Graph build_model_graph(const ModelConfig& c, const AdapterTargets& adapters) {
  using hal::OpKind;
  hal::Graph g;
  const int64_t E = c.n_embd, QD = int64_t{c.n_head} * c.head_dim, KV = c.kv_dim(), F = c.n_ff, V = c.n_vocab;
  const int32_t ids = g.add_tensor("tokens", hal::T(), 1, hal::TensorRole::token_ids);
  const int32_t pos = g.add_tensor("positions", hal::T(), 1, hal::TensorRole::positions);
  const int32_t logits = g.add_tensor("logits", hal::O(), V, hal::TensorRole::logits);
  const int32_t x = g.add_tensor("x", hal::T(), E);

  {
    hal::Op& op = g.add_op(OpKind::get_rows, -1, hal::T());
    op.in[0] = ids;
    op.out[0] = x;
    op.weight[0] = embedding_weight_id(c);
  }
  if (c.embd_scale != 1.0f) {
    hal::Op& op = g.add_op(OpKind::scale, -1, hal::T());
    op.in[0] = x;
    op.out[0] = x;
    op.f[0] = c.embd_scale;
  }
  auto norm = [&](int il, hal::Dim rows, int32_t in, int32_t out, int32_t param, int64_t dim) {
    hal::Op& op = g.add_op(OpKind::rms_norm, il, rows);
    op.in[0] = in;
    op.out[0] = out;
    op.param = param;
    op.i[0] = static_cast<int32_t>(dim);
    op.f[0] = c.rms_eps;
    op.work = 4.0 * static_cast<double>(g.tensors[in].cols);
  };
  auto in_place = [&](OpKind kind, int il, hal::Dim rows, int32_t t, int32_t other = hal::kNoTensor) -> hal::Op& {
    hal::Op& op = g.add_op(kind, il, rows);
    op.in = {t, other};
    op.out[0] = t;
    op.work = static_cast<double>(g.tensors[t].cols);
    return op;
  };
  auto matmul = [&](int il, hal::Dim rows, int32_t in, std::initializer_list<std::pair<int32_t, int32_t>> outs) {
    hal::Op& op = g.add_op(OpKind::matmul, il, rows);
    op.in[0] = in;
    int n = 0;
    for (auto [tensor, weight] : outs) {
      op.out[n] = tensor;
      op.weight[n] = weight;
      op.work += 2.0 * static_cast<double>(g.tensors[in].cols) * static_cast<double>(g.tensors[tensor].cols);
      ++n;
    }
  };

  // The LoRA branches of the matrices in `outs` (base output tensor, its slot), which share
  // the input `in`: per adapter slot, one fused matmul of their A's, then per matrix B, scale, add.
  auto lora = [&](int il, hal::Dim rows, int32_t in, std::initializer_list<std::pair<int32_t, WeightSlot>> outs) {
    static constexpr const char* kNames[] = {"q", "k", "v", "o", "gate", "up", "down"};
    for (int slot = 0; slot < kAdapterSlots; ++slot) {
      std::vector<std::pair<int32_t, WeightSlot>> ts;
      for (auto t : outs)
        if (adapters.touched(slot, il, t.second)) ts.push_back(t);
      if (ts.empty()) continue;
      std::string pre = "L";  // appended (GCC 12 warns falsely of a "literal" + string chain)
      pre.append(std::to_string(il)).append(".lora").append(std::to_string(slot)).append(".");
      hal::Op& a = g.add_op(OpKind::matmul, il, rows);
      a.in[0] = in;
      std::vector<int32_t> mid;
      for (size_t n = 0; n < ts.size(); ++n) {
        const int32_t t = g.add_tensor(pre + kNames[static_cast<int>(ts[n].second)] + ".a", rows, adapters.rank[slot]);
        mid.push_back(t);
        hal::Op& op = g.ops.back();  // add_tensor leaves the ops alone
        op.out[n] = t;
        op.weight[n] = adapter_weight_id(c, slot, il, ts[n].second, LoraPart::a);
        op.work += 2.0 * static_cast<double>(g.tensors[in].cols) * adapters.rank[slot];
      }
      for (size_t n = 0; n < ts.size(); ++n) {
        const auto [out, w] = ts[n];
        const int32_t b_id = adapter_weight_id(c, slot, il, w, LoraPart::b);
        const int32_t b = g.add_tensor(pre + kNames[static_cast<int>(w)] + ".b", rows, g.tensors[out].cols);
        matmul(il, rows, mid[n], {{b, b_id}});
        hal::Op& sc = in_place(OpKind::scale, il, rows, b);
        sc.f[0] = 1.0f;
        sc.weight[0] = b_id;
        in_place(OpKind::add, il, rows, out, b).weight[0] = b_id;
      }
    }
  };

  for (int il = 0; il < c.n_layer; ++il) {
    std::string L = "L";
    L.append(std::to_string(il)).append(".");
    const bool last = il + 1 == c.n_layer;
    const bool swa = c.layer_is_swa[il];
    const int32_t h = g.add_tensor(L + "h", hal::T(), E), q = g.add_tensor(L + "q", hal::T(), QD),
                  k = g.add_tensor(L + "k", hal::T(), KV), v = g.add_tensor(L + "v", hal::T(), KV),
                  attn = g.add_tensor(L + "attn", hal::T(), QD), o = g.add_tensor(L + "o", hal::T(), E),
                  hf = g.add_tensor(L + "hf", hal::T(), E), gate = g.add_tensor(L + "gate", hal::T(), F),
                  up = g.add_tensor(L + "up", hal::T(), F), d = g.add_tensor(L + "down", hal::T(), E);

    // Attention block: Q, K and V share their input (one fused matmul).
    norm(il, hal::T(), x, h, param_id(il, ParamSlot::attn_norm), E);
    matmul(il, hal::T(), h, {{q, weight_id(il, WeightSlot::q)}, {k, weight_id(il, WeightSlot::k)}, {v, weight_id(il, WeightSlot::v)}});
    lora(il, hal::T(), h, {{q, WeightSlot::q}, {k, WeightSlot::k}, {v, WeightSlot::v}});
    if (c.has_qkv_bias) {
      in_place(OpKind::add_bias, il, hal::T(), q).param = param_id(il, ParamSlot::bq);
      in_place(OpKind::add_bias, il, hal::T(), k).param = param_id(il, ParamSlot::bk);
      in_place(OpKind::add_bias, il, hal::T(), v).param = param_id(il, ParamSlot::bv);
    }
    if (c.has_qk_norm) {
      norm(il, hal::T(), q, q, param_id(il, ParamSlot::q_norm), c.head_dim);
      norm(il, hal::T(), k, k, param_id(il, ParamSlot::k_norm), c.head_dim);
    }
    for (auto [t, heads] : {std::pair{q, c.n_head}, std::pair{k, c.n_head_kv}}) {
      hal::Op& op = in_place(OpKind::rope, il, hal::T(), t, pos);
      op.i = {heads, c.head_dim, c.rope_dims, static_cast<int32_t>(c.rope_neox ? hal::RopeStyle::neox : hal::RopeStyle::normal)};
      op.f = {swa ? c.rope_freq_base_swa : c.rope_freq_base, swa ? 1.0f : c.rope_freq_scale};
    }
    if (c.scale_q) in_place(OpKind::scale, il, hal::T(), q).f[0] = c.attn_scale;
    {
      // New K/V go straight into their chunk slots.
      hal::Op& op = g.add_op(OpKind::store_kv, il, hal::T());
      op.in = {k, v};
      op.work = 2.0 * static_cast<double>(KV);
    }
    {
      hal::Op& op = g.add_op(OpKind::attention, il, hal::T());
      op.in[0] = q;
      op.out[0] = attn;
      op.i = {c.n_head, c.n_head_kv, c.head_dim, swa ? c.sliding_window : 0, c.q_heads_rank_major ? 1 : 0};
      op.f[0] = c.scale_q ? 1.0f : c.attn_scale;
      op.work = 4.0 * static_cast<double>(QD) * 512;  // at a typical context length
    }
    // In the last layer only the output rows go on (llama.cpp's inp_out_ids): the last O rows
    // moved to the front.
    const hal::Dim rows = last ? hal::O() : hal::T();
    if (last) {
      in_place(OpKind::last_rows, il, rows, attn);
      in_place(OpKind::last_rows, il, rows, x);
    }
    matmul(il, rows, attn, {{o, weight_id(il, WeightSlot::o)}});
    lora(il, rows, attn, {{o, WeightSlot::o}});
    if (c.has_post_norms) norm(il, rows, o, o, param_id(il, ParamSlot::attn_post_norm), E);
    in_place(OpKind::add, il, rows, x, o);

    // Feed-forward block.
    norm(il, rows, x, hf, param_id(il, ParamSlot::ffn_norm), E);
    matmul(il, rows, hf, {{gate, weight_id(il, WeightSlot::gate)}, {up, weight_id(il, WeightSlot::up)}});
    lora(il, rows, hf, {{gate, WeightSlot::gate}, {up, WeightSlot::up}});
    in_place(c.gelu_ffn ? OpKind::geglu : OpKind::swiglu, il, rows, gate, up);
    matmul(il, rows, gate, {{d, weight_id(il, WeightSlot::down)}});
    lora(il, rows, gate, {{d, WeightSlot::down}});
    if (c.has_post_norms) norm(il, rows, d, d, param_id(il, ParamSlot::ffn_post_norm), E);
    in_place(OpKind::add, il, rows, x, d);
  }

  // Final norm and output projection of the output rows.
  const int32_t hn = g.add_tensor("out_norm", hal::O(), E);
  norm(-1, hal::O(), x, hn, output_norm_param_id(c), E);
  matmul(-1, hal::O(), hn, {{logits, output_weight_id(c)}});
  return g;
}

const hal::PreparedWeight* model_weight(const Model& model, int32_t id) {
  const ModelConfig& c = model.config();
  if (id == output_weight_id(c)) return &model.output();
  if (id < 0 || id >= c.n_layer * kWeightSlots) return nullptr;
  const LayerWeights& L = model.layers()[id / kWeightSlots];
  switch (static_cast<WeightSlot>(id % kWeightSlots)) {
    case WeightSlot::q: return L.wq.get();
    case WeightSlot::k: return L.wk.get();
    case WeightSlot::v: return L.wv.get();
    case WeightSlot::o: return L.wo.get();
    case WeightSlot::gate: return L.w_gate.get();
    case WeightSlot::up: return L.w_up.get();
    case WeightSlot::down: return L.w_down.get();
    case WeightSlot::count_: break;
  }
  return nullptr;
}

const hal::PreparedWeight* level_model_weight(const Model& model, int level, int32_t id) {
  if (id < 0 || id >= model.config().n_layer * kWeightSlots) return nullptr;
  const int il = id / kWeightSlots;
  switch (static_cast<WeightSlot>(id % kWeightSlots)) {
    case WeightSlot::q: return model.level_weight(level, il, Model::LevelPart::q);
    case WeightSlot::o: return model.level_weight(level, il, Model::LevelPart::o);
    case WeightSlot::gate: return model.level_weight(level, il, Model::LevelPart::gate);
    case WeightSlot::up: return model.level_weight(level, il, Model::LevelPart::up);
    case WeightSlot::down: return model.level_weight(level, il, Model::LevelPart::down);
    default: return nullptr;
  }
}

bool holds_query_heads(const hal::Tensor& t) { return t.name.ends_with(".q") || t.name.ends_with(".attn"); }

const float* model_param(const Model& model, int32_t id) {
  const ModelConfig& c = model.config();
  if (id == output_norm_param_id(c)) return model.output_norm().data();
  if (id < 0 || id >= c.n_layer * kParamSlots) return nullptr;
  const LayerWeights& L = model.layers()[id / kParamSlots];
  switch (static_cast<ParamSlot>(id % kParamSlots)) {
    case ParamSlot::attn_norm: return L.attn_norm.data();
    case ParamSlot::ffn_norm: return L.ffn_norm.data();
    case ParamSlot::q_norm: return L.attn_q_norm.data();
    case ParamSlot::k_norm: return L.attn_k_norm.data();
    case ParamSlot::attn_post_norm: return L.attn_post_norm.data();
    case ParamSlot::ffn_post_norm: return L.ffn_post_norm.data();
    case ParamSlot::bq: return L.bq.data();
    case ParamSlot::bk: return L.bk.data();
    case ParamSlot::bv: return L.bv.data();
    case ParamSlot::count_: break;
  }
  return nullptr;
}

}  // namespace llmsvc
