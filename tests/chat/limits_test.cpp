// SPDX-License-Identifier: Apache-2.0
// Bounds on untrusted templates: each limit fails with an error naming it (no crash, no
// hang, no unbounded memory), and the chat entry point's argument checks.
#include "tests/chat/render_case.h"

#include "runtime/core/chat/jinja/chat.h"

namespace llmsvc::jinja::testing {
namespace {

TEST(JinjaLimits, TemplateSize) {
  Limits l;
  l.max_template_bytes = 100;
  auto t = Template::compile(std::string(101, 'x'), l);
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(contains(t.status(), "exceeds the limit"));
}

TEST(JinjaLimits, ParserNesting) {
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  auto t = Template::compile(deep);
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(contains(t.status(), "nesting deeper than"));
  std::string blocks;
  for (int i = 0; i < 500; ++i) blocks += "{% if true %}";
  EXPECT_TRUE(contains(Template::compile(blocks).status(), "nesting deeper than"));
  EXPECT_TRUE(contains(Template::compile("{{ " + std::string(5000, '-') + "1 }}").status(), "nesting deeper than"));
  EXPECT_TRUE(contains(Template::compile("{{ " + std::string(3000, '[') + std::string(3000, ']') + " }}").status(), "nesting deeper than"));
}

TEST(JinjaLimits, OutputSize) {
  Limits l;
  l.max_output_bytes = 1000;
  EXPECT_TRUE(contains(render_error("{% for i in range(100) %}0123456789x{% endfor %}", "{}", l), "output exceeds"));
  EXPECT_TRUE(contains(render_error("{{ 'ab' * 100000000000 }}", "{}", l), "output limit"));
  EXPECT_TRUE(contains(render_error("{% set ns = namespace(s='x') %}{% for i in range(20) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                                    "{}", l),
                       "exceeds the output limit"));
}

TEST(JinjaLimits, LoopIterationsAndListSizes) {
  Limits l;
  l.max_loop_iterations = 1000;
  EXPECT_TRUE(contains(render_error("{% for i in range(30) %}{% for j in range(40) %}{% endfor %}{% endfor %}", "{}", l),
                       "loop iterations exceed"));
  EXPECT_TRUE(contains(render_error("{{ range(100000000000) | length }}"), "exceeds the list size limit"));
  EXPECT_TRUE(contains(render_error("{{ ([1] * 100000000000) | length }}"), "list"));
}

TEST(JinjaLimits, MacroRecursion) {
  const Status st = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_TRUE(contains(st, "macro calls nested deeper than 64")) << st.message();
}

TEST(JinjaLimits, WorkBudget) {
  Limits l;
  l.max_work = 1u << 20;
  const Status st = render_error("{% for i in range(100000) %}{% set x = 'abcdefgh' * 100 %}{% endfor %}", "{}", l);
  EXPECT_TRUE(contains(st, "work limit")) << st.message();
}

TEST(JinjaLimits, ValueNesting) {
  const Status st = render_error(
      "{% set ns = namespace(v=[]) %}{% for i in range(500) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v | length }}");
  EXPECT_TRUE(contains(st, "nested deeper")) << st.message();
}

TEST(JinjaLimits, NamespaceHoldingItselfIsFreed) {
  // A cycle through a namespace: printing stops at a depth, and the render frees it (ASan's
  // leak check would report it otherwise).
  auto out = render("{% set ns = namespace() %}{% set ns.self = ns %}{{ (ns | string)[:30] }}");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "<Namespace {'self': <Namespace");
}

TEST(JinjaChat, RendersAConversation) {
  ChatInput in;
  in.messages_json = R"([{"role": "user", "content": "Hi"}])";
  in.bos_token = "<s>";
  in.extra_json = R"({"flag": true})";
  auto out = render_chat(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
      "{% if add_generation_prompt %}[assistant]{% endif %}{{ tools is none }}{{ flag }}",
      in);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "<s>[user]Hi[assistant]TrueTrue");
}

TEST(JinjaChat, RejectsBadArguments) {
  ChatInput in;
  in.messages_json = "{}";
  EXPECT_TRUE(contains(render_chat("x", in).status(), "messages must be a JSON array"));
  in.messages_json = "[";
  EXPECT_TRUE(contains(render_chat("x", in).status(), "invalid JSON"));
  in.messages_json = "[]";
  in.extra_json = "[1]";
  EXPECT_TRUE(contains(render_chat("x", in).status(), "extra variables must be a JSON object"));
  in.extra_json = "";
  EXPECT_TRUE(contains(render_chat("{% if %}", in).status(), "syntax error"));
}

}  // namespace
}  // namespace llmsvc::jinja::testing
