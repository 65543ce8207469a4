// SPDX-License-Identifier: Apache-2.0
// Model loading: every tensor the architecture needs is looked up, shape- and type-checked,
// and prepared on the device.
#include "runtime/core/model/model.h"

#include <xxhash.h>

#include <cstdint>
#include <string>

#include "hal/weight_type.h"
#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/model/lora_adapter.h"
#include "runtime/core/model/unit_permute.h"

namespace llmsvc {
namespace {

Status unsupported_type(const std::string& name, const gguf::TensorInfo& t) {
  const gguf::TypeTraits* tt = gguf::type_traits(static_cast<uint32_t>(t.type));
  return Status(Code::unsupported, "model: tensor '" + name + "' has weight type " +
                                       (tt ? std::string(tt->name) : std::to_string(static_cast<uint32_t>(t.type))) +
                                       ", which is not supported");
}

// Kernels read elements and block scales (f16) in place, so the data must be aligned for
// them; a file declaring general.alignment 1 or 2 can place a tensor anywhere.
Status check_aligned(const std::string& name, const gguf::TensorInfo& t) {
  const uintptr_t need = t.type == gguf::TensorType::F32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(t.data) % need == 0) return Status::Ok();
  return Status(Code::model_invalid, "model: tensor '" + name + "' data (offset " + std::to_string(t.offset) +
                                         ") is not " + std::to_string(need) + "-byte aligned");
}

// Finds tensor `name` and checks it is 2-D [rows][cols] (ggml ne = {cols, rows}) of a supported type.
Result<hal::WeightRef> matrix(const gguf::GgufFile& f, const std::string& name, int64_t cols, int64_t rows) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) return Status(Code::model_invalid, "model: tensor '" + name + "' is missing");
  if (t->n_dims != 2 || static_cast<int64_t>(t->ne[0]) != cols || static_cast<int64_t>(t->ne[1]) != rows)
    return Status(Code::model_invalid, "model: tensor '" + name + "' has shape " + gguf::shape_text(*t) + ", expected {" +
                                           std::to_string(cols) + ", " + std::to_string(rows) + "}");
  if (!hal::is_supported_weight_type(static_cast<uint32_t>(t->type))) return unsupported_type(name, *t);
  LLMSVC_RETURN_IF_ERROR(check_aligned(name, *t));
  hal::WeightRef w;
  w.type = static_cast<hal::WeightType>(t->type);
  w.data = t->data;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = hal::row_bytes(w.type, cols);
  return w;
}

// A 1-D float vector of `n` elements, copied out of the file as f32 (any supported type).
Status vector_param(const gguf::GgufFile& f, const std::string& name, int64_t n, FloatParam* out, hal::Device& dev) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) return Status(Code::model_invalid, "model: tensor '" + name + "' is missing");
  if (t->n_dims != 1 || static_cast<int64_t>(t->ne[0]) != n)
    return Status(Code::model_invalid, "model: tensor '" + name + "' has shape " + gguf::shape_text(*t) + ", expected {" +
                                           std::to_string(n) + "}");
  if (!hal::is_supported_weight_type(static_cast<uint32_t>(t->type))) return unsupported_type(name, *t);
  LLMSVC_RETURN_IF_ERROR(check_aligned(name, *t));
  hal::WeightRef ref{static_cast<hal::WeightType>(t->type), t->data, 1, n, hal::row_bytes(static_cast<hal::WeightType>(t->type), n)};
  out->values.resize(n);
  int32_t zero = 0;
  dev.get_rows(ref, &zero, 1, out->values.data());
  f.release_pages(*t);
  return Status::Ok();
}

}  // namespace

Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::load(const std::string& path, hal::Device& device) {
  auto file = gguf::GgufFile::open(path);
  if (!file.ok()) return file.status();
  auto m = std::make_unique<Model>(Key{});
  m->file_ = std::move(file).value();
  m->device_ = &device;
  auto cfg = read_model_config(*m->file_);
  if (!cfg.ok()) return cfg.status();
  m->config_ = std::move(cfg).value();
  auto tok = Tokenizer::from_gguf(*m->file_);
  if (!tok.ok()) return tok.status();
  m->tokenizer_ = std::move(tok).value();
  m->chat_ = make_chat_template(*m->file_);
  m->hash_identity();  // before load_weights drops the pages it has copied
  auto spec = read_elastic_spec(*m->file_, m->config_);
  if (!spec.ok()) return spec.status();
  m->elastic_ = std::move(spec).value();
  // Head levels need the query heads rank-major, where the device runs levels at all; with
  // one KV group (or one head per group) the file's order is rank-major already.
  const ModelConfig& c = m->config_;
  m->config_.q_heads_rank_major = m->elastic_ && m->elastic_->cuts_heads() && device.caps().slices_weights &&
                                  c.n_head_kv > 1 && c.n_head > c.n_head_kv;
  LLMSVC_RETURN_IF_ERROR(m->load_weights(device));
  LLMSVC_RETURN_IF_ERROR(m->load_levels(device));
  LLMSVC_RETURN_IF_ERROR(m->load_recovery(device));
  return m;
}

void Model::hash_identity() {
  const auto bytes = file_->bytes();
  content_hash_ = XXH3_64bits(bytes.data(), bytes.size());
  XXH3_state_t* st = XXH3_createState();
  if (!st) return;  // out of memory: the vocabulary stays unidentified (0)
  XXH3_64bits_reset(st);
  if (const auto* tokens = file_->get_string_array("tokenizer.ggml.tokens")) {
    for (const std::string& t : *tokens) {
      const uint64_t len = t.size();  // length-prefixed: no two lists hash alike by concatenation
      XXH3_64bits_update(st, &len, sizeof len);
      XXH3_64bits_update(st, t.data(), t.size());
    }
  }
  vocab_hash_ = XXH3_64bits_digest(st);
  XXH3_freeState(st);
}

Status Model::load_weights(hal::Device& dev) {
  const gguf::GgufFile& f = *file_;
  ModelConfig& c = config_;
  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  if (!emb) return Status(Code::model_invalid, "model: tensor 'token_embd.weight' is missing");
  if (emb->n_dims != 2 || emb->ne[1] < 1 || emb->ne[1] > (1u << 22))
    return Status(Code::model_invalid, "model: tensor 'token_embd.weight' has shape " + gguf::shape_text(*emb));
  c.n_vocab = static_cast<int>(emb->ne[1]);
  if (tokenizer_->n_vocab() > c.n_vocab)
    return Status(Code::model_invalid, "model: tokenizer has " + std::to_string(tokenizer_->n_vocab()) +
                                           " tokens but token_embd.weight only " + std::to_string(c.n_vocab) + " rows");
  auto te = matrix(f, "token_embd.weight", c.n_embd, c.n_vocab);
  if (!te.ok()) return te.status();
  tok_embd_ = *te;

  // Rank-major query heads: Q's row units and O's column units of head_dim, moved.
  const std::vector<int> heads = c.q_heads_rank_major ? rank_major_heads(c.n_head, c.n_head_kv) : std::vector<int>{};
  enum class Relay { none, rows, cols };
  auto prep = [&](const std::string& name, int64_t cols, int64_t rows, std::unique_ptr<hal::PreparedWeight>* out,
                  Relay relay = Relay::none) -> Status {
    auto w = matrix(f, name, cols, rows);
    if (!w.ok()) return w.status();
    if (relay != Relay::none && !heads.empty()) {
      auto moved = relay == Relay::rows ? permuted_rows(*w, heads, c.head_dim) : permuted_cols(*w, heads, c.head_dim);
      if (!moved.ok()) return Status(Code::model_invalid, "model: tensor '" + name + "' (query heads): " + moved.status().message());
      w->data = relaid_.emplace_back(std::move(moved).value()).data();
    }
    auto p = dev.prepare_weight(*w);
    if (!p.ok()) return Status(p.status().code(), "model: tensor '" + name + "': " + p.status().message());
    *out = std::move(p).value();
    // A device that copied the weight never reads the file bytes again: drop them so the
    // process holds each weight once.
    if ((*out)->owns_copy()) {
      f.release_pages(*f.find_tensor(name));
      if (relay != Relay::none && !heads.empty()) relaid_.back() = {};  // nor the moved copy
    }
    weight_bytes_ += w->row_bytes * static_cast<uint64_t>(rows);
    return Status::Ok();
  };
  const int64_t q_dim = int64_t{c.n_head} * c.head_dim, kv_dim = c.kv_dim();
  layers_.resize(c.n_layer);
  for (int il = 0; il < c.n_layer; ++il) {
    LayerWeights& L = layers_[il];
    const std::string p = "blk." + std::to_string(il) + ".";
    LLMSVC_RETURN_IF_ERROR(vector_param(f, p + "attn_norm.weight", c.n_embd, &L.attn_norm, dev));
    LLMSVC_RETURN_IF_ERROR(vector_param(f, p + "ffn_norm.weight", c.n_embd, &L.ffn_norm, dev));
    LLMSVC_RETURN_IF_ERROR(prep(p + "attn_q.weight", c.n_embd, q_dim, &L.wq, Relay::rows));
    LLMSVC_RETURN_IF_ERROR(prep(p + "attn_k.weight", c.n_embd, kv_dim, &L.wk));
    LLMSVC_RETURN_IF_ERROR(prep(p + "attn_v.weight", c.n_embd, kv_dim, &L.wv));
    LLMSVC_RETURN_IF_ERROR(prep(p + "attn_output.weight", q_dim, c.n_embd, &L.wo, Relay::cols));
    LLMSVC_RETURN_IF_ERROR(prep(p + "ffn_gate.weight", c.n_embd, c.n_ff, &L.w_gate));
    LLMSVC_RETURN_IF_ERROR(prep(p + "ffn_up.weight", c.n_embd, c.n_ff, &L.w_up));
    LLMSVC_RETURN_IF_ERROR(prep(p + "ffn_down.weight", c.n_ff, c.n_embd, &L.w_down));
    if (c.has_qkv_bias) {
      LLMSVC_RETURN_IF_ERROR(vector_param(f, p + "attn_q.bias", q_dim, &L.bq, dev));
      if (!heads.empty()) {
        const hal::WeightRef b{hal::WeightType::F32, L.bq.values.data(), 1, q_dim, static_cast<size_t>(q_dim) * sizeof(float)};
        auto moved = permuted_cols(b, heads, c.head_dim);
        if (!moved.ok()) return moved.status();
        std::copy_n(reinterpret_cast<const float*>(moved->data()), q_dim, L.bq.values.data());
      }
      LLMSVC_RETURN_IF_ERROR(vector_param(f, p + "attn_k.bias", kv_dim, &L.bk, dev));
      LLMSVC_RETURN_IF_ERROR(vector_param(f, p + "attn_v.bias", kv_dim, &L.bv, dev));
    }
    if (c.has_qk_norm) {
      LLMSVC_RETURN_IF_ERROR(vector_param(f, p + "attn_q_norm.weight", c.head_dim, &L.attn_q_norm, dev));
      LLMSVC_RETURN_IF_ERROR(vector_param(f, p + "attn_k_norm.weight", c.head_dim, &L.attn_k_norm, dev));
    }
    if (c.has_post_norms) {
      LLMSVC_RETURN_IF_ERROR(vector_param(f, p + "post_attention_norm.weight", c.n_embd, &L.attn_post_norm, dev));
      LLMSVC_RETURN_IF_ERROR(vector_param(f, p + "post_ffw_norm.weight", c.n_embd, &L.ffn_post_norm, dev));
    }
  }
  LLMSVC_RETURN_IF_ERROR(vector_param(f, "output_norm.weight", c.n_embd, &output_norm_, dev));
  if (f.find_tensor("output.weight")) {
    LLMSVC_RETURN_IF_ERROR(prep("output.weight", c.n_embd, c.n_vocab, &output_));
  } else {
    // Tied embeddings: the output projection is the embedding table.
    auto p = dev.prepare_weight(tok_embd_);
    if (!p.ok()) return Status(p.status().code(), "model: tensor 'token_embd.weight': " + p.status().message());
    output_ = std::move(p).value();
    // Embedding lookups read only the rows they need from the file; the rest need not stay.
    if (output_->owns_copy()) f.release_pages(*f.find_tensor("token_embd.weight"));
  }
  // Lookups read a few rows of the table per call, wherever the tokens fall.
  f.advise_sparse(*f.find_tensor("token_embd.weight"));
  weight_bytes_ += tok_embd_.row_bytes * static_cast<uint64_t>(c.n_vocab);
  return Status::Ok();
}

Status Model::load_levels(hal::Device& dev) {
  if (!elastic_) {
    levels_status_ = Status(Code::unsupported, "the model has no elastic levels (make them with `llmsvc elastify`)");
    return Status::Ok();
  }
  const ElasticSpec& s = *elastic_;
  const ModelConfig& c = config_;
  // Reordering moved whole blocks of ffn_down's rows: a unit that splits a block would have
  // needed re-quantization, so a file claiming one was not made that way.
  for (int il = 0; il < c.n_layer; ++il) {
    const hal::WeightRef& down = layers_[il].w_down->ref();
    const int64_t block = hal::block_elems(down.type);
    if (s.ffn_unit % block != 0)
      return Status(Code::model_invalid, "model: llmsvc.elastic.ffn_unit " + std::to_string(s.ffn_unit) +
                                             " is not a multiple of blk." + std::to_string(il) +
                                             ".ffn_down.weight's block of " + std::to_string(block));
    // A head is head_dim columns of attn_output: whole blocks, or heads could not move intact.
    const int64_t o_block = hal::block_elems(layers_[il].wo->ref().type);
    if (s.cuts_heads() && c.head_dim % o_block != 0)
      return Status(Code::model_invalid, "model: llmsvc.elastic.head_keep: a head of " + std::to_string(c.head_dim) +
                                             " columns splits blk." + std::to_string(il) + ".attn_output.weight's blocks of " +
                                             std::to_string(o_block));
  }
  level_weights_.resize(s.levels.size());
  for (size_t lv = 0; lv + 1 < s.levels.size(); ++lv) {
    level_weights_[lv].resize(c.n_layer);
    for (int il = 0; il < c.n_layer; ++il) {
      const int keep = s.ffn_keep[lv][il];
      const int64_t q_keep = int64_t{s.cuts_heads() ? s.head_keep[lv][il] : c.n_head} * c.head_dim;
      const LayerWeights& L = layers_[il];
      auto& views = level_weights_[lv][il];
      struct Cut {
        const hal::PreparedWeight* w;
        int64_t rows, cols;
        bool whole;
      };
      const bool ffn_whole = keep == c.n_ff, heads_whole = q_keep == int64_t{c.n_head} * c.head_dim;
      const Cut cuts[kLevelParts] = {{L.wq.get(), q_keep, c.n_embd, heads_whole},
                                     {L.wo.get(), c.n_embd, q_keep, heads_whole},
                                     {L.w_gate.get(), keep, c.n_embd, ffn_whole},
                                     {L.w_up.get(), keep, c.n_embd, ffn_whole},
                                     {L.w_down.get(), c.n_embd, keep, ffn_whole}};
      for (int part = 0; part < kLevelParts; ++part) {
        if (cuts[part].whole) continue;
        auto v = dev.slice_weight(*cuts[part].w, cuts[part].rows, cuts[part].cols);
        if (v.status().code() == Code::unsupported) {
          // The model still runs whole; only the smaller levels are out of reach here.
          levels_status_ = v.status();
          level_weights_.clear();
          return Status::Ok();
        }
        if (!v.ok()) return Status(v.status().code(), "model: elastic level " + std::to_string(s.levels[lv]) +
                                                          " %, layer " + std::to_string(il) + ": " + v.status().message());
        views[part] = std::move(v).value();
      }
    }
  }
  return Status::Ok();
}

Status Model::load_recovery(hal::Device& dev) {
  if (!elastic_ || elastic_->recovery.empty()) return Status::Ok();
  recovery_.resize(elastic_->levels.size());
  for (size_t i = 0; i < elastic_->recovery.size(); ++i) {
    const int percent = elastic_->recovery[i];
    auto a = LoraAdapter::from_model_file(*this, dev, recovery_prefix(percent), elastic_->recovery_alpha[i]);
    if (!a.ok()) return Status(a.status().code(), "model: llmsvc.elastic.recovery level " + std::to_string(percent) +
                                                      " %: " + a.status().message());
    recovery_[elastic_->level_index(percent)] = std::move(a).value();
  }
  return Status::Ok();
}

const LoraAdapter* Model::recovery_adapter(int level) const {
  if (level < 0 || static_cast<size_t>(level) >= recovery_.size()) return nullptr;
  return recovery_[level].get();
}

const hal::PreparedWeight* Model::level_weight(int level, int il, LevelPart part) const {
  if (level < 0 || static_cast<size_t>(level) >= level_weights_.size()) return nullptr;
  const auto& layers = level_weights_[level];
  if (il < 0 || static_cast<size_t>(il) >= layers.size()) return nullptr;
  return layers[il][static_cast<int>(part)].get();
}

hal::PreparedWeight& Model::layer_weight(int il, LevelPart part) {
  LayerWeights& L = layers_.at(static_cast<size_t>(il));
  switch (part) {
    case LevelPart::q: return *L.wq;
    case LevelPart::o: return *L.wo;
    case LevelPart::gate: return *L.w_gate;
    case LevelPart::up: return *L.w_up;
    case LevelPart::down: break;
  }
  return *L.w_down;
}

Result<std::vector<uint8_t>> Model::relaid_source(int il, LevelPart part) const {
  const ModelConfig& c = config_;
  if (!c.q_heads_rank_major || (part != LevelPart::q && part != LevelPart::o)) return std::vector<uint8_t>{};
  const std::string name = "blk." + std::to_string(il) + (part == LevelPart::q ? ".attn_q.weight" : ".attn_output.weight");
  const int64_t q_dim = int64_t{c.n_head} * c.head_dim;
  auto w = part == LevelPart::q ? matrix(*file_, name, c.n_embd, q_dim) : matrix(*file_, name, q_dim, c.n_embd);
  if (!w.ok()) return w.status();
  const std::vector<int> heads = rank_major_heads(c.n_head, c.n_head_kv);
  return part == LevelPart::q ? permuted_rows(*w, heads, c.head_dim) : permuted_cols(*w, heads, c.head_dim);
}

namespace {

uint64_t matmul_bytes(const hal::PreparedWeight& w, int64_t rows, int64_t cols) {
  return hal::row_bytes(w.ref().type, cols) * static_cast<uint64_t>(rows);
}

}  // namespace

uint64_t Model::output_matmul_bytes() const { return matmul_bytes(*output_, config_.n_vocab, config_.n_embd); }

uint64_t Model::level_matmul_bytes(int level) const {
  const ModelConfig& c = config_;
  const bool cut = elastic_ && level >= 0 && level < elastic_->full();
  uint64_t bytes = output_matmul_bytes();
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& L = layers_[il];
    const int keep = cut ? elastic_->ffn_keep[level][il] : c.n_ff;
    const int64_t q_keep = int64_t{cut && elastic_->cuts_heads() ? elastic_->head_keep[level][il] : c.n_head} * c.head_dim;
    for (const auto* w : {L.wk.get(), L.wv.get()}) bytes += matmul_bytes(*w, w->ref().rows, w->ref().cols);
    bytes += matmul_bytes(*L.wq, q_keep, c.n_embd) + matmul_bytes(*L.wo, c.n_embd, q_keep);
    bytes += matmul_bytes(*L.w_gate, keep, c.n_embd) + matmul_bytes(*L.w_up, keep, c.n_embd) +
             matmul_bytes(*L.w_down, c.n_embd, keep);
  }
  return bytes;
}

}  // namespace llmsvc
