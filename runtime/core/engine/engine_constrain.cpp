// SPDX-License-Identifier: Apache-2.0
// EngineImpl, structured output: a call's JSON Schema or grammar as a constraint over the
// model's vocabulary. Compiling is the costly part (milliseconds for a large schema), so each
// text is compiled once and kept, a bounded number of them; the vocabulary's trie is built at
// the first constrained call and shared by every constraint after it.
#include "runtime/core/engine/engine_impl.h"

namespace llmsvc {
namespace {

constexpr size_t kMaxCompiled = 32;  // schemas and grammars kept compiled

}  // namespace

Result<std::unique_ptr<constrain::Constraint>> EngineImpl::make_constraint(const CallParams& params) {
  if (params.json_schema.empty() && params.grammar.empty()) return std::unique_ptr<constrain::Constraint>();
  const bool schema = !params.json_schema.empty();
  std::string key = schema ? "schema:" : "grammar:";
  key.append(schema ? params.json_schema : params.grammar);
  constrain::CompiledGrammar grammar;
  std::shared_ptr<const constrain::TokenVocab> vocab;
  {
    std::lock_guard<std::mutex> lock(constrain_mu_);
    if (!vocab_) vocab_ = constrain::TokenVocab::from_tokenizer(model_->tokenizer());
    vocab = vocab_;
    if (auto it = compiled_.find(key); it != compiled_.end()) {
      it->second.second = ++compiled_clock_;
      grammar = it->second.first;
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
    if (compiled_.size() >= kMaxCompiled) {
      auto oldest = compiled_.begin();
      for (auto it = compiled_.begin(); it != compiled_.end(); ++it)
        if (it->second.second < oldest->second.second) oldest = it;
      compiled_.erase(oldest);
    }
    compiled_[key] = {grammar, ++compiled_clock_};
  }
  return constrain::Constraint::create(grammar, vocab);
}

}  // namespace llmsvc
