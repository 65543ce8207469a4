// SPDX-License-Identifier: Apache-2.0
// llmsvc_op_check: runs each op of the forward pass on llama.cpp's own inputs and compares
// the result with llama.cpp's output bit for bit, layer by layer.
//
// The inputs come from dump_llamacpp.py (llama.cpp's eval callback: every named tensor of a
// prompt batch and of the decode steps after it). Each op sees llama.cpp's input, never our
// previous output, so a difference is always that op's own.
//
//   llmsvc_op_check MODEL.gguf DUMP_DIR [--layers N] [-v]
//
// Prints per op the elements that differ, max |diff| and max |value| (-v: per phase and layer).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hal/cpu/cpu_device.h"
#include "hal/host/fp16.h"
#include "runtime/core/model/model.h"

namespace {

using llmsvc::hal::fp32_to_fp16;
using Vec = std::vector<float>;

// The tensors of a dump directory: index.json (key -> file, shape, in dump order) + raw files.
class Dump {
 public:
  explicit Dump(std::string dir) : dir_(std::move(dir)) {
    std::ifstream in(dir_ + "/index.json");
    index_ = nlohmann::ordered_json::parse(in);
    for (const auto& [k, v] : index_.items()) order_.push_back(k);
  }
  Vec get(const std::string& key) const {
    const auto& e = index_.at(key);
    size_t n = 1;
    for (const auto& d : e["shape"]) n *= d.get<size_t>();
    Vec v(n);
    std::ifstream in(dir_ + "/" + e["file"].get<std::string>(), std::ios::binary);
    in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float)));
    return v;
  }
  std::vector<int32_t> get_i32(const std::string& key) const {
    const Vec raw = get(key);  // int32 stored as-is
    std::vector<int32_t> v(raw.size());
    std::memcpy(v.data(), raw.data(), raw.size() * 4);
    return v;
  }
  // The key dumped right after `key` (llama.cpp leaves some results unnamed: "node_N").
  std::string after(const std::string& key) const {
    for (size_t i = 0; i + 1 < order_.size(); ++i)
      if (order_[i] == key) return order_[i + 1];
    return {};
  }

 private:
  std::string dir_;
  nlohmann::ordered_json index_;
  std::vector<std::string> order_;
};

struct Stats {
  size_t n_diff = 0, n = 0;
  double max_diff = 0, max_abs = 0;
};
std::map<std::string, Stats> g_total;
bool g_verbose = false;

void compare(const std::string& phase, const char* op, int il, const float* ours, const Vec& ref) {
  Stats s;
  s.n = ref.size();
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::memcmp(&ours[i], &ref[i], 4) != 0) {
      s.n_diff++;
      s.max_diff = std::max(s.max_diff, static_cast<double>(std::fabs(ours[i] - ref[i])));
    }
    s.max_abs = std::max(s.max_abs, static_cast<double>(std::fabs(ref[i])));
  }
  Stats& t = g_total[op];
  t.n_diff += s.n_diff;
  t.n += s.n;
  t.max_diff = std::max(t.max_diff, s.max_diff);
  t.max_abs = std::max(t.max_abs, s.max_abs);
  if (g_verbose && s.n_diff) {
    std::printf("%-4s L%-2d %-14s %7zu of %7zu differ, max |diff| %.3g (max |x| %.3g)\n", phase.c_str(), il, op,
                s.n_diff, s.n, s.max_diff, s.max_abs);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf DUMP_DIR [--layers N] [-v]\n", argv[0]);
    return 2;
  }
  int max_layers = 1 << 30;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--layers") == 0 && i + 1 < argc) max_layers = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "-v") == 0) g_verbose = true;
  }
  const Dump dump(argv[2]);
  auto device = llmsvc::hal::cpu::make_cpu_device(2);
  auto loaded = llmsvc::Model::load(argv[1], *device);
  if (!loaded.ok()) {
    std::fprintf(stderr, "load: %s\n", loaded.status().message().c_str());
    return 1;
  }
  const llmsvc::Model& model = **loaded;
  const llmsvc::ModelConfig& cfg = model.config();
  llmsvc::hal::Device& dev = *device;
  const int E = cfg.n_embd, KV = cfg.kv_dim(), QD = cfg.n_head * cfg.head_dim, FF = cfg.n_ff;
  const int n_layer = std::min(cfg.n_layer, max_layers);
  const bool gemma = cfg.arch == llmsvc::Arch::gemma3;
  const auto style = cfg.rope_neox ? llmsvc::hal::RopeStyle::neox : llmsvc::hal::RopeStyle::normal;

  const auto prompt = dump.get_i32("tokens");
  const auto gen = dump.get_i32("gen");
  // K (after RoPE) and V of every position so far, per layer, rounded to f16 as the cache holds them.
  std::vector<std::vector<uint16_t>> kc(n_layer), vc(n_layer);

  std::vector<std::string> phases = {"p"};
  for (size_t s = 0; s < gen.size(); ++s) {
    char name[32];
    std::snprintf(name, sizeof name, "d%zu", s);
    phases.emplace_back(name);
  }
  int pos0 = 0;
  for (const std::string& ph : phases) {
    const int n = ph == "p" ? static_cast<int>(prompt.size()) : 1;
    // dump_llamacpp.py's key: "<phase>:<name>[-<layer>][#<n-th repeat>]".
    auto key = [&](const char* name, int il, int nth = 0) {
      char buf[128];
      const char* sep = nth ? "#" : "";
      char rep[16] = "";
      if (nth) std::snprintf(rep, sizeof rep, "%d", nth);
      if (il < 0) {
        std::snprintf(buf, sizeof buf, "%s:%s%s%s", ph.c_str(), name, sep, rep);
      } else {
        std::snprintf(buf, sizeof buf, "%s:%s-%d%s%s", ph.c_str(), name, il, sep, rep);
      }
      return std::string(buf);
    };
    std::vector<int32_t> pos(n);
    for (int i = 0; i < n; ++i) pos[i] = pos0 + i;
    Vec out(static_cast<size_t>(n) * std::max({E, QD, FF, cfg.n_vocab}));
    if (gemma) {
      Vec x = dump.get(key("inp_embd", -1));
      dev.scale(x.data(), x.size(), cfg.embd_scale);
      compare(ph, "embd_scale", 0, x.data(), dump.get(key("inp_scaled", -1)));
    }
    for (int il = 0; il < n_layer; ++il) {
      const llmsvc::LayerWeights& L = model.layers()[il];
      const bool swa = cfg.layer_is_swa[il];
      const float freq_base = swa ? cfg.rope_freq_base_swa : cfg.rope_freq_base;
      const float freq_scale = swa ? 1.0f : cfg.rope_freq_scale;
      const Vec x_in = il > 0 ? dump.get(key("l_out", il - 1)) : dump.get(key(gemma ? "inp_scaled" : "inp_embd", -1));
      dev.rms_norm(x_in.data(), L.attn_norm.data(), n, E, cfg.rms_eps, out.data());
      compare(ph, "attn_norm", il, out.data(), dump.get(key("attn_norm", il)));

      const Vec h = dump.get(key("attn_norm", il));
      Vec q(static_cast<size_t>(n) * QD), k(static_cast<size_t>(n) * KV), v(static_cast<size_t>(n) * KV);
      {
        const llmsvc::hal::PreparedWeight* ws[] = {L.wq.get(), L.wk.get(), L.wv.get()};
        float* ys[] = {q.data(), k.data(), v.data()};
        dev.matmul_multi(ws, ys, 3, h.data(), n);
      }
      compare(ph, "wq", il, q.data(), dump.get(key("Qcur", il)));
      compare(ph, "wk", il, k.data(), dump.get(key("Kcur", il)));
      compare(ph, "wv", il, v.data(), dump.get(key("Vcur", il)));

      // Q and K right before RoPE: after the q/k norms (gemma3) or the biases (qwen2).
      int rope_rep = 1;
      Vec qr = dump.get(key("Qcur", il)), kr = dump.get(key("Kcur", il));
      if (gemma) {
        Vec qn(qr.size()), kn(kr.size());
        dev.rms_norm(qr.data(), L.attn_q_norm.data(), n * cfg.n_head, cfg.head_dim, cfg.rms_eps, qn.data());
        dev.rms_norm(kr.data(), L.attn_k_norm.data(), n * cfg.n_head_kv, cfg.head_dim, cfg.rms_eps, kn.data());
        compare(ph, "q_norm", il, qn.data(), dump.get(key("Qcur_normed", il)));
        compare(ph, "k_norm", il, kn.data(), dump.get(key("Kcur_normed", il)));
        qr = dump.get(key("Qcur_normed", il));
        kr = dump.get(key("Kcur_normed", il));
      } else if (cfg.has_qkv_bias) {
        dev.add_bias(qr.data(), L.bq.data(), n, QD);
        dev.add_bias(kr.data(), L.bk.data(), n, KV);
        compare(ph, "q_bias", il, qr.data(), dump.get(key("Qcur", il, 1)));
        compare(ph, "k_bias", il, kr.data(), dump.get(key("Kcur", il, 1)));
        qr = dump.get(key("Qcur", il, 1));
        kr = dump.get(key("Kcur", il, 1));
        rope_rep = 2;
      }
      dev.rope(qr.data(), n, cfg.n_head, cfg.head_dim, cfg.rope_dims, pos.data(), freq_base, freq_scale, style);
      dev.rope(kr.data(), n, cfg.n_head_kv, cfg.head_dim, cfg.rope_dims, pos.data(), freq_base, freq_scale, style);
      compare(ph, "rope_q", il, qr.data(), dump.get(key("Qcur", il, rope_rep)));
      compare(ph, "rope_k", il, kr.data(), dump.get(key("Kcur", il, rope_rep)));

      // Attention on llama.cpp's q, k, v.
      std::string qkey = key("Qcur", il, rope_rep);
      if (cfg.scale_q) {
        Vec qs = dump.get(qkey);
        dev.scale(qs.data(), qs.size(), cfg.attn_scale);
        qkey = dump.after(qkey);
        compare(ph, "q_scale", il, qs.data(), dump.get(qkey));
      }
      const Vec qref = dump.get(qkey);
      const Vec kref = dump.get(key("Kcur", il, rope_rep));
      const Vec vref = dump.get(key("Vcur", il));
      for (float f : kref) kc[il].push_back(fp32_to_fp16(f));
      for (float f : vref) vc[il].push_back(fp32_to_fp16(f));
      const llmsvc::hal::KvChunkView view{kc[il].data(), vc[il].data(), pos0 + n, 0};
      llmsvc::hal::AttentionParams ap;
      ap.n_head = cfg.n_head;
      ap.n_head_kv = cfg.n_head_kv;
      ap.head_dim = cfg.head_dim;
      ap.scale = cfg.scale_q ? 1.0f : cfg.attn_scale;
      ap.sliding_window = swa ? cfg.sliding_window : 0;
      dev.attention(qref.data(), n, pos.data(), &view, 1, ap, out.data());
      compare(ph, "attention", il, out.data(), dump.get(key("kqv_out", il)));

      const Vec a = dump.get(key("kqv_out", il));
      const std::string wo_key = gemma ? dump.after(key("kqv_out", il)) : key("attn_out", il);
      dev.matmul(*L.wo, a.data(), n, out.data());
      compare(ph, "wo", il, out.data(), dump.get(wo_key));

      Vec sum = dump.get(wo_key);
      if (gemma) {
        dev.rms_norm(sum.data(), L.attn_post_norm.data(), n, E, cfg.rms_eps, out.data());
        compare(ph, "attn_post_norm", il, out.data(), dump.get(key("attn_post_norm", il)));
        sum = dump.get(key("attn_post_norm", il));
      }
      dev.add(sum.data(), x_in.data(), sum.size());
      const std::string ffn_inp_key = key(gemma ? "sa_out" : "ffn_inp", il);
      compare(ph, "add_attn", il, sum.data(), dump.get(ffn_inp_key));

      const Vec f_in = dump.get(ffn_inp_key);
      dev.rms_norm(f_in.data(), L.ffn_norm.data(), n, E, cfg.rms_eps, out.data());
      compare(ph, "ffn_norm", il, out.data(), dump.get(key("ffn_norm", il)));

      const Vec fh = dump.get(key("ffn_norm", il));
      Vec g(static_cast<size_t>(n) * FF), u(static_cast<size_t>(n) * FF);
      {
        const llmsvc::hal::PreparedWeight* ws[] = {L.w_gate.get(), L.w_up.get()};
        float* ys[] = {g.data(), u.data()};
        dev.matmul_multi(ws, ys, 2, fh.data(), n);
      }
      compare(ph, "w_gate", il, g.data(), dump.get(key("ffn_gate", il)));
      compare(ph, "w_up", il, u.data(), dump.get(key("ffn_up", il)));

      Vec gr = dump.get(key("ffn_gate", il));
      const Vec ur = dump.get(key("ffn_up", il));
      const char* act = gemma ? "ffn_geglu" : "ffn_swiglu";
      if (gemma) {
        dev.geglu(gr.data(), ur.data(), gr.size());
      } else {
        dev.swiglu(gr.data(), ur.data(), gr.size());
      }
      compare(ph, gemma ? "geglu" : "swiglu", il, gr.data(), dump.get(key(act, il)));

      const Vec sw = dump.get(key(act, il));
      dev.matmul(*L.w_down, sw.data(), n, out.data());
      compare(ph, "w_down", il, out.data(), dump.get(key("ffn_out", il)));

      Vec lo = dump.get(key("ffn_out", il));
      if (gemma) {
        dev.rms_norm(lo.data(), L.ffn_post_norm.data(), n, E, cfg.rms_eps, out.data());
        const std::string pk = key("ffn_post_norm", -1, il);
        compare(ph, "ffn_post_norm", il, out.data(), dump.get(pk));
        lo = dump.get(pk);
      }
      dev.add(lo.data(), f_in.data(), lo.size());
      compare(ph, "add_ffn", il, lo.data(), dump.get(key("l_out", il)));
    }
    if (n_layer == cfg.n_layer) {
      const Vec x = dump.get(key("l_out", n_layer - 1));
      dev.rms_norm(x.data(), model.output_norm().data(), n, E, cfg.rms_eps, out.data());
      compare(ph, "result_norm", -1, out.data(), dump.get(key("result_norm", -1)));
      const Vec hn = dump.get(key("result_norm", -1));
      dev.matmul(model.output(), hn.data(), n, out.data());
      compare(ph, "output", -1, out.data(), dump.get(key("result_output", -1)));
    }
    pos0 += n;
  }
  std::printf("%-14s %10s %10s %12s %12s\n", "op", "differ", "of", "max|diff|", "max|x|");
  for (const auto& [op, s] : g_total) {
    std::printf("%-14s %10zu %10zu %12.4g %12.4g\n", op.c_str(), s.n_diff, s.n, s.max_diff, s.max_abs);
  }
  return 0;
}
