// SPDX-License-Identifier: Apache-2.0
// Expressions, tests and methods with Python's semantics (operators, truthiness, printing
// of None / True / floats / containers, slices, undefined), against jinja2's output; and
// the runtime errors jinja2 raises.
#include "tests/chat/render_case.h"

namespace llmsvc::jinja::testing {
namespace {

const RenderCase kExpressions[] = {
    {R"J({{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 4 / 2 }})J",
     R"J({})J",
     R"J(7 9 64 4 3 -4 2 3.5 2.0)J"},
    {R"J({{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1.5 }} {{ 3.0 }} {{ 1_000 }} {{ 0.1 + 0.2 }})J",
     R"J({})J",
     R"J(1e+16 1000000000000000.0 0.0001 1e-05 1.5 3.0 1000 0.30000000000000004)J"},
    {R"J({{ 'a' ~ 1 ~ none ~ true ~ missing }}|{{ 'ab' * 3 }}|{{ [1] + [2, 3] }}|{{ 'x' + 'y' }})J",
     R"J({})J",
     R"J(a1NoneTrue|ababab|[1, 2, 3]|xy)J"},
    {R"J({{ true and 'yes' }} {{ 0 or 'fallback' }} {{ not none }} {{ '' or [] }})J",
     R"J({})J",
     R"J(yes fallback True [])J"},
    {R"J({{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ true == 1 }})J",
     R"J({})J",
     R"J(True False True True True True)J"},
    {R"J({{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 'x' in missing }})J",
     R"J({})J",
     R"J(True True True True False)J"},
    {R"J({{ 'yes' if x else 'no' }} {{ 'a' if false }}|{{ x if x is defined else 'undef' }})J",
     R"J({"x": 0})J",
     R"J(no |0)J"},
    {R"J({{ [1, 'a', none, true, 1.5, {'k': 'v'}, "it's"] }} {{ (1, 2) }} {{ (1,) }} {{ () }})J",
     R"J({})J",
     R"J([1, 'a', None, True, 1.5, {'k': 'v'}, "it's"] (1, 2) (1,) ())J"},
    {R"J({{ d.a }} {{ d['b'] }} {{ d.missing }}|{{ l[0] }} {{ l[-1] }} {{ l[5] }}|{{ s[1] }} {{ s[-1] }})J",
     R"J({"d": {"a": 1, "b": 2}, "l": [1, 2, 3], "s": "héllo"})J",
     R"J(1 2 |1 3 |é o)J"},
    {R"J({{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ s[1:3] }} {{ s[::-1] }} {{ l[5:] }})J",
     R"J({"l": [1, 2, 3, 4], "s": "héllo"})J",
     R"J([2, 3, 4] [1, 2, 3] [4, 3, 2, 1] [1, 3] él olléh [])J"},
    {R"J({{ none }} {{ true }} {{ false }} {{ True }} {{ None }} {{ missing }}|)J",
     R"J({})J",
     R"J(None True False True None |)J"},
    {R"J({{ 'tab\there' }} {{ "q\"uote" }} {{ 'u\u00e9' }} {{ 'x\x41' }} {{ 'keep\d' }} {{ 'a' 'b' }})J",
     R"J({})J",
     R"J(tab	here q"uote ué xA keep\d ab)J"},
    {R"J({{ {'a': 1, 'b': [1, 2]} }} {{ {'a': 1}.items() | list }} {{ d.get('a') }} {{ d.get('z', 'dflt') }} {{ d.get('z') }})J",
     R"J({"d": {"a": 1}})J",
     R"J({'a': 1, 'b': [1, 2]} [('a', 1)] 1 dflt None)J"},
    {R"J({{ d['items'] }})J",
     R"J({"d": {"items": "key"}})J",
     R"J(key)J"},
    {R"J({{ -x }} {{ +x }} {{ -(1.5) }} {{ x.0 }})J",
     R"J({"x": 3})J",
     R"J(-3 3 -1.5 )J"},
};

const RenderCase kTests[] = {
    {R"J({{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 1.0 is float }}{{ 1 is integer }})J",
     R"J({"x": 1})J",
     R"J(TrueTrueTrueTrueTrueFalseTrueTrue)J"},
    {R"J({{ 's' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ missing is iterable }}{{ none is iterable }}{{ 's' is sequence }}{{ namespace() is mapping }})J",
     R"J({})J",
     R"J(TrueTrueTrueTrueFalseTrueFalse)J"},
    {R"J({{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 'a' is equalto 'a' }}{{ 2 is eq 2 }}{{ 1 is lt 2 }}{{ 2 is ge 3 }})J",
     R"J({})J",
     R"J(TrueTrueTrueFalseTrueTrueTrueFalse)J"},
    {R"J({{ true is true }}{{ 1 is true }}{{ false is false }}{{ true is boolean }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 1 is in [1, 2] }})J",
     R"J({})J",
     R"J(TrueFalseTrueTrueTrueTrueTrue)J"},
    {R"J({{ x is not none }}{{ x is not defined }}{{ not x is defined }})J",
     R"J({"x": null})J",
     R"J(FalseFalseFalse)J"},
    {R"J({{ range is callable }}{{ 'upper' is filter }}{{ 'odd' is test }}{{ 'nope' is filter }})J",
     R"J({})J",
     R"J(TrueTrueTrueFalse)J"},
};

const RenderCase kMethods[] = {
    {R"J({{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  x '.lstrip() }}|{{ ' x  '.rstrip() }}|{{ 'ab'.startswith('a') }}{{ 'ab'.endswith(('x', 'b')) }})J",
     R"J({})J",
     R"J(x|a|x | x|TrueTrue)J"},
    {R"J({{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'a\nb\r\nc'.splitlines() }})J",
     R"J({})J",
     R"J(['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b,c'] ['a,b', 'c'] ['a', 'b', 'c'])J"},
    {R"J({{ 'hello world'.title() }} {{ 'hELLo'.capitalize() }} {{ 'aXb'.upper() }}{{ 'aXb'.lower() }} {{ 'aaa'.replace('a', 'b') }} {{ 'abcabc'.find('c') }} {{ 'abcabc'.rfind('c') }} {{ 'abcabc'.count('bc') }})J",
     R"J({})J",
     R"J(Hello World Hello AXBaxb bbb 2 5 2)J"},
    {R"J({{ ', '.join(['a', 'b']) }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ '   '.isspace() }} {{ d.keys() | list }} {{ d.values() | list }} {{ [1, 2, 1].count(1) }} {{ [1, 2].index(2) }})J",
     R"J({"d": {"a": 1, "b": 2}})J",
     R"J(a, b True True True ['a', 'b'] [1, 2] 2 1)J"},
};

TEST(JinjaExpressions, MatchJinja2) { expect_renders(kExpressions); }
TEST(JinjaTests, MatchJinja2) { expect_renders(kTests); }
TEST(JinjaMethods, MatchJinja2) { expect_renders(kMethods); }

TEST(JinjaExpressions, RuntimeErrorsAsJinja2RaisesThem) {
  const ErrorCase cases[] = {
      {"{{ missing.attr }}", "'missing' is undefined"},
      {"{{ d.a.b }}", "'dict object' has no attribute 'a'"},
      {"{{ 1 + none }}", "unsupported operand type(s) for +: 'int' and 'NoneType'"},
      {"{{ 'a' + 1 }}", "can only concatenate str (not \"int\") to str"},
      {"{% for x in none %}{% endfor %}", "'NoneType' object is not iterable"},
      {"\n  {{ raise_exception('custom message') }}", "raise_exception at line 2:21: custom message"},
      {"{{ 1 / 0 }}", "division by zero"},
      {"{{ [1, 2] | select('odd') | length }}", "object of type 'generator' has no len()"},
      {"{{ missing | tojson }}", "'missing' is undefined"},
      {"{{ [1] | map('string') | tojson }}", "Object of type generator is not JSON serializable"},
      {"{{ 1 < 'a' }}", "'<' not supported between instances of 'int' and 'str'"},
      {"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "macro 'm' takes not more than 1 argument(s)"},
      {"{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", "macro 'm' takes no keyword argument 'b'"},
      {"{{ 'x' in 1 }}", "argument of type 'int' is not iterable"},
      {"{{ [1, 2].append(3) }}", "UndefinedError"},
      {"{% set x = 1 %}{% set x.a = 2 %}", "cannot assign attribute on non-namespace object"},
      {"{{ 9223372036854775807 + 1 }}", "integer overflow"},
      {"{% set a, b = [1] %}", "not enough values to unpack"},
  };
  for (const ErrorCase& b : cases) {
    const Status st = render_error(b.source, R"({"d": {}})");
    EXPECT_TRUE(contains(st, b.message)) << b.source << " -> " << st.message();
  }
}

TEST(JinjaExpressions, ContextValuesFromJson) {
  auto out = render("{{ m[0].role }} {{ m[0].content | length }} {{ n }} {{ f }} {{ b }} {{ z }}",
                    R"({"m": [{"role": "user", "content": "héllo"}], "n": 12345678901, "f": 0.5, "b": false, "z": null})");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "user 5 12345678901 0.5 False None");
}

TEST(JinjaExpressions, StrftimeNowUsesTheGivenTime) {
  auto tmpl = Template::compile("{{ strftime_now('%d %b %Y') }}");
  ASSERT_TRUE(tmpl.ok());
  RenderOptions opt;
  opt.now = std::tm{};
  opt.now->tm_year = 124;
  opt.now->tm_mon = 6;
  opt.now->tm_mday = 26;
  auto out = tmpl->render(Value::dict(), opt);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "26 Jul 2024");
}

}  // namespace
}  // namespace llmsvc::jinja::testing
