// SPDX-License-Identifier: Apache-2.0
// EngineImpl, structured output: a call's JSON Schema or grammar as a constraint over the
// model's vocabulary. Compiling costs milliseconds for a large schema, and a constraint's mask
// caches fill over its first calls (each new matcher state walks the vocabulary's trie), so
// each text is compiled once and its constraint kept between calls: the next call with that
// schema starts warm. Both are bounded: kMaxCompiled texts, kMaxIdle constraints (each with
// at most kIdleCacheBytes of caches); the least recently used go first.
#include "runtime/core/engine/engine_impl.h"

namespace llmsvc {
namespace {

constexpr size_t kMaxCompiled = 32;
constexpr size_t kMaxIdle = 4;
constexpr size_t kIdleCacheBytes = size_t{16} << 20;

std::string key_of(const CallParams& p) {
  std::string key = p.json_schema.empty() ? "grammar:" : "schema:";
  key.append(p.json_schema.empty() ? p.grammar : p.json_schema);
  return key;
}

}  // namespace

Result<std::unique_ptr<constrain::Constraint>> EngineImpl::make_constraint(const CallParams& params) {
  if (params.json_schema.empty() && params.grammar.empty()) return std::unique_ptr<constrain::Constraint>();
  const bool schema = !params.json_schema.empty();
  const std::string key = key_of(params);
  constrain::CompiledGrammar grammar;
  std::shared_ptr<const constrain::TokenVocab> vocab;
  {
    std::lock_guard<std::mutex> lock(constrain_mu_);
    if (!vocab_) vocab_ = constrain::TokenVocab::from_tokenizer(model_->tokenizer());
    vocab = vocab_;
    if (auto it = compiled_.find(key); it != compiled_.end()) {
      it->second.used = ++compiled_clock_;
      if (it->second.idle) {
        std::unique_ptr<constrain::Constraint> warm = std::move(it->second.idle);
        warm->reset();
        return warm;
      }
      grammar = it->second.grammar;
    }
  }
  if (!grammar) {
    // Compiled outside the lock: another call's compile does not wait for this one.
    auto compiled = schema ? constrain::compile_json_schema(params.json_schema) : constrain::compile_gbnf(params.grammar);
    if (!compiled.ok()) {
      const Status& s = compiled.status();
      return Status(s.code(), std::string(schema ? "json_schema: " : "grammar: ") + s.message());
    }
    grammar = *compiled;
    std::lock_guard<std::mutex> lock(constrain_mu_);
    if (compiled_.size() >= kMaxCompiled && !compiled_.count(key)) {
      auto oldest = compiled_.begin();
      for (auto it = compiled_.begin(); it != compiled_.end(); ++it)
        if (it->second.used < oldest->second.used) oldest = it;
      compiled_.erase(oldest);
    }
    Compiled& c = compiled_[key];
    c.grammar = grammar;
    c.used = ++compiled_clock_;
  }
  constrain::MaskOptions options;
  options.max_cache_bytes = kIdleCacheBytes;
  return constrain::Constraint::create(grammar, vocab, options);
}

void EngineImpl::recycle_constraint(const CallParams& params, std::unique_ptr<constrain::Constraint> c) {
  if (!c) return;
  std::unique_ptr<constrain::Constraint> dropped;  // freed after the lock
  std::lock_guard<std::mutex> lock(constrain_mu_);
  auto it = compiled_.find(key_of(params));
  if (it == compiled_.end() || it->second.idle) return;  // evicted meanwhile, or another call's kept
  it->second.idle = std::move(c);
  size_t idle = 0;
  Compiled* oldest = nullptr;
  for (auto& [k, e] : compiled_) {
    if (!e.idle) continue;
    ++idle;
    if (!oldest || e.used < oldest->used) oldest = &e;
  }
  if (idle > kMaxIdle) dropped = std::move(oldest->idle);
}

}  // namespace llmsvc
