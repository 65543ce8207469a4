// SPDX-License-Identifier: Apache-2.0
// GBNF parsing, grammar validation and the matcher: accepted and rejected strings, escapes,
// Unicode classes, quantifiers, bounds, and clear errors.
#include <gtest/gtest.h>

#include "runtime/core/constrain/gbnf.h"
#include "runtime/core/constrain/utf8_ranges.h"
#include "tests/constrain/match_util.h"

namespace llmsvc::constrain::test {
namespace {

TEST(Gbnf, LiteralsAlternativesAndSequences) {
  auto g = must_gbnf(R"(root ::= "yes" | "no" | "may" "be")");
  EXPECT_TRUE(accepts(g, "yes"));
  EXPECT_TRUE(accepts(g, "no"));
  EXPECT_TRUE(accepts(g, "maybe"));
  EXPECT_FALSE(accepts(g, "ye"));
  EXPECT_TRUE(prefix_ok(g, "ye"));
  EXPECT_FALSE(prefix_ok(g, "yess"));
  EXPECT_FALSE(accepts(g, ""));
}

TEST(Gbnf, RulesSpanLinesAndComments) {
  auto g = must_gbnf(
      "# a comment\n"
      "root ::= greeting\n"
      "   \" \" name   # trailing comment\n"
      "greeting ::= \"hi\" |\n"
      "   \"hello\"\n"
      "name ::= [a-z]+\n");
  EXPECT_TRUE(accepts(g, "hi bob"));
  EXPECT_TRUE(accepts(g, "hello x"));
  EXPECT_FALSE(accepts(g, "hello "));
  EXPECT_FALSE(accepts(g, "hello Bob"));
}

TEST(Gbnf, Quantifiers) {
  auto g = must_gbnf(R"(root ::= "a"* "b"+ "c"? "d"{2} "e"{1,3} "f"{2,})");
  EXPECT_TRUE(accepts(g, "bddeff"));
  EXPECT_TRUE(accepts(g, "aaabbbcddeeefff"));
  EXPECT_FALSE(accepts(g, "ddeff"));       // b+ needs one
  EXPECT_FALSE(accepts(g, "bdeff"));       // d{2}
  EXPECT_FALSE(accepts(g, "bddeeeeff"));   // e{1,3}
  EXPECT_FALSE(accepts(g, "bddef"));       // f{2,}
  auto lit = must_gbnf(R"(root ::= "ab"{2,3})");
  EXPECT_TRUE(accepts(lit, "abab"));
  EXPECT_TRUE(accepts(lit, "ababab"));
  EXPECT_FALSE(accepts(lit, "aba"));
  EXPECT_FALSE(accepts(lit, "abababab"));
}

TEST(Gbnf, CharacterClassesAndEscapes) {
  auto g = must_gbnf(R"(root ::= [a-cx\-] [^"\\\n] "\x41\u00e9\t" [\]])");
  EXPECT_TRUE(accepts(g, "a!A\xC3\xA9\t]"));
  EXPECT_TRUE(accepts(g, "-z" "A\xC3\xA9\t]"));
  EXPECT_FALSE(accepts(g, "d!A\xC3\xA9\t]"));
  EXPECT_FALSE(accepts(g, "a\"A\xC3\xA9\t]"));
  EXPECT_FALSE(accepts(g, "a\nA\xC3\xA9\t]"));
}

TEST(Gbnf, UnicodeClassesMatchWholeCodePoints) {
  auto g = must_gbnf("root ::= [α-ω]+ [^a-z] .");
  EXPECT_TRUE(accepts(g, "αβγ!x"));
  EXPECT_TRUE(accepts(g, "ω\xE2\x82\xAC\xF0\x9F\x98\x80"));  // € then 😀
  EXPECT_FALSE(accepts(g, "αbx"));
  // A negated class never matches half a character or an invalid sequence.
  EXPECT_FALSE(prefix_ok(g, "α\xC3"  "a"));
  EXPECT_FALSE(prefix_ok(g, "α\xED\xA0\x80"));  // a surrogate
  EXPECT_FALSE(prefix_ok(g, "α\xC0\x80"));      // overlong NUL
  EXPECT_FALSE(prefix_ok(g, "α\xF4\x90\x80\x80"));  // above U+10FFFF
}

TEST(Gbnf, Utf8SequencesCoverEveryCodePointOnce) {
  // Every valid code point of a mixed set matches exactly one sequence, and those outside none.
  const std::vector<CodeRange> set = {{0x41, 0x5A}, {0x7F, 0x81}, {0x7FF, 0x801}, {0xD7FF, 0xE001}, {0xFFFF, 0x10001},
                                      {0x10FFFE, 0x10FFFF}};
  const auto seqs = utf8_sequences(set);
  auto inside = [&](uint32_t cp) {
    for (auto [lo, hi] : normalize_ranges(set))
      if (cp >= lo && cp <= hi) return true;
    return false;
  };
  for (uint32_t cp : {0x40u, 0x41u, 0x5Au, 0x7Eu, 0x7Fu, 0x80u, 0x81u, 0x82u, 0x7FEu, 0x7FFu, 0x800u, 0x801u, 0xD7FFu,
                      0xE000u, 0xE001u, 0xE002u, 0xFFFEu, 0xFFFFu, 0x10000u, 0x10001u, 0x10002u, 0x10FFFDu, 0x10FFFFu}) {
    std::vector<uint8_t> b;
    append_utf8(cp, b);
    int hits = 0;
    for (const auto& s : seqs) {
      if (s.size() != b.size()) continue;
      bool ok = true;
      for (size_t i = 0; i < b.size(); ++i) ok = ok && b[i] >= s[i].first && b[i] <= s[i].second;
      hits += ok;
    }
    EXPECT_EQ(hits, inside(cp) ? 1 : 0) << std::hex << cp;
  }
}

TEST(Gbnf, RecursionNestsAndBalances) {
  auto g = must_gbnf(R"g(root ::= "(" root ")" | "x")g");
  EXPECT_TRUE(accepts(g, "x"));
  EXPECT_TRUE(accepts(g, "(((x)))"));
  EXPECT_FALSE(accepts(g, "((x)"));
  EXPECT_FALSE(accepts(g, "(x))"));
}

TEST(Gbnf, RepetitionRunsInConstantStackDepth) {
  // A tail-recursive loop must not grow the stack: 100,000 iterations under a depth of 1024.
  auto g = must_gbnf(R"(root ::= ("ab" | "c")* "!")");
  Automaton a(g);
  uint32_t s = a.initial();
  for (int i = 0; i < 100000; ++i) s = a.advance(s, "abc");
  s = a.advance(s, "!");
  EXPECT_TRUE(a.accepting(s));
  EXPECT_FALSE(a.overflowed());
}

TEST(Gbnf, NestingBeyondTheDepthBoundIsRejectedNotCrashed) {
  auto g = must_gbnf(R"(root ::= "[" root "]" | "0")");
  Automaton a(g, AutomatonLimits{.max_depth = 64});
  const uint32_t s = a.advance(a.initial(), std::string(200, '['));
  EXPECT_EQ(s, Automaton::kReject);
  EXPECT_TRUE(a.overflowed());
}

TEST(Gbnf, Errors) {
  struct Case {
    const char* text;
    const char* want;
  };
  const Case cases[] = {
      {"", "empty grammar"},
      {"root ::= foo", "'foo' is used but not defined"},
      {"start ::= \"a\"", "no rule 'root'"},
      {"root ::= root \"a\" | \"b\"", "left-recursive"},
      {"root ::= a\na ::= b? a \"x\" | \"y\"\nb ::= \"z\"", "left-recursive"},
      {"root ::= \"a\" root", "can never complete"},
      {"root ::= \"abc", "unterminated"},
      {"root ::= [b-a]", "out of order"},
      {"root ::= \"\\q\"", "unknown escape"},
      {"root ::= (\"a\" | \"b\"", "expected ')'"},
      {"root ::= \"a\"{3,1}", "n < m"},
      {"root ::= \"a\"{5000}", "repetition count above"},
      {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
      {"root = \"a\"", "expected '::='"},
      {"root ::= \"\\uD800\"", "not a Unicode scalar value"},
      {"root ::= [^\\x00-\\U0010FFFF]", "matches nothing"},
  };
  for (const auto& c : cases) {
    auto g = parse_gbnf(c.text);
    ASSERT_FALSE(g.ok()) << c.text;
    EXPECT_EQ(g.status().code(), Code::invalid_argument);
    EXPECT_NE(g.status().message().find(c.want), std::string::npos) << c.text << " -> " << g.status().message();
  }
  // Positions are reported.
  auto g = parse_gbnf("root ::= \"a\"\nx ::= @");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("line 2 column 7"), std::string::npos) << g.status().message();
}

TEST(Gbnf, DeepGroupsAndHugeInputsAreBounded) {
  std::string deep = "root ::= " + std::string(1000, '(') + "\"a\"" + std::string(1000, ')');
  auto g = parse_gbnf(deep);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("nested too deeply"), std::string::npos);
  auto big = parse_gbnf(std::string(kMaxGrammarText + 1, ' '));
  EXPECT_FALSE(big.ok());
  // Many rules chained through tail calls: validation and matching are iterative.
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 20000; ++i) {
    chain += "r";
    chain += std::to_string(i);
    chain += " ::= r";
    chain += std::to_string(i + 1);
    chain += "\n";
  }
  chain += "r20000 ::= \"z\"\n";
  auto c = must_gbnf(chain);
  EXPECT_TRUE(accepts(c, "z"));
}

TEST(Gbnf, AmbiguityIsDeduplicated) {
  // Exponentially many parse paths, one state: stacks are deduplicated.
  auto g = must_gbnf(R"(root ::= ("a" | "a" "a")* "b")");
  Automaton a(g);
  uint32_t s = a.advance(a.initial(), std::string(500, 'a'));
  ASSERT_NE(s, Automaton::kReject);
  EXPECT_LE(a.stacks(s).size(), 8u);
  EXPECT_TRUE(a.accepting(a.advance(s, "b")));
}

}  // namespace
}  // namespace llmsvc::constrain::test
