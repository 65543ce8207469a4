// Perplexity of a model whose KV cache is compressed between calls, per compression policy:
// f16 (none), static int8 / int4 / int2 (every compressible chunk), and LLMS's
// tolerance-aware allocation at several ratios, with an ablation that gives the bits in the
// reverse order of density (same average, least informed choice).
//
// A text is cut into windows of --ctx tokens; each window is fed as calls of --call tokens
// (what an app's turns look like), and after every call the context is compressed as the
// engine does (policy/context_compression.h). The tokens of each window's second half are
// scored, like llama.cpp's perplexity tool, so every scored token sees a compressed history.
//
//   bench_ppl_compression [--model PATH] [--text PATH] [--ctx 512] [--call 64]
//                         [--windows N] [--threads 2] [--json PATH]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hal/cpu/cpu_device.h"
#include "policy/bit_allocation.h"
#include "policy/context_compression.h"
#include "policy/kv_chunk_store.h"
#include "runtime/api/default_model.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/model.h"

namespace llmsvc::bench {
namespace {

enum class Kind { none, uniform, llms, llms_reversed };

struct Policy {
  std::string name;
  Kind kind;
  double ratio;           // llms: the average bits / 8
  hal::KvFormat uniform;  // uniform: every compressible chunk
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

Status compress(const Policy& p, policy::KvSequence& seq, int n_evaluated) {
  const int n = policy::compressible_chunks(seq, n_evaluated);
  switch (p.kind) {
    case Kind::none: return Status::Ok();
    case Kind::uniform: return policy::apply_bits(seq, std::vector<uint8_t>(n, static_cast<uint8_t>(p.uniform)));
    case Kind::llms: return policy::compress_context(seq, n_evaluated, p.ratio);
    case Kind::llms_reversed: return policy::apply_bits(seq, reversed_bits(policy::chunk_densities(seq, n), p.ratio));
  }
  return Status::Ok();
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
};

Result<Outcome> run(const Policy& p, const Model& model, hal::Device& dev, const std::vector<int32_t>& tokens, int n_ctx,
                    int call, int windows) {
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
    for (int pos = 0; pos < n_ctx; pos += call) {
      const int n = std::min(call, n_ctx - pos);
      LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, std::span<const int32_t>(win + pos, n), pos, true, logits));
      for (int j = 0; j < n; ++j) {
        const int at = pos + j;  // predicts at + 1
        if (at < n_ctx / 2 || at + 1 >= n_ctx) continue;
        nll -= log_prob(logits.data() + static_cast<size_t>(j) * cfg.n_vocab, cfg.n_vocab, win[at + 1]);
        ++o.scored;
      }
      LLMSVC_RETURN_IF_ERROR(compress(p, seq, pos + n));
    }
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
  std::string model_path = api::default_model_path();
  std::string text_path = std::string(LLMSVC_TEST_DATA) + "/golden/ppl_text.txt";
  std::string json_path;
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
  const std::vector<Policy> policies = {
      {"f16", Kind::none, 0, F::f16},
      {"static int8", Kind::uniform, 1.0, F::q8},
      {"static int4", Kind::uniform, 0.5, F::q4},
      {"static int2", Kind::uniform, 0.25, F::q2},
      {"llms 0.75", Kind::llms, 0.75, F::f16},
      {"llms 0.5", Kind::llms, 0.5, F::f16},
      {"llms 0.375", Kind::llms, 0.375, F::f16},
      {"llms 0.75 reversed", Kind::llms_reversed, 0.75, F::f16},
      {"llms 0.375 reversed", Kind::llms_reversed, 0.375, F::f16},
  };
  nlohmann::json out = nlohmann::json::array();
  double base = 0;
  std::printf("%d windows of %d tokens, calls of %d tokens, %s\n\n", windows, n_ctx, call, model_path.c_str());
  std::printf("%-20s %10s %9s %10s %12s\n", "policy", "perplexity", "vs f16", "mean bits", "KV vs f16");
  for (const Policy& p : policies) {
    auto r = run(p, **model, dev, tokens, n_ctx, call, windows);
    if (!r.ok()) {
      std::fprintf(stderr, "%s: %s\n", p.name.c_str(), r.status().message().c_str());
      return 1;
    }
    if (p.kind == Kind::none) base = r->ppl;
    const double rel = base > 0 ? r->ppl / base : 1;
    std::printf("%-20s %10.4f %8.3f%% %10.2f %11.3f\n", p.name.c_str(), r->ppl, 100 * (rel - 1), r->mean_bits, r->kv_fraction);
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
