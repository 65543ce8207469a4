// SPDX-License-Identifier: Apache-2.0
// Lexer and parser: whitespace control (trim_blocks, lstrip_blocks, - and +, comments, raw,
// newline normalization), statements (for / if / set / macro / call / filter / loop
// controls) against jinja2's output, and syntax errors with their line:column.
#include "tests/chat/render_case.h"

#include "runtime/core/chat/jinja/lexer.h"

namespace llmsvc::jinja::testing {
namespace {

const RenderCase kWhitespace[] = {
    {R"J(a
{% if true %}
b
{% endif %}
c
)J",
     R"J({})J",
     R"J(a
b
c)J"},
    {R"J(  {% if true %}x{% endif %}  
  {{ 'y' }}  
)J",
     R"J({})J",
     R"J(x  
  y  )J"},
    {R"J(a  {%- if true -%}  b  {%- endif -%}  c)J",
     R"J({})J",
     R"J(abc)J"},
    {R"J(a
  {%+ if true %}b{% endif %})J",
     R"J({})J",
     R"J(a
  b)J"},
    {R"J(x {# comment #} y
  {# c2 #}
z)J",
     R"J({})J",
     R"J(x  y
z)J"},
    {R"J({% for i in range(3) %}
  {{ i }}
{% endfor %}
)J",
     R"J({})J",
     R"J(  0
  1
  2
)J"},
    {R"J(a
b
c

)J",
     R"J({})J",
     R"J(a
b
c
)J"},
    {R"J({% raw %}{{ not parsed }}{% endraw %}!)J",
     R"J({})J",
     R"J({{ not parsed }}!)J"},
    {R"J({{- ' a ' -}}  
  {{ 'b' }})J",
     R"J({})J",
     R"J( a b)J"},
    {R"J(line
    {%- set x = 1 %}
{{ x }})J",
     R"J({})J",
     R"J(line1)J"},
    {R"J(a {%- if true %} b {% endif -%}

 c)J",
     R"J({})J",
     R"J(a b c)J"},
    {R"J({% if true %}  
{% endif %}x)J",
     R"J({})J",
     R"J(  
x)J"},
};

const RenderCase kStatements[] = {
    {R"J({% for i in range(3) %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }},{% endfor %})J",
     R"J({})J",
     R"J(103TrueFalse3,212FalseFalse3,321FalseTrue3,)J"},
    {R"J({% for x in l %}{{ loop.previtem }}-{{ x }}-{{ loop.nextitem }};{% endfor %})J",
     R"J({"l": ["a", "b", "c"]})J",
     R"J(-a-b;a-b-c;b-c-;)J"},
    {R"J({% for x in l if x > 1 %}{{ x }}:{{ loop.length }} {% else %}none{% endfor %})J",
     R"J({"l": [1, 2, 3]})J",
     R"J(2:2 3:2 )J"},
    {R"J({% for x in [] %}{{ x }}{% else %}empty{% endfor %})J",
     R"J({})J",
     R"J(empty)J"},
    {R"J({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %})J",
     R"J({"d": {"b": 1, "a": 2}})J",
     R"J(b=1;a=2;ba)J"},
    {R"J({% for c in 'héy' %}[{{ c }}]{% endfor %})J",
     R"J({})J",
     R"J([h][é][y])J"},
    {R"J({% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %})J",
     R"J({})J",
     R"J(0134)J"},
    {R"J({% for i in range(3) %}{% if i == 0 %}{% set x = 5 %}{% endif %}{{ x }},{% endfor %}|{{ x }})J",
     R"J({})J",
     R"J(5,,,|)J"},
    {R"J({% set x = 1 %}{% for i in range(2) %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }})J",
     R"J({})J",
     R"J(12121)J"},
    {R"J({% set ns = namespace(n=0, items=[]) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }})J",
     R"J({})J",
     R"J(6)J"},
    {R"J({% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (3, 4) %}{{ t }})J",
     R"J({})J",
     R"J(12(3, 4))J"},
    {R"J({% set block %}  inner {{ 1 }}  {% endset %}[{{ block }}]{% set f | trim | upper %}  low  {% endset %}[{{ f }}])J",
     R"J({})J",
     R"J([  inner 1  ][LOW])J"},
    {R"J({% filter upper %}abc {{ 'd' }}{% endfilter %})J",
     R"J({})J",
     R"J(ABC D)J"},
    {R"J({% macro m(a, b=2, c='x') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, 3) }} {{ m(c='z', a=0) }})J",
     R"J({})J",
     R"J(12x 13x 02z)J"},
    {R"J({% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }})J",
     R"J({})J",
     R"J(1(2, 3){'k': 4})J"},
    {R"J({% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}inside{% endcall %})J",
     R"J({})J",
     R"J([inside])J"},
    {R"J({% macro m(x) %}({{ caller(x * 2) }}){% endmacro %}{% call(v) m(21) %}v={{ v }}{% endcall %})J",
     R"J({})J",
     R"J((v=42))J"},
    {R"J({% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }})J",
     R"J({})J",
     R"J(2)J"},
    {R"J({% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }})J",
     R"J({})J",
     R"J(120)J"},
    {R"J({% if a %}A{% elif b %}B{% else %}C{% endif %}{% if not a and not b %}!{% endif %})J",
     R"J({"a": false, "b": true})J",
     R"J(B)J"},
    {R"J({{ loop is defined }}{% for i in [1] %}{% for j in [2, 3] %}{{ loop.index }}{% endfor %}{{ loop.index }}{% endfor %})J",
     R"J({})J",
     R"J(False121)J"},
    {R"J({% generation %}gen{% endgeneration %})J",
     R"J({})J",
     R"J(gen)J"},
};

TEST(JinjaLexer, WhitespaceMatchesJinja2) { expect_renders(kWhitespace); }
TEST(JinjaParser, StatementsMatchJinja2) { expect_renders(kStatements); }

TEST(JinjaLexer, TokensCarryLineAndColumn) {
  auto tokens = lex("ab\n  {{ x + 'y' }}");
  ASSERT_TRUE(tokens.ok());
  ASSERT_GE(tokens->size(), 5u);
  EXPECT_EQ((*tokens)[0].kind, Tok::text);
  EXPECT_EQ((*tokens)[1].kind, Tok::var_begin);
  EXPECT_EQ((*tokens)[1].pos.line, 2u);
  EXPECT_EQ((*tokens)[1].pos.col, 3u);
  EXPECT_EQ((*tokens)[2].text, "x");
  EXPECT_EQ((*tokens)[4].kind, Tok::string);
  EXPECT_EQ((*tokens)[4].text, "y");
}

TEST(JinjaLexer, TagEndInsideBracketsIsNotTheEnd) {
  auto out = render("{{ {'a': {'b': 1}} }}|{{ [[1]] }}");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "{'a': {'b': 1}}|[[1]]");
}

TEST(JinjaParser, SyntaxErrorsNameTheConstructAndPosition) {
  const ErrorCase cases[] = {
      {"{% if x %}open", "line 1:15: unexpected end of template, expected 'endif'"},
      {"{% for x in y %}{% endif %}", "unknown statement 'endif'"},
      {"line\n{{ x + }}", "line 2:8: expected an expression, found '}}'"},
      {"{{ 'unterminated }}", "line 1:4: unterminated string literal"},
      {"{{ x", "line 1:1: unclosed '{{'"},
      {"{# never closed", "line 1:1: missing end of comment tag"},
      {"{% frobnicate %}", "unknown statement 'frobnicate'"},
      {"{{ x ! y }}", "unexpected character '!'"},
      {"{{ (1, 2] }}", "unexpected ']', expected ')'"},
      {"{% break %}", "'break' outside of a loop"},
      {"{{ x | nosuchfilter }}", "no filter named 'nosuchfilter' at line 1:8"},
      {"{{ x is nosuchtest }}", "no test named 'nosuchtest'"},
      {"{{ 99999999999999999999 }}", "integer literal too large"},
      {"{% macro m(a %}{% endmacro %}", "unexpected '}', expected ')'"},
  };
  for (const ErrorCase& b : cases) {
    auto t = Template::compile(b.source);
    ASSERT_FALSE(t.ok()) << b.source;
    EXPECT_EQ(t.status().code(), Code::invalid_argument) << b.source;
    EXPECT_TRUE(contains(t.status(), b.message)) << b.source << " -> " << t.status().message();
  }
}

TEST(JinjaParser, UnsupportedConstructsSaySo) {
  const char* cases[] = {"{% include 'x.jinja' %}", "{% extends 'base' %}", "{% import 'm' as m %}",
                         "{{ x | groupby('a') }}", "{% for x in y recursive %}{% endfor %}", "{{ f(*args) }}"};
  for (const char* src : cases) {
    auto t = Template::compile(src);
    ASSERT_FALSE(t.ok()) << src;
    EXPECT_EQ(t.status().code(), Code::unsupported) << src << " -> " << t.status().message();
    EXPECT_TRUE(contains(t.status(), "unsupported")) << t.status().message();
  }
}

}  // namespace
}  // namespace llmsvc::jinja::testing
