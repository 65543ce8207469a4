// SPDX-License-Identifier: Apache-2.0
// LoRA adapters: metadata and tensor pairs checked against the model, prepared on its device.
#include "runtime/core/model/lora_adapter.h"

#include <cmath>
#include <map>
#include <optional>

#include "hal/weight_type.h"
#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/model/model.h"
#include "runtime/core/model/unit_permute.h"

namespace llmsvc {
namespace {

constexpr std::string_view kSuffixA = ".lora_a", kSuffixB = ".lora_b";
constexpr const char* kMatrixNames[kLoraMatrices] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                                     "ffn_gate", "ffn_up", "ffn_down"};

Status bad(Code code, const std::string& who, const std::string& what) {
  return Status(code, "lora adapter " + who + ": " + what);
}

// "blk.<il>.<matrix>.weight" -> (il, matrix), or nullopt.
std::optional<std::pair<int, LoraMatrix>> parse_base(std::string_view base, int n_layer) {
  if (!base.starts_with("blk.") || !base.ends_with(".weight")) return std::nullopt;
  std::string_view rest = base.substr(4, base.size() - 4 - 7);
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 6) return std::nullopt;
  int il = 0;
  for (char ch : rest.substr(0, dot)) {
    if (ch < '0' || ch > '9') return std::nullopt;
    il = il * 10 + (ch - '0');
  }
  if (il >= n_layer || (dot > 1 && rest[0] == '0')) return std::nullopt;
  const std::string_view m = rest.substr(dot + 1);
  for (int k = 0; k < kLoraMatrices; ++k)
    if (m == kMatrixNames[k]) return std::pair{il, static_cast<LoraMatrix>(k)};
  return std::nullopt;
}

const hal::PreparedWeight* base_weight(const Model& model, int il, LoraMatrix m) {
  const LayerWeights& L = model.layers()[il];
  switch (m) {
    case LoraMatrix::q: return L.wq.get();
    case LoraMatrix::k: return L.wk.get();
    case LoraMatrix::v: return L.wv.get();
    case LoraMatrix::o: return L.wo.get();
    case LoraMatrix::gate: return L.w_gate.get();
    case LoraMatrix::up: return L.w_up.get();
    case LoraMatrix::down: return L.w_down.get();
    case LoraMatrix::count_: break;
  }
  return nullptr;
}

// A tensor's bytes as a [rows][cols] weight, when the device takes its type.
Result<hal::WeightRef> weight_ref(const std::string& who, const gguf::TensorInfo& t, const hal::Device& dev) {
  const uint32_t type = static_cast<uint32_t>(t.type);
  if (!hal::is_supported_weight_type(type) || !dev.supports(static_cast<hal::WeightType>(type))) {
    const gguf::TypeTraits* tt = gguf::type_traits(type);
    return bad(Code::unsupported, who, "tensor '" + t.name + "' has type " +
                                           (tt ? std::string(tt->name) : std::to_string(type)) + ", which " +
                                           dev.name() + " cannot prepare");
  }
  const uintptr_t need = t.type == gguf::TensorType::F32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(t.data) % need != 0)
    return bad(Code::model_invalid, who, "tensor '" + t.name + "' data is not " + std::to_string(need) + "-byte aligned");
  hal::WeightRef w;
  w.type = static_cast<hal::WeightType>(type);
  w.data = t.data;
  w.cols = static_cast<int64_t>(t.ne[0]);
  w.rows = static_cast<int64_t>(t.ne[1]);
  w.row_bytes = hal::row_bytes(w.type, w.cols);
  return w;
}

// "'<text>'" (appended: GCC 12 warns falsely of a "literal" + string chain).
std::string quoted(std::string_view text) {
  std::string q = "'";
  q.append(text).append("'");
  return q;
}

std::string file_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return quoted(slash == std::string::npos ? path : path.substr(slash + 1));
}

}  // namespace

LoraAdapter::~LoraAdapter() = default;

Result<std::unique_ptr<LoraAdapter>> LoraAdapter::load(const std::string& path, const Model& model, hal::Device& device) {
  return from_file(gguf::GgufFile::open(path), file_name(path), model, device);
}

Result<std::unique_ptr<LoraAdapter>> LoraAdapter::from_memory(std::span<const uint8_t> bytes, const Model& model,
                                                              hal::Device& device) {
  return from_file(gguf::GgufFile::from_memory(bytes), "(in memory)", model, device);
}

Result<std::unique_ptr<LoraAdapter>> LoraAdapter::from_file(Result<std::unique_ptr<gguf::GgufFile>> file,
                                                            std::string who, const Model& model, hal::Device& device) {
  if (&device != &model.device()) return bad(Code::invalid_argument, who, "must be prepared on the model's own device");
  if (!file.ok()) return Status(file.status().code(), "lora adapter " + who + ": " + file.status().message());
  const gguf::GgufFile& f = **file;
  const auto type = f.get_string("general.type");
  if (!type || *type != "adapter")
    return bad(Code::model_invalid, who, "general.type is " + (type ? quoted(*type) : std::string("missing")) +
                                             ", not 'adapter'");
  const auto arch = f.get_string("general.architecture");
  if (!arch) return bad(Code::model_invalid, who, "general.architecture is missing");
  if (*arch != model.config().arch_name)
    return bad(Code::model_mismatch, who, "general.architecture is '" + std::string(*arch) + "', the model's is '" +
                                              model.config().arch_name + "'");
  const auto kind = f.get_string("adapter.type");
  if (!kind) return bad(Code::model_invalid, who, "adapter.type is missing");
  if (*kind != "lora") return bad(Code::unsupported, who, "adapter.type is '" + std::string(*kind) + "', not 'lora'");
  // An activated LoRA applies only after its invocation tokens: running it always would be wrong.
  if (f.find("adapter.alora.invocation_tokens"))
    return bad(Code::unsupported, who, "adapter.alora.invocation_tokens: activated LoRA (aLoRA) is not supported");
  float alpha = 0;
  if (f.find("adapter.lora.alpha")) {
    const auto a = f.get_float("adapter.lora.alpha");
    if (!a) return bad(Code::model_invalid, who, "adapter.lora.alpha is not a float");
    if (!std::isfinite(*a) || std::fabs(*a) > 3.0e38) return bad(Code::model_invalid, who, "adapter.lora.alpha is not finite");
    alpha = static_cast<float>(*a);
  }
  const gguf::GgufFile* fp = file->get();
  auto a = build(std::move(file).value(), *fp, "", true, model, device, who);
  if (!a.ok()) return a.status();
  (*a)->alpha_ = alpha;
  return a;
}

Result<std::unique_ptr<LoraAdapter>> LoraAdapter::from_model_file(const Model& model, hal::Device& device,
                                                                  std::string_view prefix, float alpha) {
  const std::string who = quoted(prefix) + " of the model";
  if (&device != &model.device()) return bad(Code::invalid_argument, who, "must be prepared on the model's own device");
  if (!std::isfinite(alpha)) return bad(Code::model_invalid, who, "alpha is not finite");
  auto a = build(nullptr, model.file(), prefix, false, model, device, who);
  if (!a.ok()) return a.status();
  (*a)->alpha_ = alpha;
  return a;
}

Result<std::unique_ptr<LoraAdapter>> LoraAdapter::build(std::unique_ptr<gguf::GgufFile> own, const gguf::GgufFile& f,
                                                        std::string_view prefix, bool whole_file, const Model& model,
                                                        hal::Device& device, const std::string& who) {
  const ModelConfig& c = model.config();
  // Pair the tensors by base name first: every complaint below can then name the pair.
  std::map<std::string, std::array<const gguf::TensorInfo*, 2>> pairs;
  for (const gguf::TensorInfo& t : f.tensors()) {
    std::string_view name = t.name;
    if (!name.starts_with(prefix)) {
      if (whole_file) return bad(Code::model_invalid, who, "tensor '" + t.name + "' is not a LoRA tensor");
      continue;
    }
    name.remove_prefix(prefix.size());
    int part = -1;
    if (name.ends_with(kSuffixA)) part = 0;
    else if (name.ends_with(kSuffixB)) part = 1;
    if (part < 0) {
      if (whole_file && name.ends_with("_norm.weight")) continue;  // llama.cpp ignores these too
      return bad(Code::model_invalid, who, "tensor '" + t.name + "' is neither a .lora_a nor a .lora_b");
    }
    name.remove_suffix(kSuffixA.size());
    auto& slot = pairs[std::string(name)][part];
    if (slot) return bad(Code::model_invalid, who, "tensor '" + t.name + "' appears twice");
    slot = &t;
  }
  if (pairs.empty()) return bad(Code::model_invalid, who, "has no LoRA tensors");

  auto adapter = std::make_unique<LoraAdapter>(Key{});
  adapter->file_ = std::move(own);
  adapter->name_ = who;
  adapter->model_ = &model;
  adapter->layers_.resize(c.n_layer);
  for (const auto& [base, ab] : pairs) {
    const std::string pre(prefix);
    if (!ab[0] || !ab[1])
      return bad(Code::model_invalid, who, "tensor '" + pre + base + std::string(ab[0] ? kSuffixA : kSuffixB) +
                                               "' has no " + std::string(ab[0] ? kSuffixB : kSuffixA) + " to pair with");
    const auto where = parse_base(base, c.n_layer);
    if (!where) {
      if (base == "token_embd.weight" || base == "output.weight")
        return bad(Code::unsupported, who, "adapters of '" + base + "' are not supported (only the layers' matrices)");
      if (model.file().find_tensor(base))
        return bad(Code::unsupported, who, "adapters of '" + base + "' are not supported (only attn_q/k/v/output, ffn_gate/up/down)");
      return bad(Code::model_mismatch, who, "tensor '" + pre + base + ".lora_a' adapts '" + base +
                                                "', which the model does not have");
    }
    const auto [il, m] = *where;
    const hal::WeightRef& w = base_weight(model, il, m)->ref();
    const gguf::TensorInfo& ta = *ab[0];
    const gguf::TensorInfo& tb = *ab[1];
    if (ta.n_dims != 2 || tb.n_dims != 2 || static_cast<int64_t>(ta.ne[0]) != w.cols ||
        static_cast<int64_t>(tb.ne[1]) != w.rows || ta.ne[1] != tb.ne[0])
      return bad(Code::model_mismatch, who, "tensors '" + ta.name + "' " + gguf::shape_text(ta) + " and '" + tb.name + "' " +
                                                gguf::shape_text(tb) + " do not fit '" + base + "' {" + std::to_string(w.cols) +
                                                ", " + std::to_string(w.rows) + "}");
    const uint64_t r = ta.ne[1];
    if (r < 1 || r > static_cast<uint64_t>(kMaxRank))
      return bad(Code::unsupported, who, "tensor '" + ta.name + "' has rank " + std::to_string(r) + " (1.." +
                                             std::to_string(kMaxRank) + ")");
    if (adapter->rank_ == 0) adapter->rank_ = static_cast<int>(r);
    if (static_cast<int>(r) != adapter->rank_)
      return bad(Code::unsupported, who, "tensor '" + ta.name + "' has rank " + std::to_string(r) + ", others " +
                                             std::to_string(adapter->rank_) + " (one rank per adapter)");
    Pair& pair = adapter->layers_[il][static_cast<int>(m)];
    for (int part = 0; part < 2; ++part) {
      auto ref = weight_ref(who, *ab[part], device);
      if (!ref.ok()) return ref.status();
      // A model holding its query heads rank-major (Model::load) needs q's B rows and o's A
      // columns in that order too.
      const bool relay = c.q_heads_rank_major && ((m == LoraMatrix::q && part == 1) || (m == LoraMatrix::o && part == 0));
      if (relay) {
        const auto heads = rank_major_heads(c.n_head, c.n_head_kv);
        auto moved = part == 1 ? permuted_rows(*ref, heads, c.head_dim) : permuted_cols(*ref, heads, c.head_dim);
        if (!moved.ok()) return bad(Code::model_invalid, who, "tensor '" + ab[part]->name + "': " + moved.status().message());
        ref->data = adapter->relaid_.emplace_back(std::move(moved).value()).data();
      }
      auto p = device.prepare_weight(*ref);
      if (!p.ok()) return bad(p.status().code(), who, "tensor '" + ab[part]->name + "': " + p.status().message());
      pair[part] = std::move(p).value();
      if (relay && pair[part]->owns_copy()) adapter->relaid_.back() = {};
      adapter->bytes_ += ab[part]->n_bytes;
    }
  }
  LLMSVC_RETURN_IF_ERROR(adapter->make_level_views(model, device));
  return adapter;
}

namespace {

static_assert(Model::kLevelParts == 5, "lora_adapter.h's level_views_ holds one view per level part");

// The matrix of Model::LevelPart `part`, and back (-1: a matrix no level cuts).
LoraMatrix level_matrix(int part) {
  constexpr LoraMatrix kMatrix[Model::kLevelParts] = {LoraMatrix::q, LoraMatrix::o, LoraMatrix::gate, LoraMatrix::up,
                                                      LoraMatrix::down};
  return kMatrix[part];
}
int level_part(LoraMatrix m) {
  for (int part = 0; part < Model::kLevelParts; ++part)
    if (level_matrix(part) == m) return part;
  return -1;
}
// A level cuts A's columns of O and down (their inputs), B's rows of the others (their outputs).
bool cut_on_a(LoraMatrix m) { return m == LoraMatrix::o || m == LoraMatrix::down; }

}  // namespace

Status LoraAdapter::make_level_views(const Model& model, hal::Device& device) {
  const ElasticSpec* s = model.elastic();
  if (!s) {
    levels_status_ = model.levels_status();
    return Status::Ok();
  }
  if (!model.levels_status().ok()) {
    levels_status_ = model.levels_status();
    return Status::Ok();
  }
  const ModelConfig& c = model.config();
  level_views_.resize(s->levels.size());
  for (size_t lv = 0; lv + 1 < s->levels.size(); ++lv) {
    level_views_[lv].resize(c.n_layer);
    for (int il = 0; il < c.n_layer; ++il) {
      const int keep = s->ffn_keep[lv][il];
      const int q_keep = (s->cuts_heads() ? s->head_keep[lv][il] : c.n_head) * c.head_dim;
      for (int part = 0; part < Model::kLevelParts; ++part) {
        const LoraMatrix m = level_matrix(part);
        const bool ffn = part >= static_cast<int>(Model::LevelPart::gate);
        const int units = ffn ? keep : q_keep;
        if (units == (ffn ? c.n_ff : c.n_head * c.head_dim)) continue;
        const Pair& pair = layers_[il][static_cast<int>(m)];
        if (!pair[0]) continue;
        // q/gate/up: B's rows are the layer's heads or neurons; o/down: A's columns are.
        const bool on_a = cut_on_a(m);
        const hal::PreparedWeight& w = on_a ? *pair[0] : *pair[1];
        auto v = on_a ? device.slice_weight(w, rank_, units) : device.slice_weight(w, units, rank_);
        if (!v.ok()) {
          // The adapter still runs at the full level; only the smaller ones are out of reach.
          levels_status_ = bad(v.status().code(), name_,
                               "at elastic level " + std::to_string(s->levels[lv]) + " %, layer " + std::to_string(il) +
                                   ": " + v.status().message());
          level_views_.clear();
          return Status::Ok();
        }
        level_views_[lv][il][part] = std::move(v).value();
      }
    }
  }
  return Status::Ok();
}

bool LoraAdapter::has(int layer, LoraMatrix m) const {
  return layer >= 0 && static_cast<size_t>(layer) < layers_.size() && layers_[layer][static_cast<int>(m)][0] != nullptr;
}

const hal::PreparedWeight* LoraAdapter::weight(int level, int layer, LoraMatrix m, LoraPart part) const {
  if (!has(layer, m)) return nullptr;
  const int k = level_part(m);
  const bool cut_part = k >= 0 && cut_on_a(m) == (part == LoraPart::a);
  if (cut_part && level >= 0 && static_cast<size_t>(level) < level_views_.size() &&
      static_cast<size_t>(layer) < level_views_[level].size()) {
    if (const auto& v = level_views_[level][layer][k]) return v.get();
  }
  return layers_[layer][static_cast<int>(m)][static_cast<int>(part)].get();
}

}  // namespace llmsvc
