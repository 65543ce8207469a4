// SPDX-License-Identifier: Apache-2.0
// Test helpers: compile a grammar or schema and run the matcher over whole strings.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "runtime/core/constrain/automaton.h"
#include "runtime/core/constrain/constraint.h"

namespace llmsvc::constrain::test {

inline CompiledGrammar must_gbnf(std::string_view text) {
  auto g = compile_gbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << text;
  return g.ok() ? *g : nullptr;
}

inline CompiledGrammar must_schema(std::string_view schema) {
  auto g = compile_json_schema(schema);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << schema;
  return g.ok() ? *g : nullptr;
}

// Whether `text` is a complete sentence of the grammar.
inline bool accepts(const CompiledGrammar& g, std::string_view text) {
  if (!g) return false;
  Automaton a(g);
  const uint32_t s = a.advance(a.initial(), text);
  return s != Automaton::kReject && a.accepting(s);
}

// Whether `text` is a prefix of some sentence.
inline bool prefix_ok(const CompiledGrammar& g, std::string_view text) {
  if (!g) return false;
  Automaton a(g);
  return a.advance(a.initial(), text) != Automaton::kReject;
}

// Expects every string of `yes` accepted and every one of `no` rejected (as whole sentences).
inline void expect_language(const CompiledGrammar& g, std::initializer_list<const char*> yes,
                            std::initializer_list<const char*> no) {
  for (const char* s : yes) EXPECT_TRUE(accepts(g, s)) << "should accept: " << s;
  for (const char* s : no) EXPECT_FALSE(accepts(g, s)) << "should reject: " << s;
}

}  // namespace llmsvc::constrain::test
