// SPDX-License-Identifier: Apache-2.0
// bench_prompt_keep MODEL.gguf [--windows N] [--prompt-words N] [--cont N] [--threads N] [--reps N] [--text FILE] [--out F.json]
//                   [--task continue|facts]
// Prompt compression's cost in quality and its gain in prefill (issue 23). Windows of the
// held-out text are cut into a prompt (--prompt-words words, whole sentences) and the
// continuation that follows it (--cont tokens). Per share kept (1, 0.9, ..., 0.3) and per way of
// dropping: the mean NLL of the continuation (perplexity) under the full model after the
// compressed prompt, and the prompt's prefill time (median of --reps). Ways of dropping, to the
// same token count: llmsvc's (PromptWords: the least informative sentences by unigram
// information, then words; the last sentence and lines kept), words alone by the same score
// (LLMLingua's granularity), random words (seeded), and the prompt's start cut off (its end kept).
// --task facts: a task measure instead of the continuation's perplexity. Three facts ("The key of
// room Alder is 4821.") are put between the window's sentences at seeded places, and the prompt
// ends with a question about one of them ("The key of room Alder is"); the score is the answer's
// perplexity and the share of windows whose answer the model's greedy choice gives exactly.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "bench/elastic/held_out.h"
#include "hal/devices/device_registry.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/engine/prompt_compression.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/model.h"

using namespace llmsvc;

namespace {

constexpr double kKeeps[] = {1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3};
enum Way { kLlmsvc, kWordsByInformation, kRandom, kTail, kWays };
constexpr const char* kWayNames[] = {"llmsvc (sentences, then words)", "words by information", "random words",
                                     "keep the end"};

struct Options {
  std::string model, text = bench::default_text_path(), out;
  int windows = 8, prompt_words = 160, cont = 32, threads = 2, reps = 3;
  bool facts = false;  // --task facts
};


double token_nll(const std::vector<float>& logits, int target) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double s = 0;
  for (float x : logits) s += std::exp(static_cast<double>(x - mx));
  return std::log(s) + mx - logits[static_cast<size_t>(target)];
}

// Words of `text` (leading white space with each) in order.
std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t b = i;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    out.push_back(text.substr(b, i - b));
  }
  return out;
}

struct Window {
  std::string prompt;
  std::vector<int32_t> cont;  // scored, teacher-forced
};

// Facts a window's prompt states, and the question about one of them that ends it.
constexpr const char* kRooms[] = {"Alder", "Birch", "Cedar", "Maple", "Rowan", "Willow", "Hazel", "Linden"};

// Puts three facts between `w`'s sentences at seeded places, ends its prompt with the question
// about one, and makes the fact's number its continuation.
void add_facts(const Tokenizer& tok, Window& w, std::mt19937& rng) {
  std::vector<std::string> sentences;  // each with its leading space
  size_t b = 0;
  for (size_t i = 0; i < w.prompt.size(); ++i)
    if ((w.prompt[i] == '.' || w.prompt[i] == '?' || w.prompt[i] == '!') && (i + 1 == w.prompt.size() || w.prompt[i + 1] == ' ')) {
      sentences.push_back(w.prompt.substr(b, i + 1 - b));
      b = i + 1;
    }
  if (b < w.prompt.size()) sentences.push_back(w.prompt.substr(b));
  std::vector<int> rooms(std::size(kRooms));
  std::iota(rooms.begin(), rooms.end(), 0);
  std::shuffle(rooms.begin(), rooms.end(), rng);
  std::uniform_int_distribution<int> digits(1000, 9999);
  std::uniform_int_distribution<size_t> place(0, sentences.size());
  std::string asked, answer;
  const int ask = std::uniform_int_distribution<int>(0, 2)(rng);
  for (int f = 0; f < 3; ++f) {
    const std::string room = kRooms[rooms[static_cast<size_t>(f)]], number = std::to_string(digits(rng));
    sentences.insert(sentences.begin() + static_cast<std::ptrdiff_t>(place(rng)), " The key of room " + room + " is " + number + ".");
    if (f == ask) asked = " The key of room " + room + " is", answer = " " + number + ".";
  }
  w.prompt.clear();
  for (const std::string& x : sentences) w.prompt += x;
  while (!w.prompt.empty() && w.prompt.front() == ' ') w.prompt.erase(0, 1);
  w.prompt += asked;
  w.cont = tok.encode(answer, false, false);
}

// Windows: a prompt of about `words` words ending at a sentence end, and the tokens after it.
std::vector<Window> make_windows(const Tokenizer& tok, const std::string& held, const Options& o) {
  const std::vector<std::string> words = split_words(held);
  std::vector<Window> out;
  size_t at = 0;
  while (static_cast<int>(out.size()) < o.windows && at + static_cast<size_t>(o.prompt_words) + 200 < words.size()) {
    size_t end = at + static_cast<size_t>(o.prompt_words);
    while (end < words.size() && words[end - 1].find_last_of(".!?") != words[end - 1].size() - 1) ++end;
    Window w;
    for (size_t k = at; k < end; ++k) w.prompt += words[k];
    std::string rest;
    for (size_t k = end; k < end + 120 && k < words.size(); ++k) rest += words[k];
    std::vector<int32_t> ids = tok.encode(rest, false, false);
    if (static_cast<int>(ids.size()) < o.cont) break;
    ids.resize(static_cast<size_t>(o.cont));
    w.cont = std::move(ids);
    while (!w.prompt.empty() && std::isspace(static_cast<unsigned char>(w.prompt.front()))) w.prompt.erase(0, 1);
    out.push_back(std::move(w));
    at = end + 400;  // windows apart
  }
  return out;
}

// The prompt's ids after dropping `way`'s way to at most `target` tokens.
std::vector<int32_t> compressed(const Tokenizer& tok, const std::string& prompt, Way way, int target, std::mt19937& rng) {
  std::vector<int32_t> whole = tok.encode(prompt, true, false);
  if (static_cast<int>(whole.size()) <= target) return whole;
  if (way == kTail) {
    std::vector<int32_t> out;
    if (tok.bos() >= 0 && !whole.empty() && whole.front() == tok.bos()) out.push_back(tok.bos());
    out.insert(out.end(), whole.end() - (target - static_cast<int>(out.size())), whole.end());
    return out;
  }
  if (way == kLlmsvc) {
    const PromptWords words(tok, prompt);
    return tok.encode(words.without(static_cast<int>(whole.size()) - target), true, false);
  }
  std::vector<std::string> words = split_words(prompt);
  if (way == kWordsByInformation) {  // LLMLingua's granularity with llmsvc's score, for comparison
    std::vector<float> info(words.size(), 0.0f);
    std::vector<int> ntok(words.size(), 0);
    std::vector<size_t> order;
    for (size_t k = 0; k + 1 < words.size(); ++k) {
      const auto ids = tok.encode(words[k], false, false);
      for (TokenId id : ids) info[k] = std::max(info[k], tok.information(id));
      ntok[k] = static_cast<int>(ids.size());
      order.push_back(k);
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return info[x] < info[y]; });
    std::vector<bool> drop(words.size(), false);
    int need = static_cast<int>(whole.size()) - target;
    for (size_t k : order) {
      if (need <= 0) break;
      drop[k] = true;
      need -= ntok[k];
    }
    std::string t;
    for (size_t k = 0; k < words.size(); ++k)
      if (!drop[k]) t += words[k];
    return tok.encode(t, true, false);
  }
  while (words.size() > 1 && static_cast<int>(whole.size()) > target) {
    std::uniform_int_distribution<size_t> pick(0, words.size() - 2);  // the last word stays
    words.erase(words.begin() + static_cast<std::ptrdiff_t>(pick(rng)));
    std::string t;
    for (const std::string& w : words) t += w;
    whole = tok.encode(t, true, false);
  }
  return whole;
}

int fail(const Status& s) { return std::fprintf(stderr, "bench_prompt_keep: %s\n", s.message().c_str()), 1; }

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_prompt_keep MODEL.gguf [--windows N] [--prompt-words N] [--cont N] [--threads N] "
                         "[--reps N] [--text FILE] [--out F.json]\n");
    return 2;
  }
  o.model = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--windows") o.windows = std::stoi(v);
    else if (a == "--prompt-words") o.prompt_words = std::stoi(v);
    else if (a == "--cont") o.cont = std::stoi(v);
    else if (a == "--threads") o.threads = std::stoi(v);
    else if (a == "--reps") o.reps = std::stoi(v);
    else if (a == "--text") o.text = v;
    else if (a == "--out") o.out = v;
    else if (a == "--task" && (v == "facts" || v == "continue")) o.facts = v == "facts";
    else return std::fprintf(stderr, "bench_prompt_keep: unknown option %s\n", a.c_str()), 2;
  }
  auto dev = hal::open_device("cpu", hal::DeviceOptions{o.threads});
  if (!dev.ok()) return fail(dev.status());
  auto loaded = Model::load(o.model, **dev);
  if (!loaded.ok()) return fail(loaded.status());
  const Model& m = **loaded;
  const Tokenizer& tok = m.tokenizer();
  std::vector<Window> windows = make_windows(tok, bench::held_out_text(bench::read_text(o.text)), o);
  std::mt19937 fact_rng(7);
  if (o.facts)
    for (Window& w : windows) add_facts(tok, w, fact_rng);
  if (windows.empty()) return fail(Status(Code::invalid_argument, "the text is too short for one window"));
  const ModelConfig& c = m.config();
  Forward fwd(m, **dev, Forward::kDefaultBatch);
  fwd.set_mass_tracking(false);
  std::mt19937 rng(23);

  nlohmann::json rows = nlohmann::json::array();
  std::printf("prompt compression: %zu windows of ~%d words, %s, %s\n", windows.size(), o.prompt_words,
              o.facts ? "a question about one of three facts in each" : (std::to_string(o.cont) + " continuation tokens").c_str(),
              o.model.c_str());
  std::printf("%-5s | %-30s | %6s | %10s | %8s%s\n", "keep", "drop", "kept", "perplexity", "prefill", o.facts ? " | answered" : "");
  double full_prefill = 0;
  for (double keep : kKeeps) {
    for (int way = 0; way < kWays; ++way) {
      if (keep == 1.0 && way != kLlmsvc) continue;
      double nll = 0, kept = 0, prefill = 0;
      int n_nll = 0, answered = 0;
      for (const Window& w : windows) {
        const int whole = static_cast<int>(tok.encode(w.prompt, true, false).size());
        const int target = static_cast<int>(std::ceil(keep * whole - 1e-9));
        const std::vector<int32_t> prompt = compressed(tok, w.prompt, static_cast<Way>(way), target, rng);
        kept += static_cast<double>(prompt.size()) / whole;
        policy::KvChunkStore store({c.n_layer, c.n_head_kv, c.head_dim, 16}, 0);
        policy::KvSequence seq(store);
        std::vector<float> logits;
        std::vector<double> times;
        for (int r = 0; r < o.reps; ++r) {
          if (seq.truncate(0) != 0) return fail(Status(Code::internal, "the KV was not cut"));
          const double t0 = now_s();
          if (Status s = fwd.eval(seq, prompt, 0, false, logits); !s.ok()) return fail(s);
          times.push_back(now_s() - t0);
        }
        std::sort(times.begin(), times.end());
        prefill += times[times.size() / 2];
        const int n = static_cast<int>(prompt.size());
        bool exact = true;
        for (size_t i = 0; i < w.cont.size(); ++i) {
          nll += token_nll(logits, w.cont[i]);
          exact = exact && std::max_element(logits.begin(), logits.end()) - logits.begin() == w.cont[i];
          ++n_nll;
          const int32_t t[] = {w.cont[i]};
          if (Status s = fwd.eval(seq, t, n + static_cast<int>(i), false, logits); !s.ok()) return fail(s);
        }
        answered += exact;
      }
      kept /= static_cast<double>(windows.size());
      prefill /= static_cast<double>(windows.size());
      if (keep == 1.0) full_prefill = prefill;
      const double ppl = std::exp(nll / n_nll);
      const double share = static_cast<double>(answered) / static_cast<double>(windows.size());
      std::printf("%5.1f | %-30s | %6.3f | %10.3f | %7.3fx", keep, kWayNames[way], kept, ppl, prefill / full_prefill);
      if (o.facts) std::printf(" | %8.3f", share);
      std::printf("\n");
      rows.push_back({{"keep", keep}, {"way", kWayNames[way]}, {"kept", kept}, {"ppl", ppl},
                      {"prefill_ms", 1e3 * prefill}, {"prefill_ratio", prefill / full_prefill}});
      if (o.facts) rows.back()["answered"] = share;
    }
  }
  if (!o.out.empty())
    std::ofstream(o.out) << nlohmann::json{{"model", o.model}, {"windows", windows.size()}, {"prompt_words", o.prompt_words},
                                           {"cont", o.cont}, {"task", o.facts ? "facts" : "continue"}, {"threads", o.threads}, {"rows", rows}}.dump(1)
                         << "\n";
  return 0;
}
