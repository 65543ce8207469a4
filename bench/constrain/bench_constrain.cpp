// SPDX-License-Identifier: Apache-2.0
// bench_constrain: what structured output adds per generated token, printed as JSON lines.
//
// For each model's vocabulary (SmolLM2: 49k byte-level BPE; Gemma-3: 262k SentencePiece) and a
// few schemas, a valid reply is tokenized with the model's own tokenizer and replayed through
// a Constraint as a generation would: allowed() (the mask) then accept() for every token.
//   cold:  a fresh Constraint, as one call sees it (walks built on first use)
//   warm:  the same Constraint reset and replayed (every walk and state mask cached)
//   walk:  the plain trie walk (the reference method, nothing cached) at the same states
// and, in the same run, one decode step of the model (forward of one token at context 128),
// so the mask cost reads as a fraction of a step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hal/cpu/cpu_device.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/constrain/automaton.h"
#include "runtime/core/constrain/constraint.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/model.h"

using namespace llmsvc;
using namespace llmsvc::constrain;
using Clock = std::chrono::steady_clock;

namespace {

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

struct SchemaCase {
  const char* name;
  const char* schema;
  const char* reply;
};

const SchemaCase kCases[] = {
    {"person", R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":120},"email":{"type":"string"}},"required":["name","age"]})",
     "{\n  \"name\": \"Ada Lovelace, Countess of Lovelace\",\n  \"age\": 36,\n  \"email\": \"ada@example.org\"\n}"},
    {"event", R"({"type":"object","properties":{"title":{"type":"string","maxLength":40},"priority":{"enum":["low","medium","high"]},"attendees":{"type":"array","items":{"type":"string"}},"duration":{"type":"number","minimum":0,"maximum":480}},"required":["title","priority","attendees"]})",
     R"({"title": "Quarterly \"planning\" review", "priority": "high", "attendees": ["Ann", "Bob", "Chloé"], "duration": 90.5})"},
    {"any_json", "{}",
     R"({"car": {"make": "Renault", "model": "Clio", "year": 2019, "features": ["gps", "airbag", null], "price": 1.25e4}})"},
};

struct Timing {
  std::vector<double> mask_us, accept_us;
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}
double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Replays `tokens` through `c`; the mask first, as a sampler would. Stops at a token the
// constraint refuses (then the reply's tokenization does not fit the grammar: reported).
bool replay(Constraint& c, const std::vector<int32_t>& tokens, Timing& t) {
  for (int32_t tok : tokens) {
    auto t0 = Clock::now();
    const bool ok = c.allowed().test(tok);
    t.mask_us.push_back(us_since(t0));
    if (!ok) return false;
    t0 = Clock::now();
    if (!c.accept(tok).ok()) return false;
    t.accept_us.push_back(us_since(t0));
  }
  return c.done();
}

double decode_step_ms(const Model& model, hal::Device& device, int ctx, int steps) {
  const ModelConfig& cfg = model.config();
  Forward fwd(model, device, 256);
  policy::KvChunkStore store({cfg.n_layer, cfg.n_head_kv, cfg.head_dim, 16}, 0);
  policy::KvSequence seq(store);
  std::vector<int32_t> toks(static_cast<size_t>(ctx + steps));
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>((i * 7919) % static_cast<size_t>(cfg.n_vocab));
  std::vector<float> logits;
  if (!fwd.eval(seq, std::span<const int32_t>(toks).first(static_cast<size_t>(ctx)), 0, false, logits).ok()) return -1;
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    auto t0 = Clock::now();
    if (!fwd.eval(seq, std::span<const int32_t>(toks).subspan(static_cast<size_t>(ctx + i), 1), ctx + i, false, logits).ok())
      return -1;
    ms.push_back(us_since(t0) / 1e3);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int bench_model(const std::string& name, const std::string& path, int threads) {
  auto device = hal::cpu::make_cpu_device(threads);
  auto model = Model::load(path, *device);
  if (!model.ok()) {
    std::fprintf(stderr, "bench_constrain: %s: %s\n", path.c_str(), model.status().message().c_str());
    return 1;
  }
  const Tokenizer& tk = (*model)->tokenizer();
  auto t0 = Clock::now();
  auto vocab = TokenVocab::from_tokenizer(tk);
  const double vocab_ms = us_since(t0) / 1e3;
  const double step_ms = decode_step_ms(**model, *device, 128, 16);
  nlohmann::json head = {{"test", "model"}, {"model", name}, {"n_vocab", vocab->size()},
                         {"trie_nodes", vocab->nodes().size()}, {"vocab_build_ms", vocab_ms},
                         {"decode_step_ms", step_ms}, {"threads", threads}};
  std::printf("%s\n", head.dump().c_str());
  for (const auto& sc : kCases) {
    t0 = Clock::now();
    auto grammar = compile_json_schema(sc.schema);
    const double compile_ms = us_since(t0) / 1e3;
    if (!grammar.ok()) {
      std::fprintf(stderr, "%s: %s\n", sc.name, grammar.status().message().c_str());
      return 1;
    }
    const std::vector<int32_t> tokens = tk.encode(sc.reply, false, false);
    auto c = Constraint::create(*grammar, vocab);
    if (!c.ok()) return 1;
    Timing cold, warm;
    const bool ok_cold = replay(**c, tokens, cold);
    (*c)->reset();
    const bool ok_warm = replay(**c, tokens, warm);
    const ConstraintStats st = (*c)->stats();
    // The reference walk at the same states.
    Automaton a(*grammar);
    TokenMasker plain(vocab);
    TokenMask m;
    std::vector<double> walk_us;
    uint32_t s = a.initial();
    for (int32_t tok : tokens) {
      auto w0 = Clock::now();
      plain.walk(a, s, m);
      walk_us.push_back(us_since(w0));
      s = a.advance(s, vocab->piece(tok));
      if (s == Automaton::kReject) break;
    }
    nlohmann::json j = {{"test", "mask"},
                        {"model", name},
                        {"schema", sc.name},
                        {"tokens", tokens.size()},
                        {"fits", ok_cold && ok_warm},
                        {"compile_ms", compile_ms},
                        {"cold_mask_us_mean", mean(cold.mask_us)},
                        {"cold_mask_us_p50", pct(cold.mask_us, 0.5)},
                        {"cold_mask_us_max", pct(cold.mask_us, 1.0)},
                        {"warm_mask_us_mean", mean(warm.mask_us)},
                        {"accept_us_mean", mean(cold.accept_us)},
                        {"walk_us_mean", mean(walk_us)},
                        {"cold_fraction_of_decode_step", step_ms > 0 ? mean(cold.mask_us) / (step_ms * 1e3) : 0},
                        {"walks_built", st.mask.walks},
                        {"state_cache_hits", st.mask.state_hits},
                        {"memory_kib", st.memory_bytes / 1024}};
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::string(std::getenv("HOME") ? std::getenv("HOME") : "/root") + "/.cache/llmsvc/models";
  int threads = 2;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--models" && i + 1 < argc) dir = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = std::stoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_constrain [--models DIR] [--threads N]\n");
      return 2;
    }
  }
  int rc = 0;
  for (auto [name, file] : {std::pair{"SmolLM2-135M", "SmolLM2-135M-Instruct.Q4_1.gguf"},
                            std::pair{"gemma-3-270m", "gemma-3-270m-q4_k_m.gguf"}}) {
    const std::string path = dir + "/" + file;
    if (!std::filesystem::exists(path)) {
      std::fprintf(stderr, "bench_constrain: %s absent, skipped\n", path.c_str());
      continue;
    }
    rc |= bench_model(name, path, threads);
  }
  return rc;
}
