// SPDX-License-Identifier: Apache-2.0
// Perplexity of a model whose KV cache is compressed between calls, per compression policy:
// f16 (none), static int8 / int4 / int3 / int2 (every compressible chunk), and LLMS's
// tolerance-aware allocation at several ratios, with an ablation that gives the bits in the
// reverse order of density (same average, least informed choice).
//
// A text is cut into windows of --ctx tokens; each window is fed as calls of --call tokens
// (what an app's turns look like), and after every call the context is compressed as the
// engine does (policy/compression/context_compression.h). The tokens of each window's second half are
// scored, like llama.cpp's perplexity tool, so every scored token sees a compressed history.
//
// Each row also gives the change in mean NLL per window against f16 and against static int4,
// with its standard error over windows (paired): quantization noise alone moves a 30-window
// figure by a few tenths of a percent, so differences smaller than ~2 standard errors are noise.
//
// --set picks other rows, for measuring where the loss comes from (f16 first in every set):
//   parts   K only / V only at 4 and 2 bits (decoded in place, so K and V can differ)
//   sink    chunk 0 (the attention sink) at another width than the rest
//   sink2   chunk 0's K vs V; chunk 0 at 8 bits paid by two 2-bit chunks (forced or oracle)
//   summary int4 with chunk 0 at 8 bits / f16, and the two ways of paying for 8 bits
//   decile  int4 with one decile of chunks (by final f16-pass density) at 2 bits
//   early   among chunks 1-15, a fifth at 2 bits by density or by position, the rest f16
//   layers  2 bits on one sixth of the layers, the rest f16
//   alloc   the allocator over other chunk weights (sum of squared / largest token density)
//   llms    static int4 and the policy at 0.75 / 0.5 / 0.375 only
//   q3      the 3-bit width: the allocator with and without it, chunk 0 at 8 bits paid at 3
//
//   bench_ppl_compression [--model PATH] [--text PATH] [--ctx 512] [--call 64]
//                         [--windows N] [--threads 2] [--json PATH] [--set NAME]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hal/cpu/cpu_device.h"
#include "policy/compression/bit_allocation.h"
#include "policy/compression/context_compression.h"
#include "policy/compression/kv_codec.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/model/default_model.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/model.h"

namespace llmsvc::bench {
namespace {

enum class Kind { none, uniform, llms, llms_reversed, custom };

// What a custom policy sees at a call's end: the window, the final densities an f16 pass
// measured for its chunks (an oracle, for measurements only), and per-chunk flags it keeps.
struct WindowState {
  int window = 0;
  const std::vector<double>* final_density = nullptr;
  std::vector<uint8_t> done;
};

struct Policy {
  std::string name;
  Kind kind;
  double ratio;           // llms: the average bits / 8
  hal::KvFormat uniform;  // uniform: every compressible chunk
  std::function<Status(policy::KvSequence&, int n_evaluated, WindowState&)> custom = {};
};

// LLMS's allocation, then the same multiset of widths handed out in the reverse order of
// density: the densest chunks get the fewest bits.
std::vector<uint8_t> reversed_bits(const std::vector<double>& density, double ratio) {
  std::vector<uint8_t> bits = policy::allocate_bits(density, ratio);
  std::vector<int> order(density.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return density[a] > density[b]; });
  std::vector<uint8_t> sorted;
  for (int i : order) sorted.push_back(bits[i]);  // widest first
  std::vector<uint8_t> out(bits.size());
  for (size_t k = 0; k < order.size(); ++k) out[order[k]] = sorted[order.size() - 1 - k];
  return out;
}

Status compress(const Policy& p, policy::KvSequence& seq, int n_evaluated, WindowState& ws) {
  const int n = policy::compressible_chunks(seq, n_evaluated);
  switch (p.kind) {
    case Kind::none: return Status::Ok();
    case Kind::uniform: return policy::apply_bits(seq, std::vector<uint8_t>(n, static_cast<uint8_t>(p.uniform)));
    case Kind::llms: return policy::compress_context(seq, n_evaluated, p.ratio);
    case Kind::llms_reversed: return policy::apply_bits(seq, reversed_bits(policy::chunk_densities(seq, n), p.ratio));
    case Kind::custom: return p.custom(seq, n_evaluated, ws);
  }
  return Status::Ok();
}

// Measurement helpers (--set other than "default"): the error of a q format applied to parts
// of an f16 chunk, by quantizing and decoding in place (the chunk stays f16, so K and V, or
// layers, can take different widths; attention over decoded values equals the q path's up to
// f16 rounding of the decoded values). Such chunks stay f16 in the "mean bits" and "KV vs f16"
// columns.
void fake_quant(policy::KvSequence& seq, int c, int layer, hal::KvPart part, hal::KvFormat f) {
  if (f == hal::KvFormat::f16) return;
  const hal::KvBlockShape shape = seq.geometry().shape();
  auto* blk = static_cast<uint16_t*>(const_cast<void*>(seq.block(c, layer, part)));
  std::vector<uint8_t> q(hal::kv_block_bytes(f, part, shape));
  policy::kv_quantize(part, shape, blk, f, q.data());
  policy::kv_dequantize(part, shape, f, q.data(), blk);
}

// A policy that decides each chunk once, when it first becomes compressible: decide(c, ws)
// returns the K and V formats of each layer (f16 keeps it; equal K and V widths on every layer
// use the real chunk format).
using LayerFormats = std::vector<std::pair<hal::KvFormat, hal::KvFormat>>;
Policy per_chunk(std::string name, std::function<LayerFormats(int c, const WindowState&)> decide, bool real = true) {
  return {std::move(name), Kind::custom, 0, hal::KvFormat::f16,
          [decide, real](policy::KvSequence& seq, int n_evaluated, WindowState& ws) -> Status {
            const int n = policy::compressible_chunks(seq, n_evaluated);
            if (ws.done.size() < static_cast<size_t>(n)) ws.done.resize(n, 0);
            for (int c = 0; c < n; ++c) {
              if (ws.done[c]) continue;
              ws.done[c] = 1;
              const LayerFormats lf = decide(c, ws);
              bool same = real;
              for (const auto& [k, v] : lf) same = same && k == lf[0].first && v == lf[0].first;
              if (same) {
                if (lf[0].first != hal::KvFormat::f16) LLMSVC_RETURN_IF_ERROR(seq.compress(c, lf[0].first));
                continue;
              }
              for (int l = 0; l < static_cast<int>(lf.size()); ++l) {
                fake_quant(seq, c, l, hal::KvPart::key, lf[l].first);
                fake_quant(seq, c, l, hal::KvPart::value, lf[l].second);
              }
            }
            return Status::Ok();
          }};
}

// Rank of chunk c by the oracle (final, f16-pass) density among the chunks [0, n), 0 = densest.
int oracle_rank(const WindowState& ws, int c, int n) {
  const std::vector<double>& d = *ws.final_density;
  int r = 0;
  for (int j = 0; j < n; ++j) r += d[j] > d[c] || (d[j] == d[c] && j < c);
  return r;
}

// Exploration: the policy's allocator over other chunk weights than the mean density
// (sum of squared token densities; largest token density), with or without the caps.
enum class Weight { mean, sq, max };
std::vector<double> chunk_weights_variant(const policy::KvSequence& seq, int n, Weight wk) {
  std::vector<double> w(n, 0.0);
  for (int c = 0; c < n; ++c) {
    const auto m = seq.token_mass(c);
    const auto sn = seq.token_seen(c);
    double sum = 0, sq = 0, mx = 0, seen = 0;
    for (size_t t = 0; t < m.size(); ++t) {
      sum += m[t];
      seen += sn[t];
      const double d = sn[t] ? m[t] / sn[t] : 0.0;
      sq += d * d;
      mx = std::max(mx, d);
    }
    w[c] = wk == Weight::mean ? (seen > 0 ? sum / seen : 0.0) : wk == Weight::sq ? sq : mx;
  }
  return w;
}

Policy variant(std::string name, double ratio, Weight wk, bool capped,
               std::vector<uint8_t> widths = {std::begin(policy::kKvWidths), std::end(policy::kKvWidths)}) {
  return {std::move(name), Kind::custom, ratio, hal::KvFormat::f16,
          [=](policy::KvSequence& seq, int n_evaluated, WindowState&) -> Status {
            const int n = policy::compressible_chunks(seq, n_evaluated);
            const std::vector<double> w = chunk_weights_variant(seq, n, wk);
            std::vector<uint8_t> cap;
            for (int c = 0; capped && c < n; ++c) cap.push_back(static_cast<uint8_t>(hal::kv_format_bits(seq.format(c))));
            return policy::apply_bits(seq, policy::allocate_bits(w, ratio, cap, widths));
          }};
}

void print_density_stats(const std::vector<std::vector<double>>& fd) {
  // Per window, over the chunks compressible at its end (all but the last): chunk 0 and the
  // spread, relative to the window's median chunk.
  double sink = 0, mx = 0, mn = 0, p90 = 0, p10 = 0;
  int w = 0;
  for (const auto& d0 : fd) {
    if (d0.size() < 3) continue;
    std::vector<double> d(d0.begin(), d0.end() - 1);
    std::vector<double> s(d.begin() + 1, d.end());
    std::sort(s.begin(), s.end());
    const double med = s[s.size() / 2];
    sink += d[0] / med;
    mx += s.back() / med;
    mn += s.front() / med;
    p90 += s[s.size() * 9 / 10] / med;
    p10 += s[s.size() / 10] / med;
    ++w;
  }
  if (w) std::printf("final chunk density / median (mean over windows): chunk0 %.2f, others max %.2f p90 %.2f p10 %.2f min %.2f\n\n",
                     sink / w, mx / w, p90 / w, p10 / w, mn / w);
}

double log_prob(const float* logits, int n_vocab, int32_t token) {
  double mx = logits[0];
  for (int i = 1; i < n_vocab; ++i) mx = std::max<double>(mx, logits[i]);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(logits[i] - mx);
  return logits[token] - mx - std::log(sum);
}

struct Outcome {
  double ppl = 0;
  int scored = 0;
  double mean_bits = 0;  // over the chunks that were compressible at each window's end
  double kv_fraction = 0;  // resident KV bytes at each window's end / f16 bytes
  std::vector<double> window_nll;  // mean negative log-likelihood of each window's scored tokens
};

// Paired comparison over windows: mean of (a - b) per-window mean NLL and its standard error.
// exp(mean) - 1 is the perplexity change when windows score equally many tokens.
std::pair<double, double> paired(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  if (n < 2) return {n ? a[0] - b[0] : 0.0, 0.0};
  double m = 0, v = 0;
  for (size_t i = 0; i < n; ++i) m += a[i] - b[i];
  m /= n;
  for (size_t i = 0; i < n; ++i) v += (a[i] - b[i] - m) * (a[i] - b[i] - m);
  return {m, std::sqrt(v / (n - 1) / n)};
}

Result<Outcome> run(const Policy& p, const Model& model, hal::Device& dev, const std::vector<int32_t>& tokens, int n_ctx,
                    int call, int windows, std::vector<std::vector<double>>& final_density) {
  const ModelConfig& cfg = model.config();
  policy::KvChunkStore store({cfg.n_layer, cfg.n_head_kv, cfg.head_dim, 16}, 0);
  Forward fwd(model, dev, n_ctx);
  std::vector<float> logits;
  Outcome o;
  double nll = 0, bits = 0, frac = 0;
  int bit_chunks = 0;
  for (int w = 0; w < windows; ++w) {
    const int32_t* win = tokens.data() + static_cast<size_t>(w) * n_ctx;
    policy::KvSequence seq(store);
    const double nll0 = nll;
    const int scored0 = o.scored;
    if (final_density.size() < static_cast<size_t>(windows)) final_density.resize(windows);
    WindowState ws{w, &final_density[w], {}};
    for (int pos = 0; pos < n_ctx; pos += call) {
      const int n = std::min(call, n_ctx - pos);
      LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, std::span<const int32_t>(win + pos, n), pos, true, logits));
      for (int j = 0; j < n; ++j) {
        const int at = pos + j;  // predicts at + 1
        if (at < n_ctx / 2 || at + 1 >= n_ctx) continue;
        nll -= log_prob(logits.data() + static_cast<size_t>(j) * cfg.n_vocab, cfg.n_vocab, win[at + 1]);
        ++o.scored;
      }
      LLMSVC_RETURN_IF_ERROR(compress(p, seq, pos + n, ws));
    }
    if (p.kind == Kind::none) final_density[w] = policy::chunk_densities(seq, seq.n_chunks());
    o.window_nll.push_back((nll - nll0) / std::max(o.scored - scored0, 1));
    const int nc = policy::compressible_chunks(seq, n_ctx);
    for (int c = 0; c < nc; ++c) bits += hal::kv_format_bits(seq.format(c));
    bit_chunks += nc;
    frac += static_cast<double>(seq.resident_bytes()) / (static_cast<double>(seq.n_chunks()) * store.geometry().chunk_bytes());
  }
  o.ppl = std::exp(nll / std::max(o.scored, 1));
  o.mean_bits = bit_chunks ? bits / bit_chunks : 16;
  o.kv_fraction = frac / windows;
  return o;
}

int main_impl(int argc, char** argv) {
  std::string model_path = default_model_path();
  std::string text_path = std::string(LLMSVC_TEST_DATA) + "/golden/ppl_text.txt";
  std::string json_path, set = "default";
  int n_ctx = 512, call = 64, windows = 0, threads = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model") model_path = next();
    else if (a == "--text") text_path = next();
    else if (a == "--ctx") n_ctx = std::atoi(next().c_str());
    else if (a == "--call") call = std::atoi(next().c_str());
    else if (a == "--windows") windows = std::atoi(next().c_str());
    else if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "--json") json_path = next();
    else if (a == "--set") set = next();
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (n_ctx < 64 || call < 1 || threads < 1) {
    std::fprintf(stderr, "need --ctx >= 64, --call >= 1, --threads >= 1\n");
    return 2;
  }
  std::ifstream f(text_path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", text_path.c_str());
    return 1;
  }
  const std::string text{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  hal::cpu::CpuDevice dev(threads);
  auto model = Model::load(model_path, dev);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().message().c_str());
    return 1;
  }
  const std::vector<int32_t> tokens = (*model)->tokenizer().encode(text, true, false);
  const int max_windows = static_cast<int>(tokens.size()) / n_ctx;
  if (windows <= 0 || windows > max_windows) windows = max_windows;
  if (windows == 0) {
    std::fprintf(stderr, "text too short for one window of %d tokens\n", n_ctx);
    return 1;
  }

  using F = hal::KvFormat;
  std::vector<Policy> policies = {{"f16", Kind::none, 0, F::f16}};
  const int n_layer = (*model)->config().n_layer;
  const int n_comp = n_ctx / 16 - 1;  // chunks compressible at a window's end
  auto all = [n_layer](F k, F v) { return LayerFormats(n_layer, {k, v}); };
  // Chunk 0 at 8 bits, the rest int4 but k payers at `payer` width: chunks 1..k (those the
  // first 64-token calls force), or the k sparsest of chunks 3-15 by final density (an oracle).
  auto sink_paid_by = [=](F payer, int k, bool oracle) {
    return [=](int c, const WindowState& ws) {
      bool pays = c >= 1 && c <= k;
      if (oracle) {
        const std::vector<double>& d = *ws.final_density;
        std::vector<int> idx;
        for (int j = 3; j <= 15 && j < n_comp; ++j) idx.push_back(j);
        std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return d[a] < d[b]; });
        idx.resize(std::min<size_t>(static_cast<size_t>(k), idx.size()));
        pays = std::find(idx.begin(), idx.end(), c) != idx.end();
      }
      const F f = c == 0 ? F::q8 : pays ? payer : F::q4;
      return all(f, f);
    };
  };
  if (set == "default") {
    policies.insert(policies.end(), {
        {"static int8", Kind::uniform, 1.0, F::q8},
        {"static int4", Kind::uniform, 0.5, F::q4},
        {"static int3", Kind::uniform, 0.375, F::q3},
        {"static int2", Kind::uniform, 0.25, F::q2},
        {"llms 0.75", Kind::llms, 0.75, F::f16},
        {"llms 0.5", Kind::llms, 0.5, F::f16},
        {"llms 0.375", Kind::llms, 0.375, F::f16},
        {"llms 0.75 reversed", Kind::llms_reversed, 0.75, F::f16},
        {"llms 0.375 reversed", Kind::llms_reversed, 0.375, F::f16},
    });
  } else if (set == "parts") {
    // K only vs V only (decoded in place), against the real formats.
    policies.push_back({"static int4", Kind::uniform, 0.5, F::q4});
    policies.push_back({"static int2", Kind::uniform, 0.25, F::q2});
    for (F f : {F::q4, F::q2}) {
      const std::string b = std::to_string(hal::kv_format_bits(f));
      policies.push_back(per_chunk("fake K" + b + " V" + b, [=](int, const WindowState&) { return all(f, f); }, false));
      policies.push_back(per_chunk("fake K" + b + " only", [=](int, const WindowState&) { return all(f, F::f16); }));
      policies.push_back(per_chunk("fake V" + b + " only", [=](int, const WindowState&) { return all(F::f16, f); }));
    }
    policies.push_back(per_chunk("fake K4 V2", [=](int, const WindowState&) { return all(F::q4, F::q2); }));
    policies.push_back(per_chunk("fake K2 V4", [=](int, const WindowState&) { return all(F::q2, F::q4); }));
  } else if (set == "sink") {
    // Chunk 0 (the attention sink) against the rest.
    for (F rest : {F::q4, F::q2})
      for (F first : {F::q8, F::f16}) {
        const std::string nm = "int" + std::to_string(hal::kv_format_bits(rest)) + ", chunk0 " +
                               (first == F::f16 ? std::string("f16") : "int8");
        policies.push_back(per_chunk(nm, [=](int c, const WindowState&) { return all(c == 0 ? first : rest, c == 0 ? first : rest); }));
      }
    policies.push_back(per_chunk("f16, chunk0 int2", [=](int c, const WindowState&) { return all(c == 0 ? F::q2 : F::f16, c == 0 ? F::q2 : F::f16); }));
    policies.push_back(per_chunk("f16, chunk0 int4", [=](int c, const WindowState&) { return all(c == 0 ? F::q4 : F::f16, c == 0 ? F::q4 : F::f16); }));
  } else if (set == "sink2" || set == "summary") {
    // Which part of chunk 0 carries its damage, and what paying for its 8 bits costs: with the
    // two chunks a 64-token first call forces (1 and 2), or the two sparsest of chunks 3-15 by
    // final density (an oracle bound on the payers).
    policies.push_back({"static int4", Kind::uniform, 0.5, F::q4});
    auto sink_at = [=](F first) {
      return [=](int c, const WindowState&) { return c == 0 ? all(first, first) : all(F::q4, F::q4); };
    };
    if (set == "summary") {
      policies.push_back(per_chunk("int4, chunk0 int8", sink_at(F::q8)));
      policies.push_back(per_chunk("int4, chunk0 f16", sink_at(F::f16)));
    } else {
      policies.push_back(per_chunk("int4, chunk0 K8 V4", [=](int c, const WindowState&) { return c == 0 ? all(F::q8, F::q4) : all(F::q4, F::q4); }));
      policies.push_back(per_chunk("int4, chunk0 K4 V8", [=](int c, const WindowState&) { return c == 0 ? all(F::q4, F::q8) : all(F::q4, F::q4); }));
    }
    policies.push_back(per_chunk("int4, 0 int8, 1-2 int2", sink_paid_by(F::q2, 2, false)));
    policies.push_back(per_chunk("int4, 0 int8, 2 sparsest int2", sink_paid_by(F::q2, 2, true)));
  } else if (set == "decile") {
    // int4 everywhere, one decile of chunks (by final density, chunk 0 excluded) at 2 bits.
    policies.push_back({"static int4", Kind::uniform, 0.5, F::q4});
    for (int dec = 0; dec < 10; ++dec)
      policies.push_back(per_chunk("int4, decile " + std::to_string(dec) + " int2", [=](int c, const WindowState& ws) {
        if (c == 0) return all(F::q4, F::q4);
        const int r = oracle_rank(ws, c, n_comp) - (oracle_rank(ws, 0, n_comp) < oracle_rank(ws, c, n_comp) ? 1 : 0);
        const F f = r * 10 / (n_comp - 1) == dec ? F::q2 : F::q4;
        return all(f, f);
      }));
  } else if (set == "early") {
    // Chunks 1-15 (compressed before scoring starts, so each affects every scored token):
    // three of them at 2 bits, the rest f16, picked by final density rank or by position.
    const int m = std::min(15, n_comp - 1);
    for (int k = 0; k < 5; ++k)
      policies.push_back(per_chunk("1-15 by density q" + std::to_string(k) + " int2", [=](int c, const WindowState& ws) {
        if (c == 0 || c > m) return all(F::f16, F::f16);
        int r = 0;  // rank among chunks 1..m, 0 = densest
        for (int j = 1; j <= m; ++j) r += (*ws.final_density)[j] > (*ws.final_density)[c] || ((*ws.final_density)[j] == (*ws.final_density)[c] && j < c);
        const F f = r * 5 / m == k ? F::q2 : F::f16;
        return all(f, f);
      }));
    for (int k = 0; k < 5; ++k)
      policies.push_back(per_chunk("1-15 by position q" + std::to_string(k) + " int2", [=](int c, const WindowState&) {
        const F f = c >= 1 && c <= m && (c - 1) * 5 / m == k ? F::q2 : F::f16;
        return all(f, f);
      }));
  } else if (set == "alloc") {
    policies.push_back({"static int4", Kind::uniform, 0.5, F::q4});
    for (double r : {0.5, 0.375})
      for (bool capped : {false, true}) {
        const std::string rs = (r == 0.5 ? " 0.5" : " 0.375") + std::string(capped ? " capped" : "");
        policies.push_back(variant("mean" + rs, r, Weight::mean, capped));
        policies.push_back(variant("sq" + rs, r, Weight::sq, capped));
        policies.push_back(variant("max" + rs, r, Weight::max, capped));
      }
  } else if (set == "llms") {
    policies.push_back({"static int4", Kind::uniform, 0.5, F::q4});
    for (double r : {0.75, 0.5, 0.375}) policies.push_back({"llms " + std::to_string(r).substr(0, 5), Kind::llms, r, F::f16});
  } else if (set == "q3") {
    // The 3-bit width: the allocator with and without it, and chunk 0 at 8 bits paid by four
    // 3-bit chunks (those a 64-token first call forces, 1-4, or the four sparsest of 3-15).
    policies.push_back({"static int4", Kind::uniform, 0.5, F::q4});
    policies.push_back({"static int3", Kind::uniform, 0.375, F::q3});
    policies.push_back({"llms 0.5", Kind::llms, 0.5, F::f16});
    policies.push_back(variant("llms 0.5 {8,4,2}", 0.5, Weight::mean, true, {8, 4, 2}));
    policies.push_back(per_chunk("int4, 0 int8, 1-4 int3", sink_paid_by(F::q3, 4, false)));
    policies.push_back(per_chunk("int4, 0 int8, 4 sparsest int3", sink_paid_by(F::q3, 4, true)));
  } else if (set == "layers") {
    const int g = (n_layer + 5) / 6;
    for (int lo = 0; lo < n_layer; lo += g)
      policies.push_back(per_chunk("int2 on layers " + std::to_string(lo) + "-" + std::to_string(std::min(lo + g, n_layer) - 1),
                                   [=](int, const WindowState&) {
                                     LayerFormats lf(n_layer, {F::f16, F::f16});
                                     for (int l = lo; l < std::min(lo + g, n_layer); ++l) lf[l] = {F::q2, F::q2};
                                     return lf;
                                   }));
  } else {
    std::fprintf(stderr, "unknown --set %s\n", set.c_str());
    return 2;
  }
  std::vector<std::vector<double>> final_density;
  nlohmann::json out = nlohmann::json::array();
  double base = 0;
  std::vector<double> base_nll, int4_nll;
  std::printf("%d windows of %d tokens, calls of %d tokens, %s\n\n", windows, n_ctx, call, model_path.c_str());
  std::printf("%-20s %10s %9s %10s %12s\n", "policy", "perplexity", "vs f16", "mean bits", "KV vs f16");
  for (const Policy& p : policies) {
    auto r = run(p, **model, dev, tokens, n_ctx, call, windows, final_density);
    if (!r.ok()) {
      std::fprintf(stderr, "%s: %s\n", p.name.c_str(), r.status().message().c_str());
      return 1;
    }
    if (p.kind == Kind::none) {
      base = r->ppl;
      base_nll = r->window_nll;
      if (set != "default") print_density_stats(final_density);
    }
    if (p.name == "static int4") int4_nll = r->window_nll;
    const double rel = base > 0 ? r->ppl / base : 1;
    std::printf("%-20s %10.4f %8.3f%% %10.2f %11.3f", p.name.c_str(), r->ppl, 100 * (rel - 1), r->mean_bits, r->kv_fraction);
    // Standard errors over windows (paired): quantization noise makes single figures move.
    const auto [d0, s0] = paired(r->window_nll, base_nll);
    std::printf("   dNLL vs f16 %+.4f +- %.4f", d0, s0);
    if (!int4_nll.empty() && p.name != "static int4") {
      const auto [d4, s4] = paired(r->window_nll, int4_nll);
      std::printf(", vs int4 %+.4f +- %.4f", d4, s4);
    }
    std::printf("\n");
    out.push_back({{"policy", p.name}, {"ppl", r->ppl}, {"ppl_ratio_vs_f16", rel}, {"mean_bits", r->mean_bits},
                   {"kv_bytes_vs_f16", r->kv_fraction}, {"scored", r->scored}, {"windows", windows}, {"ctx", n_ctx},
                   {"call_tokens", call}});
  }
  if (!json_path.empty()) {
    std::ofstream j(json_path);
    j << out.dump(1) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace llmsvc::bench

int main(int argc, char** argv) { return llmsvc::bench::main_impl(argc, argv); }
