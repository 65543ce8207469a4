// SPDX-License-Identifier: Apache-2.0
// The forward pass for llama / qwen2 / gemma3, written once with per-architecture switches.
#include "runtime/core/graph/forward.h"

#include <algorithm>

namespace llmsvc {

Forward::Forward(const Model& model, hal::Device& device, int max_batch)
    : model_(model), dev_(device), cfg_(model.config()), max_batch_(std::max(1, max_batch)) {
  const size_t n = max_batch_, q_dim = size_t(cfg_.n_head) * cfg_.head_dim;
  x_.resize(n * cfg_.n_embd);
  h_.resize(n * cfg_.n_embd);
  o_.resize(n * cfg_.n_embd);
  q_.resize(n * q_dim);
  attn_.resize(n * q_dim);
  k_.resize(n * cfg_.kv_dim());
  v_.resize(n * cfg_.kv_dim());
  gate_.resize(n * cfg_.n_ff);
  up_.resize(n * cfg_.n_ff);
  pos_.resize(n);
}

Status Forward::eval(policy::KvSequence& seq, std::span<const int32_t> tokens, int pos0, bool all_logits,
                     std::vector<float>& logits) {
  const int n_total = static_cast<int>(tokens.size());
  if (n_total == 0) return Status(Code::invalid_argument, "forward: no tokens");
  for (int32_t t : tokens)
    if (t < 0 || t >= cfg_.n_vocab) return Status(Code::invalid_argument, "forward: token id " + std::to_string(t) + " out of range");
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
    dev_.get_rows(model_.token_embd(), tokens.data() + b0, n, x_.data());
    // The rows whose logits are wanted: all, the last token's, or none (an earlier micro-batch).
    const bool last_batch = b0 + n == n_total;
    const int n_out = all_logits ? n : (last_batch ? 1 : 0);
    LLMSVC_RETURN_IF_ERROR(layers(seq, n, p0 + n, /*track_mass=*/true, n_out));
    seq.note_queries(p0, n);
    if (n_out == 0) continue;

    // Final norm and output projection of the output rows (the first n_out rows of x_).
    dev_.rms_norm(x_.data(), model_.output_norm().data(), n_out, cfg_.n_embd, cfg_.rms_eps, h_.data());
    float* out = all_logits ? logits.data() + size_t(b0) * V : logits.data();
    dev_.matmul(model_.output(), h_.data(), n_out, out);
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
  for (int b0 = 0, n = 0; b0 < n_total; b0 += n) {
    n = std::min(max_batch_, n_total - b0);
    if (n_total - b0 - n == 1 && n > 2) --n;  // as eval splits
    for (int i = 0; i < n; ++i) pos_[i] = positions[b0 + i];
    dev_.get_rows(model_.token_embd(), tokens.data() + b0, n, x_.data());
    // Keys up to the batch's last position are visible (causally masked per query); later
    // batches' chunks are not needed by this one.
    LLMSVC_RETURN_IF_ERROR(layers(seq, n, std::min(n_valid, pos_[n - 1] + 1), /*track_mass=*/false, /*n_out=*/0,
                                  b0 == 0 && before_layer ? &before_layer : nullptr));
  }
  return Status::Ok();
}

Status Forward::layers(policy::KvSequence& seq, int n, int n_valid, bool track_mass, int n_out,
                       const LayerHook* before_layer) {
  if (cfg_.embd_scale != 1.0f) dev_.scale(x_.data(), size_t(n) * cfg_.n_embd, cfg_.embd_scale);
  for (int il = 0; il < cfg_.n_layer; ++il) {
    if (before_layer) LLMSVC_RETURN_IF_ERROR((*before_layer)(il));
    layer(il, seq, n, n_valid, track_mass, il + 1 == cfg_.n_layer ? n_out : n);
  }
  return Status::Ok();
}

void Forward::layer(int il, policy::KvSequence& seq, int n, int n_valid, bool track_mass, int n_out) {
  const LayerWeights& L = model_.layers()[il];
  const int E = cfg_.n_embd, KV = cfg_.kv_dim(), QD = cfg_.n_head * cfg_.head_dim;
  const bool swa = cfg_.layer_is_swa[il];
  const float freq_base = swa ? cfg_.rope_freq_base_swa : cfg_.rope_freq_base;
  const float freq_scale = swa ? 1.0f : cfg_.rope_freq_scale;
  const hal::RopeStyle style = cfg_.rope_neox ? hal::RopeStyle::neox : hal::RopeStyle::normal;

  // Attention block.
  dev_.rms_norm(x_.data(), L.attn_norm.data(), n, E, cfg_.rms_eps, h_.data());
  {
    // Q, K and V share their input: one fused call (activations quantized once).
    const hal::PreparedWeight* ws[] = {L.wq.get(), L.wk.get(), L.wv.get()};
    float* ys[] = {q_.data(), k_.data(), v_.data()};
    dev_.matmul_multi(ws, ys, 3, h_.data(), n);
  }
  if (cfg_.has_qkv_bias) {
    dev_.add_bias(q_.data(), L.bq.data(), n, QD);
    dev_.add_bias(k_.data(), L.bk.data(), n, KV);
    dev_.add_bias(v_.data(), L.bv.data(), n, KV);
  }
  if (cfg_.has_qk_norm) {
    dev_.rms_norm(q_.data(), L.attn_q_norm.data(), n * cfg_.n_head, cfg_.head_dim, cfg_.rms_eps, q_.data());
    dev_.rms_norm(k_.data(), L.attn_k_norm.data(), n * cfg_.n_head_kv, cfg_.head_dim, cfg_.rms_eps, k_.data());
  }
  dev_.rope(q_.data(), n, cfg_.n_head, cfg_.head_dim, cfg_.rope_dims, pos_.data(), freq_base, freq_scale, style);
  dev_.rope(k_.data(), n, cfg_.n_head_kv, cfg_.head_dim, cfg_.rope_dims, pos_.data(), freq_base, freq_scale, style);
  if (cfg_.scale_q) dev_.scale(q_.data(), size_t(n) * QD, cfg_.attn_scale);
  // New K/V go straight into their chunk slots.
  for (int t = 0; t < n; ++t) {
    dev_.store_f16(k_.data() + size_t(t) * KV, seq.k(il, pos_[t]), KV);
    dev_.store_f16(v_.data() + size_t(t) * KV, seq.v(il, pos_[t]), KV);
  }
  // The chunks this batch can see (sliding layers skip chunks wholly outside the window of
  // the batch's first query).
  const int C = seq.geometry().chunk_tokens, end = n_valid;
  const int lo = swa && cfg_.sliding_window > 0 ? std::max(0, pos_[0] - cfg_.sliding_window + 1) : 0;
  views_.clear();
  for (int c = lo / C; c * C < end; ++c) {
    hal::KvChunkView view;
    view.format = seq.format(c);
    view.k = seq.block(c, il, hal::KvPart::key);
    view.v = seq.block(c, il, hal::KvPart::value);
    view.n_tokens = view.format == hal::KvFormat::f16 ? std::min(C, end - c * C) : C;
    view.first_pos = c * C;
    view.mass = track_mass ? seq.mass(c) : nullptr;
    views_.push_back(view);
  }
  hal::AttentionParams ap;
  ap.n_head = cfg_.n_head;
  ap.n_head_kv = cfg_.n_head_kv;
  ap.head_dim = cfg_.head_dim;
  ap.scale = cfg_.scale_q ? 1.0f : cfg_.attn_scale;
  ap.sliding_window = swa ? cfg_.sliding_window : 0;
  dev_.attention(q_.data(), n, pos_.data(), views_.data(), static_cast<int>(views_.size()), ap, attn_.data());
  if (n_out < n) {
    // Like llama.cpp (inp_out_ids), the rest of the layer runs for the output rows only: the
    // last n_out tokens, moved to the front.
    if (n_out == 0) return;
    std::copy_n(attn_.data() + size_t(n - n_out) * QD, size_t(n_out) * QD, attn_.data());
    std::copy_n(x_.data() + size_t(n - n_out) * E, size_t(n_out) * E, x_.data());
    n = n_out;
  }
  dev_.matmul(*L.wo, attn_.data(), n, o_.data());
  if (cfg_.has_post_norms) dev_.rms_norm(o_.data(), L.attn_post_norm.data(), n, E, cfg_.rms_eps, o_.data());
  dev_.add(x_.data(), o_.data(), size_t(n) * E);

  // Feed-forward block.
  dev_.rms_norm(x_.data(), L.ffn_norm.data(), n, E, cfg_.rms_eps, h_.data());
  {
    const hal::PreparedWeight* ws[] = {L.w_gate.get(), L.w_up.get()};
    float* ys[] = {gate_.data(), up_.data()};
    dev_.matmul_multi(ws, ys, 2, h_.data(), n);
  }
  const size_t ff = size_t(n) * cfg_.n_ff;
  if (cfg_.gelu_ffn) {
    dev_.geglu(gate_.data(), up_.data(), ff);
  } else {
    dev_.swiglu(gate_.data(), up_.data(), ff);
  }
  dev_.matmul(*L.w_down, gate_.data(), n, o_.data());
  if (cfg_.has_post_norms) dev_.rms_norm(o_.data(), L.ffn_post_norm.data(), n, E, cfg_.rms_eps, o_.data());
  dev_.add(x_.data(), o_.data(), size_t(n) * E);
}

}  // namespace llmsvc
