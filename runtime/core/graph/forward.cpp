// SPDX-License-Identifier: Apache-2.0
// Forward: placement and planning once, a step list per shape, and the loop that runs it.
#include "runtime/core/graph/forward.h"

#include <algorithm>

#include "base/clock.h"
#include "runtime/core/graph/model_graph.h"

namespace llmsvc {
namespace {

// Prompt tails of many lengths, at a few (level, adapter) pairs: the oldest shapes go.
constexpr size_t kMaxPreparedShapes = 64;

}  // namespace

// One op with everything resolved for a shape: device, row count, operands, weights. A
// host-visible device reads the host addresses; a view-driven one runs `call` (hal::OpCall).
struct Forward::Step {
  hal::OpCall call;
  int device = 0;
  bool on_views = false;          // its device is driven on buffer views
  float* in[2] = {nullptr, nullptr};
  float* out[3] = {nullptr, nullptr, nullptr};
  const hal::WeightRef* table = nullptr;  // get_rows
  const float* param = nullptr;
  StepWaits waits{-1, -1, -1, -1};  // several devices: see Forward::add_waits
  uint64_t bytes_out = 0;  // what it writes (for the figures)
  // copy
  const hal::Buffer* src = nullptr;
  hal::Buffer* dst = nullptr;
  size_t src_offset = 0, dst_offset = 0, bytes = 0;
  int queue_device = 0;  // whose queue moves it: the reader's, or the end that is not host-visible
  // matmul: LoRA branches folded in (Device::matmul_lora), where the device fuses them.
  std::vector<hal::Device::LoraBranch> lora;
};

struct Forward::Prepared {
  std::vector<Step> steps;
  std::vector<std::vector<int32_t>> order;  // several devices: each one's steps, in order
};

struct Forward::Run {
  policy::KvSequence* seq = nullptr;
  const int32_t* ids = nullptr;
  float* logits = nullptr;
  int n = 0;         // tokens
  int n_valid = 0;   // keys visible up to here
  bool track_mass = false;
  const LayerHook* before_layer = nullptr;
};

Forward::Forward(const Model& model, std::vector<hal::Device*> devices, int max_batch)
    : model_(model), devices_(std::move(devices)), cfg_(model.config()), max_batch_(std::max(1, max_batch)) {
  pos_.resize(max_batch_);
  views_.resize(devices_.size());
  busy_.resize(devices_.size());
  step_failed_.resize(devices_.size());
  figures_.devices.resize(devices_.size());
  for (size_t d = 0; d < devices_.size(); ++d) figures_.devices[d].name = devices_[d]->name();
}

Forward::Forward(const Model& model, hal::Device& device, int max_batch)
    : Forward(model, std::vector<hal::Device*>{&device}, max_batch) {
  init_ = place(hal::PlacementRule{});
}

Forward::~Forward() = default;

int Forward::batch_for(std::span<hal::Device* const> devices) {
  int batch = kDefaultBatch;
  for (const hal::Device* d : devices) batch = std::max(batch, d->caps().batch_tokens);
  return batch;
}

Result<std::unique_ptr<Forward>> Forward::create(const Model& model, std::span<hal::Device* const> devices,
                                                 const hal::PlacementRule& rule, int max_batch) {
  if (devices.empty() || devices.size() > static_cast<size_t>(kMaxDevices))
    return Status(Code::invalid_argument, "forward: from 1 to " + std::to_string(kMaxDevices) + " devices");
  // Its query heads are rank-major in its own device's copy only (Model::load).
  if (devices.size() > 1 && model.config().q_heads_rank_major)
    return Status(Code::unsupported, "forward: an elastic model with head levels runs on its own device alone");
  std::unique_ptr<Forward> f(new Forward(model, std::vector<hal::Device*>(devices.begin(), devices.end()), max_batch));
  LLMSVC_RETURN_IF_ERROR(f->place(rule));
  if (devices.size() > 1) f->threads_ = std::make_unique<DeviceThreads>(static_cast<int>(devices.size()));
  return f;
}

bool Forward::on_model_device() const { return devices_.size() == 1 && devices_[0] == &model_.device(); }

Status Forward::place(const hal::PlacementRule& rule) {
  rule_ = rule;
  const hal::Device* home = &model_.device();
  // A device runs a matmul when it takes the weights' type; the model's own device has them ready.
  auto can_run = [&](const hal::Op& op, const hal::Device& d) {
    if (op.kind != hal::OpKind::matmul || &d == home) return true;
    for (int32_t id : op.weight)
      if (id >= 0 && !d.supports(model_weight(model_, id)->ref().type)) return false;
    return true;
  };
  // Adapters run on the model's own device only (their weights are prepared there): the
  // choices' matrices in slot 0, the levels' recovery adapters' in slot 1.
  AdapterTargets targets;
  if (on_model_device()) {
    std::vector<const LoraAdapter*> recovery;
    if (const ElasticSpec* spec = model_.elastic())
      for (int lv = 0; lv <= spec->full(); ++lv)
        if (const LoraAdapter* a = model_.recovery_adapter(lv)) recovery.push_back(a);
    const std::vector<const LoraAdapter*>* per_slot[kAdapterSlots] = {&choices_, &recovery};
    for (int slot = 0; slot < kAdapterSlots; ++slot) {
      for (const LoraAdapter* a : *per_slot[slot]) {
        auto& t = targets.touches[slot];
        t.resize(static_cast<size_t>(cfg_.n_layer) * kLoraMatrices);
        for (int il = 0; il < cfg_.n_layer; ++il)
          for (int m = 0; m < kLoraMatrices; ++m)
            if (a->has(il, static_cast<LoraMatrix>(m))) t[static_cast<size_t>(il) * kLoraMatrices + m] = true;
        targets.rank[slot] = std::max(targets.rank[slot], a->rank());
      }
    }
  }
  auto placed = hal::place(build_model_graph(cfg_, targets), devices_, rule, can_run);
  if (!placed.ok()) return placed.status();
  placed_ = std::move(placed).value();
  plan_ = hal::plan_activations(placed_.graph, hal::Shape{max_batch_, max_batch_}, placed_.n_spaces);
  figures_.copies_per_step = placed_.copies;
  figures_.naive_bytes = plan_.naive_bytes;
  // Weights for matmuls placed away from the model's device, prepared on theirs once.
  for (const hal::Op& op : placed_.graph.ops) {
    if (op.kind != hal::OpKind::matmul || devices_[op.device] == home) continue;
    for (int32_t id : op.weight) {
      if (id < 0 || weights_.count({op.device, id})) continue;
      auto w = devices_[op.device]->prepare_weight(model_weight(model_, id)->ref());
      if (!w.ok()) return w.status();
      weights_.emplace(std::pair{op.device, id}, std::move(w).value());
    }
  }
  // A view-driven device reads the embedding table and the norm scales and biases from its own
  // memory: each prepared there once (as 1 x n F32 weights).
  for (const hal::Op& op : placed_.graph.ops) {
    hal::Device& d = *devices_[op.device];
    if (d.memory().host_visible()) continue;
    if (std::find(view_devices_.begin(), view_devices_.end(), op.device) == view_devices_.end())
      view_devices_.push_back(op.device);
    if (op.kind == hal::OpKind::get_rows && !tables_.count(op.device)) {
      auto t = d.prepare_weight(model_.token_embd());
      if (!t.ok()) return t.status();
      tables_.emplace(op.device, std::move(t).value());
    }
    if (op.param >= 0 && !params_.count({op.device, op.param})) {
      hal::WeightRef ref;
      ref.data = model_param(model_, op.param);
      ref.rows = 1;
      ref.cols = op.kind == hal::OpKind::rms_norm ? op.i[0] : placed_.graph.tensors[op.out[0]].cols;
      ref.row_bytes = static_cast<size_t>(ref.cols) * sizeof(float);
      auto w = d.prepare_weight(ref);
      if (!w.ok()) return w.status();
      params_.emplace(std::pair{op.device, op.param}, std::move(w).value());
    }
  }
  return Status::Ok();
}

hal::MemoryPool& Forward::kv_memory() const {
  for (const hal::Op& op : placed_.graph.ops)
    if (op.kind == hal::OpKind::attention) return devices_[op.device]->kv_memory();
  return devices_.front()->kv_memory();
}

Status Forward::ensure_arenas() {
  LLMSVC_RETURN_IF_ERROR(init_);
  if (!arenas_.empty()) return Status::Ok();
  std::vector<hal::Buffer> arenas(placed_.n_spaces);
  for (int s = 0; s < placed_.n_spaces; ++s) {
    if (plan_.arena_bytes[s] == 0) continue;
    const auto d = std::find(placed_.device_space.begin(), placed_.device_space.end(), s) - placed_.device_space.begin();
    auto b = devices_[d]->memory().alloc(plan_.arena_bytes[s]);
    if (!b.ok()) return Status(b.status().code(), "activations: " + b.status().message());
    arenas[s] = std::move(b).value();
    figures_.arena_bytes += plan_.arena_bytes[s];
  }
  arenas_ = std::move(arenas);
  return Status::Ok();
}

Status Forward::check_level(int level) const {
  const ElasticSpec* spec = model_.elastic();
  const int full = spec ? spec->full() : 0;
  if (level < 0 || level == full) return Status::Ok();
  if (!spec || level > full) return Status(Code::invalid_argument, "forward: no elastic level " + std::to_string(level));
  if (!model_.levels_status().ok()) return model_.levels_status();
  if (devices_.size() != 1 || devices_[0] != &model_.device())
    return Status(Code::unsupported, "forward: elastic levels run on the model's own device only");
  // The level's recovery adapter must have views of its neurons (the chosen adapter's are
  // set_level's and set_adapter's to check: another call may have set it).
  if (const LoraAdapter* r = recovery_ ? model_.recovery_adapter(level) : nullptr; r && !r->levels_status().ok())
    return r->levels_status();
  return Status::Ok();
}

Status Forward::set_adapters(std::vector<const LoraAdapter*> choices) {
  LLMSVC_RETURN_IF_ERROR(init_);
  for (const LoraAdapter* a : choices) {
    if (!a) return Status(Code::invalid_argument, "forward: a null adapter");
    if (&a->model() != &model_) return Status(Code::invalid_argument, "forward: adapter " + a->name() + " was made for another model");
  }
  if (!choices.empty() && !on_model_device())
    return Status(Code::unsupported, "forward: adapters run on the model's own device only");
  std::vector<const LoraAdapter*> old = std::move(choices_);
  choices_ = std::move(choices);
  adapter_ = -1;
  forget_prepared();
  arenas_.clear();  // the plan changes with the branches: the next eval allocates again
  figures_.arena_bytes = 0;
  Status s = place(rule_);
  if (!s.ok()) {
    choices_ = std::move(old);
    Status back = place(rule_);
    (void)back;  // the graph that was placed before places again
  }
  return s;
}

Status Forward::check_adapter(int index) const {
  if (index == -1) return Status::Ok();
  if (index < -1 || static_cast<size_t>(index) >= choices_.size())
    return Status(Code::invalid_argument, "forward: no adapter " + std::to_string(index) + " (" +
                                              std::to_string(choices_.size()) + " configured)");
  if (level_ >= 0 && !choices_[index]->levels_status().ok()) return choices_[index]->levels_status();
  return Status::Ok();
}

Status Forward::check_level_adapter(int level, int index) const {
  const ElasticSpec* spec = model_.elastic();
  if (index < 0 || level < 0 || !spec || level >= spec->full() || static_cast<size_t>(index) >= choices_.size())
    return Status::Ok();
  return choices_[index]->levels_status();
}

Status Forward::set_adapter(int index) {
  LLMSVC_RETURN_IF_ERROR(check_adapter(index));
  adapter_ = index;
  return Status::Ok();
}

void Forward::set_recovery(bool on) {
  if (on == recovery_) return;
  recovery_ = on;
  forget_prepared();  // slot 1's steps change at every level
}

const LoraAdapter* Forward::slot_adapter(int slot) const {
  if (slot == 0) return adapter_ >= 0 ? choices_[adapter_] : nullptr;
  if (!recovery_) return nullptr;
  const ElasticSpec* spec = model_.elastic();
  return spec ? model_.recovery_adapter(level_ >= 0 ? level_ : spec->full()) : nullptr;
}

Status Forward::set_level(int level) {
  LLMSVC_RETURN_IF_ERROR(check_level(level));
  const ElasticSpec* spec = model_.elastic();
  const int next = level < 0 || !spec || level == spec->full() ? -1 : level;
  // The chosen adapter must have views of the level's neurons.
  if (next >= 0 && adapter_ >= 0 && !choices_[adapter_]->levels_status().ok()) return choices_[adapter_]->levels_status();
  level_ = next;
  return Status::Ok();
}

void Forward::forget_prepared() {
  cache_.clear();
  cache_order_.clear();
}

void Forward::set_fuse_lora(bool on) {
  if (on == fuse_lora_) return;
  fuse_lora_ = on;
  forget_prepared();
}

void Forward::set_skipped_layers(std::vector<bool> skip) {
  skip_ = std::move(skip);
  forget_prepared();  // the step lists of every shape change
}

Result<const Forward::Prepared*> Forward::prepared(const hal::Shape& shape) {
  const ShapeKey key{level_, adapter_, shape.tokens, shape.outputs};
  if (auto it = cache_.find(key); it != cache_.end()) return it->second.get();
  const hal::Graph& g = placed_.graph;
  auto p = std::make_unique<Prepared>();
  // Several devices: each step's reads [0] and writes [1] as (space, first byte, end) ranges;
  // the KV cache is one more space, n_spaces.
  std::vector<std::array<std::vector<std::array<int64_t, 3>>, 2>> access;
  const hal::Shape max{max_batch_, max_batch_};
  auto range = [&](int32_t t) -> std::array<int64_t, 3> {
    return {g.tensors[t].space, plan_.offset[t], plan_.offset[t] + g.tensors[t].bytes_at(max)};
  };
  auto addr = [&](int32_t t) -> float* {
    if (t < 0 || g.tensors[t].role != hal::TensorRole::activation) return nullptr;
    uint8_t* base = arenas_[g.tensors[t].space].data();
    return base ? reinterpret_cast<float*>(base + plan_.offset[t]) : nullptr;
  };
  auto view = [&](int32_t t) -> hal::BufferView {
    if (t < 0 || g.tensors[t].role != hal::TensorRole::activation) return {};
    return {&arenas_[g.tensors[t].space], static_cast<size_t>(plan_.offset[t])};
  };
  // LoRA branches fold into their base matmul where the one device fuses them and every
  // branch's A and B are float weights (the row kernels'); else they run as the graph's ops.
  const auto branch_weight = [&](int32_t id) -> const hal::PreparedWeight* {
    const auto aw = adapter_weight(cfg_, id);
    const LoraAdapter* a = aw ? slot_adapter(aw->slot) : nullptr;
    return a ? a->weight(level_, aw->layer, static_cast<LoraMatrix>(aw->w), aw->part) : nullptr;
  };
  bool fold = fuse_lora_ && devices_.size() == 1 && devices_[0]->fuses_lora();
  for (const hal::Op& op : g.ops)
    if (fold && op.kind == hal::OpKind::matmul)
      for (int32_t id : op.weight)
        if (const hal::PreparedWeight* w = id >= 0 ? branch_weight(id) : nullptr) {
          const hal::WeightType t = w->ref().type;
          fold = fold && (t == hal::WeightType::F32 || t == hal::WeightType::F16 || t == hal::WeightType::BF16);
        }
  const hal::Op* base_op = nullptr;  // the last base matmul with a step, which takes folded branches
  size_t base_index = 0;             // its step
  for (const hal::Op& op : g.ops) {
    if (fold && op.weight[0] >= 0 && adapter_weight(cfg_, op.weight[0]) &&
        (op.kind == hal::OpKind::matmul || op.kind == hal::OpKind::scale || op.kind == hal::OpKind::add)) {
      const auto aw0 = adapter_weight(cfg_, op.weight[0]);
      if (op.kind == hal::OpKind::matmul && aw0->part == LoraPart::a && base_op &&
          base_index + 1 == p->steps.size() && op.in[0] == base_op->in[0]) {
        Step& base = p->steps.back();
        for (int32_t id : op.weight) {
          const auto aw = id >= 0 ? adapter_weight(cfg_, id) : std::nullopt;
          if (!aw) continue;
          const hal::PreparedWeight* a = branch_weight(id);
          const hal::PreparedWeight* b = branch_weight(adapter_weight_id(cfg_, aw->slot, aw->layer, aw->w, LoraPart::b));
          if (!a || !b) continue;  // the adapter running in this slot has no such pair
          for (int k = 0; k < base.call.n_weights; ++k) {
            if (base_op->weight[k] != weight_id(aw->layer, aw->w)) continue;
            // LoraAdapter checked B against the model, and a level cuts both alike.
            if (b->ref().rows != base.call.w[k]->ref().rows)
              return Status(Code::internal, "forward: a LoRA branch's rows differ from its matmul's");
            base.lora.push_back({k, a, b, slot_adapter(aw->slot)->scale()});
          }
        }
      }
      continue;  // A, B, scale and add: in the base step
    }
    Step s;
    hal::OpCall& c = s.call;
    c.kind = op.kind;
    c.layer = op.layer;
    s.device = op.device;
    s.on_views = !devices_[op.device]->memory().host_visible();
    c.rows = op.rows.at(shape);
    if (c.rows == 0) continue;  // the output rows of a step that wants none
    if (op.layer >= 0 && static_cast<size_t>(op.layer) < skip_.size() && skip_[op.layer] &&
        op.kind != hal::OpKind::last_rows)
      continue;
    if (op.kind == hal::OpKind::last_rows) {
      if (shape.outputs == shape.tokens) continue;  // every row goes on where it is
      c.from_row = shape.tokens - shape.outputs;
    }
    for (int k = 0; k < 2; ++k) s.in[k] = addr(op.in[k]), c.in[k] = view(op.in[k]);
    for (int k = 0; k < 3; ++k) s.out[k] = addr(op.out[k]), c.out[k] = view(op.out[k]);
    c.ids_in = op.in[0] >= 0 && g.tensors[op.in[0]].role == hal::TensorRole::token_ids;
    c.logits_out = op.out[0] >= 0 && g.tensors[op.out[0]].role == hal::TensorRole::logits;
    if (op.in[0] >= 0) c.cols_in = g.tensors[op.in[0]].cols;
    if (op.out[0] >= 0) c.cols_out = g.tensors[op.out[0]].cols;
    s.param = op.param >= 0 ? model_param(model_, op.param) : nullptr;
    if (s.on_views && op.param >= 0) c.param = params_.at({op.device, op.param}).get();
    c.i = op.i;
    c.f = op.f;
    if (op.kind == hal::OpKind::get_rows) {
      s.table = &model_.token_embd();
      if (s.on_views) c.table = tables_.at(op.device).get();
    }
    if (op.kind == hal::OpKind::matmul) {
      for (int k = 0; k < 3; ++k) {
        const int32_t id = op.weight[k];
        if (id < 0) continue;
        const hal::PreparedWeight* w = nullptr;
        if (const auto aw = adapter_weight(cfg_, id)) {
          // A LoRA branch: the weight of the adapter its slot runs now, or nothing (left out).
          const LoraAdapter* a = slot_adapter(aw->slot);
          w = a ? a->weight(level_, aw->layer, static_cast<LoraMatrix>(aw->w), aw->part) : nullptr;
          if (!w) continue;
        } else {
          auto it = weights_.find({op.device, id});
          const hal::PreparedWeight* cut = level_ >= 0 ? level_model_weight(model_, level_, id) : nullptr;
          w = cut ? cut : it != weights_.end() ? it->second.get() : model_weight(model_, id);
        }
        // Outputs move down with their weights where a branch before them was left out.
        s.out[c.n_weights] = addr(op.out[k]);
        c.out[c.n_weights] = view(op.out[k]);
        if (c.n_weights == 0 && op.out[k] >= 0) c.cols_out = g.tensors[op.out[k]].cols;
        c.w[c.n_weights++] = w;
      }
      if (c.n_weights == 0) continue;
      for (int k = c.n_weights; k < 3; ++k) s.out[k] = nullptr, c.out[k] = {};
    }
    if ((op.kind == hal::OpKind::scale || op.kind == hal::OpKind::add) && op.weight[0] >= 0) {
      // The scale and add of a LoRA branch: left out with it; the scale is its adapter's.
      const auto aw = adapter_weight(cfg_, op.weight[0]);
      const LoraAdapter* a = aw ? slot_adapter(aw->slot) : nullptr;
      if (!a || !a->has(aw->layer, static_cast<LoraMatrix>(aw->w))) continue;
      if (op.kind == hal::OpKind::scale) c.f[0] = a->scale();
      // At a level, gate and up hold the kept neurons only, q the kept heads.
      if (level_ >= 0 && (aw->w == WeightSlot::gate || aw->w == WeightSlot::up))
        c.cols_in = c.cols_out = model_.elastic()->ffn_keep[level_][op.layer];
      if (level_ >= 0 && aw->w == WeightSlot::q) c.cols_in = c.cols_out = query_cols(op.layer);
    }
    // A level's FFN activations are its kept neurons: the gated product runs over those.
    if (level_ >= 0 && (op.kind == hal::OpKind::swiglu || op.kind == hal::OpKind::geglu))
      c.cols_out = model_.elastic()->ffn_keep[level_][op.layer];
    // A level's query heads are its kept ones, packed in their rows (Q's row prefix wrote them).
    if (level_ >= 0 && op.layer >= 0 && query_cols(op.layer) < int64_t{cfg_.n_head} * cfg_.head_dim) {
      const auto query = [&](int32_t t) { return t >= 0 && holds_query_heads(g.tensors[t]); };
      if (op.kind != hal::OpKind::matmul && query(op.in[0])) c.cols_in = query_cols(op.layer);
      if (query(op.out[0])) c.cols_out = query_cols(op.layer);
      if ((op.kind == hal::OpKind::rope && query(op.out[0])) || op.kind == hal::OpKind::attention)
        c.i[0] = static_cast<int32_t>(query_cols(op.layer) / cfg_.head_dim);
    }
    if (op.kind == hal::OpKind::copy) {
      const hal::Tensor& from = g.tensors[op.in[0]];
      const hal::Tensor& to = g.tensors[op.out[0]];
      s.src = &arenas_[from.space];
      s.dst = &arenas_[to.space];
      s.src_offset = static_cast<size_t>(plan_.offset[op.in[0]]);
      s.dst_offset = static_cast<size_t>(plan_.offset[op.out[0]]);
      s.bytes = static_cast<size_t>(c.rows * from.cols) * sizeof(float);
      s.queue_device = op.device;
      for (size_t d = 0; d < devices_.size(); ++d)
        if (!devices_[d]->memory().host_visible() &&
            (placed_.device_space[d] == from.space || placed_.device_space[d] == to.space))
          s.queue_device = static_cast<int>(d);
    }
    for (int32_t t : op.out)
      if (t >= 0) s.bytes_out += static_cast<uint64_t>(c.rows * g.tensors[t].cols) * sizeof(float);
    if (op.kind == hal::OpKind::matmul) base_op = &op, base_index = p->steps.size();
    p->steps.push_back(s);
    if (threads_) {
      auto& a = access.emplace_back();
      for (int32_t t : op.in)
        if (t >= 0 && g.tensors[t].role == hal::TensorRole::activation) a[0].push_back(range(t));
      for (int32_t t : op.out)
        if (t >= 0 && g.tensors[t].role == hal::TensorRole::activation) a[1].push_back(range(t));
      if (op.kind == hal::OpKind::store_kv || op.kind == hal::OpKind::attention)
        a[1].push_back({placed_.n_spaces, 0, 1});  // chunk rows, chunk metadata and key mass
    }
  }
  if (threads_) add_waits(*p, access);
  // A view-driven device takes a matmul's folded branches with its call (the steps no longer move).
  for (Step& st : p->steps)
    if (st.on_views && !st.lora.empty()) st.call.lora = st.lora.data(), st.call.n_lora = static_cast<int>(st.lora.size());
  ++figures_.preparations;
  if (cache_.size() >= kMaxPreparedShapes) {
    cache_.erase(cache_order_.front());
    cache_order_.pop_front();
  }
  cache_order_.push_back(key);
  return cache_.emplace(key, std::move(p)).first->second.get();
}

int64_t Forward::query_cols(int layer) const {
  const ElasticSpec* spec = model_.elastic();
  const int heads = level_ >= 0 && spec && spec->cuts_heads() ? spec->head_keep[level_][layer] : cfg_.n_head;
  return int64_t{heads} * cfg_.head_dim;
}

Status Forward::prepare(int tokens, int outputs) {
  if (tokens < 1 || tokens > max_batch_ || outputs < 0 || outputs > tokens)
    return Status(Code::invalid_argument, "forward: a step of " + std::to_string(tokens) + " tokens and " +
                                              std::to_string(outputs) + " outputs");
  LLMSVC_RETURN_IF_ERROR(ensure_arenas());
  auto p = prepared(hal::Shape{tokens, outputs});
  return p.ok() ? Status::Ok() : p.status();
}

void Forward::add_waits(Prepared& p, const std::vector<std::array<std::vector<std::array<int64_t, 3>>, 2>>& access) const {
  auto meet = [](const std::vector<std::array<int64_t, 3>>& a, const std::vector<std::array<int64_t, 3>>& b) {
    for (const auto& x : a)
      for (const auto& y : b)
        if (x[0] == y[0] && x[1] < y[2] && y[1] < x[2]) return true;
    return false;
  };
  const int32_t n = static_cast<int32_t>(p.steps.size());
  p.order.assign(devices_.size(), {});
  for (int32_t j = 0; j < n; ++j) {
    Step& s = p.steps[j];
    p.order[s.device].push_back(j);
    for (int32_t i = j - 1; i >= 0; --i) {
      const int d = p.steps[i].device;
      // A step of the same device runs before it anyway; an earlier need on d is covered.
      if (d == s.device || s.waits[d] >= i) continue;
      if (meet(access[i][1], access[j][0]) || meet(access[i][1], access[j][1]) || meet(access[i][0], access[j][1]))
        s.waits[d] = i;
    }
  }
}

Status Forward::eval(policy::KvSequence& seq, std::span<const int32_t> tokens, int pos0, bool all_logits,
                     std::vector<float>& logits) {
  const int n_total = static_cast<int>(tokens.size());
  if (n_total == 0) return Status(Code::invalid_argument, "forward: no tokens");
  for (int32_t t : tokens)
    if (t < 0 || t >= cfg_.n_vocab) return Status(Code::invalid_argument, "forward: token id " + std::to_string(t) + " out of range");
  LLMSVC_RETURN_IF_ERROR(ensure_arenas());
  LLMSVC_RETURN_IF_ERROR(seq.reserve(pos0 + n_total));
  const size_t V = cfg_.n_vocab;
  logits.resize(all_logits ? V * n_total : V);

  for (int b0 = 0, n = 0; b0 < n_total; b0 += n) {
    // A lone token takes llama.cpp's single-token summation orders (see hal::Device::attention):
    // a prompt is never split so that one token is left alone.
    n = std::min(max_batch_, n_total - b0);
    if (n_total - b0 - n == 1 && n > 2) --n;
    const int p0 = pos0 + b0;
    for (int i = 0; i < n; ++i) pos_[i] = p0 + i;
    // The rows whose logits are wanted: all, the last token's, or none (an earlier micro-batch).
    const bool last_batch = b0 + n == n_total;
    const int n_out = all_logits ? n : (last_batch ? 1 : 0);
    auto p = prepared(hal::Shape{n, n_out});
    if (!p.ok()) return p.status();
    Run r;
    r.seq = &seq;
    r.ids = tokens.data() + b0;
    r.logits = all_logits ? logits.data() + size_t(b0) * V : logits.data();
    r.n = n;
    r.n_valid = p0 + n;
    r.track_mass = track_mass_;
    LLMSVC_RETURN_IF_ERROR(run(**p, r));
    seq.note_queries(p0, n);
  }
  return Status::Ok();
}

Status Forward::recompute(policy::KvSequence& seq, std::span<const int32_t> tokens, std::span<const int32_t> positions,
                          int n_valid, const LayerHook& before_layer) {
  const int n_total = static_cast<int>(tokens.size());
  if (positions.size() != tokens.size()) return Status(Code::internal, "forward: tokens and positions differ in length");
  const int C = seq.geometry().chunk_tokens;
  for (int i = 0; i < n_total; ++i) {
    if (tokens[i] < 0 || tokens[i] >= cfg_.n_vocab) return Status(Code::invalid_argument, "forward: token id out of range");
    const int p = positions[i];
    if (p < 0 || p >= n_valid || (i > 0 && p <= positions[i - 1]) || p >= seq.capacity() ||
        seq.state(p / C) != policy::ChunkState::resident || seq.format(p / C) != hal::KvFormat::f16)
      return Status(Code::internal, "forward: recompute position " + std::to_string(p) + " is not a writable slot");
  }
  LLMSVC_RETURN_IF_ERROR(ensure_arenas());
  for (int b0 = 0, n = 0; b0 < n_total; b0 += n) {
    n = std::min(max_batch_, n_total - b0);
    if (n_total - b0 - n == 1 && n > 2) --n;  // as eval splits
    for (int i = 0; i < n; ++i) pos_[i] = positions[b0 + i];
    auto p = prepared(hal::Shape{n, 0});
    if (!p.ok()) return p.status();
    Run r;
    r.seq = &seq;
    r.ids = tokens.data() + b0;
    r.n = n;
    // Keys up to the batch's last position are visible (causally masked per query); later
    // batches' chunks are not needed by this one.
    r.n_valid = std::min(n_valid, pos_[n - 1] + 1);
    r.before_layer = b0 == 0 && before_layer ? &before_layer : nullptr;
    LLMSVC_RETURN_IF_ERROR(run(**p, r));
  }
  return Status::Ok();
}

Status Forward::bind(const Run& r) {
  if (view_devices_.empty()) return Status::Ok();
  policy::KvSequence& seq = *r.seq;
  const policy::KvGeometry& geo = seq.geometry();
  const int n_chunks = std::min(seq.n_chunks(), (r.n_valid + geo.chunk_tokens - 1) / geo.chunk_tokens);
  chunk_memory_.resize(n_chunks);
  chunk_format_.resize(n_chunks);
  chunk_mass_.resize(r.track_mass ? n_chunks : 0);
  for (int c = 0; c < n_chunks; ++c) {
    chunk_memory_[c] = seq.chunk_memory(c);
    chunk_format_[c] = seq.format(c);
    if (r.track_mass) chunk_mass_[c] = seq.mass(c);
  }
  hal::BatchBinding b;
  b.ids = r.ids;
  b.positions = pos_.data();
  b.n = r.n;
  b.logits = r.logits;
  b.chunk_memory = chunk_memory_;
  b.chunk_format = chunk_format_;
  b.chunk_tokens = geo.chunk_tokens;
  b.n_layer = geo.n_layer;
  b.n_head_kv = geo.n_head_kv;
  b.head_dim = geo.head_dim;
  b.n_valid = r.n_valid;
  b.chunk_mass = chunk_mass_;
  b.may_fuse = devices_.size() == 1;
  for (int d : view_devices_) LLMSVC_RETURN_IF_ERROR(devices_[d]->begin(b));
  return Status::Ok();
}

Status Forward::unbind(Status s) {
  for (int d : view_devices_) {
    Status e = devices_[d]->end();  // always: nothing of this batch may stay in flight
    if (s.ok()) s = e;
  }
  return s;
}

Status Forward::run(const Prepared& p, const Run& r) {
  LLMSVC_RETURN_IF_ERROR(bind(r));
  if (threads_ && !r.before_layer && !tap_) {
    struct Steps final : StepList {
      Forward& f;
      const Prepared& p;
      const Run& r;
      std::vector<Status>& failed;  // per device: its own thread's first failure
      Steps(Forward& f, const Prepared& p, const Run& r, std::vector<Status>& failed) : f(f), p(p), r(r), failed(failed) {}
      const StepWaits& waits(int32_t i) const override { return p.steps[i].waits; }
      void run(int32_t i) override {
        const Step& s = p.steps[i];
        if (!failed[s.device].ok()) return;
        failed[s.device] = f.run_step(s, r);
        GraphFigures::Device& d = f.figures_.devices[s.device];  // each device's figures are its own thread's
        ++d.ops;
        d.bytes += s.bytes_out;
      }
    };
    std::vector<Status>& failed = step_failed_;  // sized once: a decode step allocates nothing
    failed.assign(devices_.size(), Status::Ok());
    Steps steps(*this, p, r, failed);
    const double t0 = now_s();
    threads_->run(p.order, steps, busy_);
    for (size_t d = 0; d < devices_.size(); ++d) figures_.devices[d].busy_s += busy_[d];
    figures_.run_s += now_s() - t0;
    ++figures_.runs;
    Status first;
    for (const Status& f : failed)
      if (first.ok()) first = f;
    return unbind(first);
  }
  // Busy time is taken per run of consecutive steps on one device: two clock reads per step
  // on one device would cost more than the steps of a small model's decode.
  const double t0 = now_s();
  double seg_start = t0;
  int seg_device = p.steps.empty() ? 0 : p.steps.front().device;
  int layer = -1;
  Status status;
  for (const Step& s : p.steps) {
    if (r.before_layer && s.call.layer > layer) {
      layer = s.call.layer;
      status = (*r.before_layer)(layer);
      if (!status.ok()) break;
    }
    if (s.device != seg_device) {
      const double t = now_s();
      figures_.devices[seg_device].busy_s += t - seg_start;
      seg_start = t;
      seg_device = s.device;
    }
    status = run_step(s, r);
    if (!status.ok()) break;
    if (tap_ && !s.on_views) {
      if (s.call.kind == hal::OpKind::swiglu || s.call.kind == hal::OpKind::geglu)
        tap_(s.call.layer, TapPoint::ffn_act, s.out[0], static_cast<int>(s.call.rows), s.call.cols_out);
      else if (s.call.kind == hal::OpKind::attention)
        tap_(s.call.layer, TapPoint::attention, s.out[0], static_cast<int>(s.call.rows),
             int64_t{s.call.i[0]} * s.call.i[2]);
    }
    ++figures_.devices[s.device].ops;
    figures_.devices[s.device].bytes += s.bytes_out;
  }
  status = unbind(status);
  const double t1 = now_s();
  figures_.devices[seg_device].busy_s += t1 - seg_start;
  figures_.run_s += t1 - t0;
  ++figures_.runs;
  return status;
}

Status Forward::run_step(const Step& s, const Run& r) {
  using hal::OpKind;
  const hal::OpCall& c = s.call;
  if (c.kind == OpKind::copy) {
    hal::Queue& q = devices_[s.queue_device]->queue();
    q.copy(*s.src, s.src_offset, *s.dst, s.dst_offset, s.bytes).wait();
    GraphFigures::Device& f = figures_.devices[s.device];
    ++f.transfers;
    f.transfer_bytes += s.bytes;
    return q.status();
  }
  hal::Device& dev = *devices_[s.device];
  if (s.on_views) return dev.run(c);
  const int rows = static_cast<int>(c.rows);
  switch (c.kind) {
    case OpKind::get_rows:
      dev.get_rows(*s.table, r.ids, rows, s.out[0]);
      break;
    case OpKind::rms_norm: {
      const int dim = c.i[0];
      dev.rms_norm(s.in[0], s.param, static_cast<int>(c.rows * c.cols_in / dim), dim, c.f[0], s.out[0]);
      break;
    }
    case OpKind::matmul: {
      float* out0 = c.logits_out ? r.logits : s.out[0];
      if (!s.lora.empty()) {
        float* ys[3] = {out0, s.out[1], s.out[2]};
        dev.matmul_lora(c.w, ys, c.n_weights, s.in[0], rows, s.lora.data(), static_cast<int>(s.lora.size()));
      } else if (c.n_weights == 1) {
        dev.matmul(*c.w[0], s.in[0], rows, out0);
      } else {
        float* ys[3] = {out0, s.out[1], s.out[2]};
        dev.matmul_multi(c.w, ys, c.n_weights, s.in[0], rows);
      }
      break;
    }
    case OpKind::add_bias:
      dev.add_bias(s.out[0], s.param, rows, static_cast<int>(c.cols_out));
      break;
    case OpKind::rope:
      dev.rope(s.out[0], rows, c.i[0], c.i[1], c.i[2], pos_.data(), c.f[0], c.f[1], static_cast<hal::RopeStyle>(c.i[3]));
      break;
    case OpKind::scale:
      dev.scale(s.out[0], size_t(c.rows) * c.cols_out, c.f[0]);
      break;
    case OpKind::store_kv: {
      const int KV = cfg_.kv_dim();
      for (int t = 0; t < rows; ++t) {
        dev.store_f16(s.in[0] + size_t(t) * KV, r.seq->k(c.layer, pos_[t]), KV);
        dev.store_f16(s.in[1] + size_t(t) * KV, r.seq->v(c.layer, pos_[t]), KV);
      }
      break;
    }
    case OpKind::attention: {
      // The chunks this batch can see (sliding layers skip chunks wholly outside the window of
      // the batch's first query).
      policy::KvSequence& seq = *r.seq;
      std::vector<hal::KvChunkView>& views = views_[s.device];
      const int C = seq.geometry().chunk_tokens, end = r.n_valid, window = c.i[3];
      const int lo = window > 0 ? std::max(0, pos_[0] - window + 1) : 0;
      views.clear();
      for (int k = lo / C; k * C < end; ++k) {
        hal::KvChunkView view;
        view.format = seq.format(k);
        view.k = seq.block(k, c.layer, hal::KvPart::key);
        view.v = seq.block(k, c.layer, hal::KvPart::value);
        view.n_tokens = view.format == hal::KvFormat::f16 ? std::min(C, end - k * C) : C;
        view.first_pos = k * C;
        view.mass = r.track_mass ? seq.mass(k) : nullptr;
        views.push_back(view);
      }
      hal::AttentionParams ap;
      ap.n_head = c.i[0];
      ap.n_head_kv = c.i[1];
      ap.head_dim = c.i[2];
      ap.scale = c.f[0];
      ap.sliding_window = window;
      ap.rank_major = c.i[4] != 0;
      dev.attention(s.in[0], rows, pos_.data(), views.data(), static_cast<int>(views.size()), ap, s.out[0]);
      break;
    }
    case OpKind::last_rows:
      std::copy_n(s.out[0] + size_t(c.from_row) * c.cols_out, size_t(c.rows) * c.cols_out, s.out[0]);
      break;
    case OpKind::add:
      dev.add(s.out[0], s.in[1], size_t(c.rows) * c.cols_out);
      break;
    case OpKind::swiglu:
      dev.swiglu(s.out[0], s.in[1], size_t(c.rows) * c.cols_out);
      break;
    case OpKind::geglu:
      dev.geglu(s.out[0], s.in[1], size_t(c.rows) * c.cols_out);
      break;
    case OpKind::copy:
    case OpKind::count_:
      break;
  }
  return Status::Ok();
}

}  // namespace llmsvc
