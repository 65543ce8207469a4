// SPDX-License-Identifier: Apache-2.0
// Filters against jinja2's output (with Hugging Face's tojson: json.dumps semantics), and
// JSON conversion.
#include "tests/chat/render_case.h"

namespace llmsvc::jinja::testing {
namespace {

const RenderCase kFilters[] = {
    {R"J({{ '  a b  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ 'Hello World-foo(bar) x' | title }}|{{ 'hELLO' | capitalize }}|{{ 'MiX' | lower }}{{ 'MiX' | upper }})J",
     R"J({})J",
     R"J(a b|a|Hello World-Foo(Bar) X|Hello|mixMIX)J"},
    {R"J({{ [1, 2, 3] | length }} {{ 'héllo' | length }} {{ {'a': 1} | count }} {{ missing | length }})J",
     R"J({})J",
     R"J(3 5 1 0)J"},
    {R"J({{ [3, 1, 2] | first }}{{ [3, 1, 2] | last }}{{ 'abc' | first }}{{ [] | first }}|{{ [1, 2] | join(', ') }}|{{ d | join('-', attribute='n') }})J",
     R"J({"d": [{"n": 1}, {"n": 2}]})J",
     R"J(32a|1, 2|1-2)J"},
    {R"J({{ x | default('d') }} {{ none | default('d') }} {{ '' | default('d', true) }} {{ '' | d('e', boolean=true) }} {{ 0 | default(5) }})J",
     R"J({})J",
     R"J(d None d e 0)J"},
    {R"J({{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 42 | string }} {{ '3.7' | int }} {{ 'x' | int }} {{ 3.9 | int }} {{ '3' | float }} {{ 'x' | float(1.5) }})J",
     R"J({})J",
     R"J(a+b+c bba 42 3 0 3 3.0 1.5)J"},
    {R"J({{ 'abc' | list }} {{ {'a': 1, 'b': 2} | list }} {{ d | items | list }} {{ d | dictsort }})J",
     R"J({"d": {"b": 1, "a": 2}})J",
     R"J(['a', 'b', 'c'] ['a', 'b'] [('b', 1), ('a', 2)] [('a', 2), ('b', 1)])J"},
    {R"J({{ l | map(attribute='n') | list }} {{ [1, 2] | map('string') | list }} {{ [-1, 2] | map('abs') | join(',') }} {{ l | map(attribute='z', default='?') | list }})J",
     R"J({"l": [{"n": 1}, {"n": 2}]})J",
     R"J([1, 2] ['1', '2'] 1,2 ['?', '?'])J"},
    {R"J({{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('divisibleby', 2) | list }} {{ [0, 1, '', 'a'] | select | list }})J",
     R"J({})J",
     R"J([1, 3] [1, 3] [1, 'a'])J"},
    {R"J({{ l | selectattr('role', 'equalto', 'user') | map(attribute='c') | list }} {{ l | rejectattr('role', 'eq', 'user') | list }} {{ l | selectattr('x') | list }})J",
     R"J({"l": [{"role": "user", "c": 1}, {"role": "bot", "c": 2, "x": true, "f": {"g": 1}}]})J",
     R"J([1] [{'role': 'bot', 'c': 2, 'x': True, 'f': {'g': 1}}] [{'role': 'bot', 'c': 2, 'x': True, 'f': {'g': 1}}])J"},
    {R"J({{ ['b', 'A', 'a', 'B'] | unique | list }} {{ ['b', 'A', 'a'] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ l | sort(attribute='n') | map(attribute='n') | list }} {{ [1, 2] | reverse | list }} {{ 'abc' | reverse }})J",
     R"J({"l": [{"n": 2}, {"n": 1}]})J",
     R"J(['b', 'A'] ['A', 'a', 'b'] [3, 2, 1] [1, 2] [2, 1] cba)J"},
    {R"J({{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}|{{ 'a\n\nb' | indent(2, blank=true) }}|{{ 'x\ny' | indent('> ') }})J",
     R"J({})J",
     R"J(a
  b

  c|  a
  b|a
  
  b|x
> y)J"},
    {R"J({{ -3 | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.567 | round(2) }} {{ 5 | round }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(method='floor') }})J",
     R"J({})J",
     R"J(3 2.0 4.0 2.57 5 3.0 2.0)J"},
    {R"J({{ 'one two  three' | wordcount }} {{ [1, 2, 3] | sum }} {{ l | sum(attribute='n') }} {{ 'x' | center(5) }}| {{ '<a href="x">&</a>' | e }})J",
     R"J({"l": [{"n": 2}, {"n": 1}]})J",
     R"J(3 6 3   x  | &lt;a href=&#34;x&#34;&gt;&amp;&lt;/a&gt;)J"},
    {R"J({{ x | tojson }})J",
     R"J({"x": {"a": [1, 2.0, null, true, "é\"\\\n"], "b": {}, "c": [], "d": 1.5e-07}})J",
     R"J({"a": [1, 2.0, null, true, "é\"\\\n"], "b": {}, "c": [], "d": 1.5e-07})J"},
    {R"J({{ x | tojson(indent=2) }})J",
     R"J({"x": {"a": [1, {"b": null}], "c": [], "d": {}}})J",
     R"J({
  "a": [
    1,
    {
      "b": null
    }
  ],
  "c": [],
  "d": {}
})J"},
    {R"J({{ x | tojson(sort_keys=true, separators=(',', ':')) }} {{ x | tojson(ensure_ascii=true) }})J",
     R"J({"x": {"z": "ü🦙", "a": 1}})J",
     R"J({"a":1,"z":"ü🦙"} {"z": "\u00fc\ud83e\udd99", "a": 1})J"},
    {R"J({{ 'safe' | safe + '<b>' }} {{ '<i>' + 'x' | safe }} {{ 'plain' ~ ('<p>' | safe) }})J",
     R"J({})J",
     R"J(safe&lt;b&gt; &lt;i&gt;x plain<p>)J"},
};

TEST(JinjaFilters, MatchJinja2) { expect_renders(kFilters); }

TEST(JinjaJson, KeepsKeyOrderAndRoundTrips) {
  auto v = parse_json(R"({"z": 1, "a": [true, null, 2.5, "s"], "m": {}})");
  ASSERT_TRUE(v.ok());
  auto s = to_json(*v, JsonStyle{});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, R"({"z": 1, "a": [true, null, 2.5, "s"], "m": {}})");
  JsonStyle pretty;
  pretty.indent = "    ";
  pretty.item_separator = ",";
  pretty.sort_keys = true;
  auto p = to_json(*v, pretty);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, "{\n    \"a\": [\n        true,\n        null,\n        2.5,\n        \"s\"\n    ],\n    \"m\": {},\n    \"z\": 1\n}");
}

TEST(JinjaJson, RejectsBadInput) {
  EXPECT_FALSE(parse_json("{not json").ok());
  std::string deep(200, '[');
  deep += std::string(200, ']');
  auto d = parse_json(deep, 128);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(contains(d.status(), "nested deeper"));
}

}  // namespace
}  // namespace llmsvc::jinja::testing
