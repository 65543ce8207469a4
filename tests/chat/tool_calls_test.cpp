// SPDX-License-Identifier: Apache-2.0
// Tool-call parsers: per syntax, replies with one call, several, text around them, nested /
// non-ASCII / escaped arguments, truncated and invalid ones; the bounds; the syntax detected
// for every template of tests/data/chat_templates that mentions tools; and calls rendered
// back through the templates (byte for byte against jinja2's renders, and round trips).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "runtime/core/chat/jinja/chat.h"
#include "runtime/core/chat/tool_calls.h"
#include "tests/chat/template_data.h"

namespace llmsvc::chat {
namespace {

namespace fs = std::filesystem;
using F = ToolCallFormat;
using Json = nlohmann::ordered_json;
using jinja::testing::read_file;

const fs::path& kData = jinja::testing::kChatData;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

ToolCall call(std::string id, std::string name, std::string args) { return {std::move(id), std::move(name), std::move(args)}; }

// ---- Parsing, per syntax --------------------------------------------------------------

struct ParseCase {
  std::string label;
  F format;
  std::string output;
  std::string content;          // expected content (ignored when failed: the whole output)
  std::vector<ToolCall> calls;  // expected calls
  std::string error;            // non-empty: parse_failed, with this in the error
};

void PrintTo(const ParseCase& c, std::ostream* os) { *os << c.label; }

// Arguments with nesting, non-ASCII text and escapes, as a model writes them and compact.
constexpr std::string_view kRichArgs =
    R"({"text": "caf\u00e9 \"q\" \\ \n \t \ud83d\ude00 東京", "meta": {"tags": ["a", {"b": [1, 2.5, null, true, -3e2]}], "empty": {}}})";
constexpr std::string_view kRichCompact =
    "{\"text\":\"caf\xC3\xA9 \\\"q\\\" \\\\ \\n \\t \xF0\x9F\x98\x80 \xE6\x9D\xB1\xE4\xBA\xAC\",\"meta\":{\"tags\":[\"a\",{\"b\":[1,2.5,null,true,-300.0]}],\"empty\":{}}}";

std::vector<ParseCase> parse_cases() {
  const std::string rich(kRichArgs), rich_c(kRichCompact);
  const ToolCall paris = call("call_0", "get_weather", R"({"city":"Paris"})");
  const ToolCall tokyo = call("call_1", "get_weather", R"({"city":"Tokyo","unit":"celsius"})");
  const std::string ds_call = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>";
  return {
      // none: tool syntax is text.
      {"none_keeps_text", F::none, R"(<tool_call>{"name": "x"}</tool_call>)", R"(<tool_call>{"name": "x"}</tool_call>)", {}, ""},

      // Hermes / Qwen.
      {"hermes_one", F::hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "", {paris}, ""},
      {"hermes_several_text_before", F::hermes,
       "Let me check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\", \"unit\": \"celsius\"}}\n</tool_call>",
       "Let me check both.", {paris, tokyo}, ""},
      {"hermes_think_before", F::hermes,
       "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
       "<think>\nThe user wants weather.\n</think>", {paris}, ""},
      {"hermes_rich_arguments", F::hermes, "<tool_call>\n{\"name\": \"note\", \"arguments\": " + rich + "}\n</tool_call>", "",
       {call("call_0", "note", rich_c)}, ""},
      {"hermes_arguments_as_string", F::hermes, R"(<tool_call>{"name": "f", "arguments": "{\"a\": [1, 2]}"}</tool_call>)", "",
       {call("call_0", "f", R"({"a":[1,2]})")}, ""},
      {"hermes_no_arguments_and_id", F::hermes, R"(<tool_call>{"name": "now", "id": "c7"}</tool_call> done)", "done",
       {call("c7", "now", "{}")}, ""},
      {"hermes_unclosed_at_end", F::hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", "", {paris}, ""},
      {"hermes_text_only", F::hermes, "  No tools needed.\n", "  No tools needed.\n", {}, ""},
      {"hermes_truncated", F::hermes, "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par", "", {}, "truncated"},
      {"hermes_invalid_json", F::hermes, "<tool_call>\n{\"name\": get_weather}\n</tool_call>", "", {}, "invalid JSON"},
      {"hermes_no_name", F::hermes, R"(<tool_call>{"arguments": {}}</tool_call>)", "", {}, "name"},
      {"hermes_arguments_not_object", F::hermes, R"(<tool_call>{"name": "f", "arguments": [1]}</tool_call>)", "", {}, "not a JSON object"},
      {"hermes_bad_close", F::hermes, R"(<tool_call>{"name": "f", "arguments": {}} junk)", "", {}, "</tool_call>"},

      // Llama 3.x.
      {"llama3_one", F::llama3, R"({"name": "get_weather", "parameters": {"city": "Paris"}})", "", {paris}, ""},
      {"llama3_typed_after_python_tag", F::llama3, R"(<|python_tag|>{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}})",
       "", {paris}, ""},
      {"llama3_several", F::llama3,
       R"({"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_weather", "parameters": {"city": "Tokyo", "unit": "celsius"}})",
       "", {paris, tokyo}, ""},
      {"llama3_builtin_text_before", F::llama3, R"(Searching.<|python_tag|>brave_search.call(query="llama facts", count=3))", "Searching.",
       {call("call_0", "brave_search", R"({"query":"llama facts","count":3})")}, ""},
      {"llama3_code", F::llama3, "<|python_tag|>print(6 * 7)", "", {call("call_0", "python", R"j({"code":"print(6 * 7)"})j")}, ""},
      {"llama3_code_invalid_utf8", F::llama3, "<|python_tag|>print('\xff')", "",
       {call("call_0", "python", "{\"code\":\"print('\xEF\xBF\xBD')\"}")}, ""},
      {"llama3_rich_arguments", F::llama3, "\n {\"name\": \"note\", \"parameters\": " + rich + "}", "", {call("call_0", "note", rich_c)}, ""},
      {"llama3_json_answer_is_text", F::llama3, R"({"answer": 42})", R"({"answer": 42})", {}, ""},
      {"llama3_text", F::llama3, "Paris is sunny.", "Paris is sunny.", {}, ""},
      {"llama3_truncated", F::llama3, R"({"name": "get_weather", "parameters": {"city": )", "", {}, "truncated"},
      {"llama3_truncated_in_key", F::llama3, R"({"na)", "", {}, "truncated"},
      {"llama3_invalid", F::llama3, R"({"name": "x", "parameters": {]})", "", {}, "JSON"},
      {"llama3_builtin_truncated", F::llama3, R"(<|python_tag|>brave_search.call(query="lla)", "", {}, "truncated"},

      // Mistral.
      {"mistral_one_with_id", F::mistral, R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc123XYZ"}])", "",
       {call("abc123XYZ", "get_weather", R"({"city":"Paris"})")}, ""},
      {"mistral_several_text_before", F::mistral,
       R"(Checking. [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_weather", "arguments": {"city": "Tokyo", "unit": "celsius"}}])",
       "Checking.", {paris, tokyo}, ""},
      {"mistral_args_syntax", F::mistral,
       R"([TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_weather[ARGS]{"city": "Tokyo", "unit": "celsius"})", "",
       {paris, tokyo}, ""},
      {"mistral_call_id_syntax", F::mistral, R"([TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city": "Paris"})", "",
       {call("a1b2c3d4e", "get_weather", R"({"city":"Paris"})")}, ""},
      {"mistral_rich_arguments", F::mistral, "[TOOL_CALLS]note[ARGS]" + rich, "", {call("call_0", "note", rich_c)}, ""},
      {"mistral_truncated", F::mistral, R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"ci)", "", {}, "truncated"},
      {"mistral_truncated_name", F::mistral, "[TOOL_CALLS]get_wea", "", {}, "truncated"},
      {"mistral_truncated_marker", F::mistral, "[TOOL_CALLS]", "", {}, "truncated"},
      {"mistral_bad_name", F::mistral, "[TOOL_CALLS]get weather[ARGS]{}", "", {}, "name"},
      {"mistral_missing_args", F::mistral, R"([TOOL_CALLS]get_weather[XX]{})", "", {}, "[ARGS]"},

      // Functionary v3.1.
      {"functionary31_one", F::functionary_v3_1, R"(<function=get_weather>{"city": "Paris"}</function>)", "", {paris}, ""},
      {"functionary31_several_text", F::functionary_v3_1,
       R"(Checking.<function=get_weather>{"city": "Paris"}</function><function=get_weather>{"city": "Tokyo", "unit": "celsius"}</function>)",
       "Checking.", {paris, tokyo}, ""},
      {"functionary31_python", F::functionary_v3_1, "<|python_tag|>import math\nprint(math.pi)", "",
       {call("call_0", "python", R"j({"code":"import math\nprint(math.pi)"})j")}, ""},
      {"functionary31_rich", F::functionary_v3_1, "<function=note>" + rich + "</function>", "", {call("call_0", "note", rich_c)}, ""},
      {"functionary31_truncated", F::functionary_v3_1, R"(<function=get_weather>{"city": "Pa)", "", {}, "truncated"},
      {"functionary31_truncated_name", F::functionary_v3_1, "<function=get_wea", "", {}, "truncated"},
      {"functionary31_invalid", F::functionary_v3_1, R"(<function=get_weather>{"city" "Paris"}</function>)", "", {}, "invalid JSON"},

      // Functionary v3.2 (the reply follows the prompt's ">>>").
      {"functionary32_one", F::functionary_v3_2, "get_weather\n{\"city\": \"Paris\"}", "", {paris}, ""},
      {"functionary32_several_text", F::functionary_v3_2,
       "all\nLet me check.>>>get_weather\n{\"city\": \"Paris\"}>>>get_weather\n{\"city\": \"Tokyo\", \"unit\": \"celsius\"}",
       "Let me check.", {paris, tokyo}, ""},
      {"functionary32_text_only", F::functionary_v3_2, "all\nHello there!", "Hello there!", {}, ""},
      {"functionary32_python", F::functionary_v3_2, "python\nprint(1)", "", {call("call_0", "python", R"j({"code":"print(1)"})j")}, ""},
      {"functionary32_rich", F::functionary_v3_2, "note\n" + rich, "", {call("call_0", "note", rich_c)}, ""},
      {"functionary32_truncated", F::functionary_v3_2, "get_weather\n{\"city\": \"Pa", "", {}, "truncated"},
      {"functionary32_truncated_recipient", F::functionary_v3_2, "all\nOne moment.>>>get_wea", "", {}, "truncated"},
      {"functionary32_invalid", F::functionary_v3_2, "get_weather\n{\"city\": Paris}", "", {}, "invalid JSON"},

      // Firefunction v2.
      {"firefunction_one", F::firefunction_v2, R"( functools[{"name": "get_weather", "arguments": {"city": "Paris"}}])", "", {paris}, ""},
      {"firefunction_several_text", F::firefunction_v2,
       R"(On it. functools[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_weather", "arguments": {"city": "Tokyo", "unit": "celsius"}}])",
       "On it.", {paris, tokyo}, ""},
      {"firefunction_truncated", F::firefunction_v2, R"( functools[{"name": "get_weather", "argu)", "", {}, "truncated"},

      // Command R+.
      {"command_r_one", F::command_r,
       "Action:\n```json\n[\n    {\n        \"tool_name\": \"get_weather\",\n        \"parameters\": {\n            \"city\": \"Paris\"\n        }\n    }\n]```",
       "", {paris}, ""},
      {"command_r_several_text", F::command_r,
       "I will look both up.\nAction: ```json\n[{\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}, "
       "{\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Tokyo\", \"unit\": \"celsius\"}}]\n```",
       "I will look both up.", {paris, tokyo}, ""},
      {"command_r_rich", F::command_r, "Action: ```json\n[{\"tool_name\": \"note\", \"parameters\": " + rich + "}]```", "",
       {call("call_0", "note", rich_c)}, ""},
      {"command_r_truncated", F::command_r, "Action:\n```json\n[\n    {\n        \"tool_name\": \"get_weather\",", "", {}, "truncated"},
      {"command_r_invalid", F::command_r, "Action:\n```json\n[{\"tool_name\": \"x\", \"parameters\": {}},]```", "", {}, "invalid JSON"},

      // Command R7B.
      {"command_r7b_two_with_plan", F::command_r7b,
       "<|START_THINKING|>I will look up the weather.<|END_THINKING|><|START_ACTION|>[\n"
       "    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}},\n"
       "    {\"tool_call_id\": \"1\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Tokyo\", \"unit\": \"celsius\"}}\n"
       "]<|END_ACTION|>",
       "<|START_THINKING|>I will look up the weather.<|END_THINKING|>",
       {call("0", "get_weather", R"({"city":"Paris"})"), call("1", "get_weather", R"({"city":"Tokyo","unit":"celsius"})")}, ""},
      {"command_r7b_truncated", F::command_r7b, R"(<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {)", "", {}, "truncated"},
      {"command_r7b_no_name", F::command_r7b, R"(<|START_ACTION|>[{"tool_call_id": "0", "parameters": {}}]<|END_ACTION|>)", "", {}, "name"},
      {"command_r7b_response", F::command_r7b, "<|START_RESPONSE|>Hi!<|END_RESPONSE|>", "<|START_RESPONSE|>Hi!<|END_RESPONSE|>", {}, ""},

      // Granite.
      {"granite_one", F::granite, R"(<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}])", "", {paris}, ""},
      {"granite_several_text", F::granite,
       R"(Sure.<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_weather", "arguments": {"city": "Tokyo", "unit": "celsius"}}])",
       "Sure.", {paris, tokyo}, ""},
      {"granite_truncated", F::granite, R"(<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}})", "", {}, "truncated"},
      {"granite_not_a_list", F::granite, R"(<|tool_call|>"get_weather")", "", {}, "not a JSON array"},

      // DeepSeek R1.
      {"deepseek_one", F::deepseek_r1,
       "<｜tool▁calls▁begin｜>" + ds_call + "get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "",
       {paris}, ""},
      {"deepseek_several_think", F::deepseek_r1,
       "<think>\nTwo cities.\n</think>\n\n<｜tool▁calls▁begin｜>" + ds_call + "get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n" +
           ds_call + "get_weather\n```json\n{\"city\": \"Tokyo\", \"unit\": \"celsius\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "<think>\nTwo cities.\n</think>", {paris, tokyo}, ""},
      {"deepseek_rich", F::deepseek_r1, "<｜tool▁calls▁begin｜>" + ds_call + "note\n```json\n" + rich + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "", {call("call_0", "note", rich_c)}, ""},
      {"deepseek_truncated", F::deepseek_r1, "<｜tool▁calls▁begin｜>" + ds_call + "get_weather\n```json\n{\"city\": \"Pa", "", {}, "truncated"},
      {"deepseek_no_fence", F::deepseek_r1, "<｜tool▁calls▁begin｜>" + ds_call + "get_weather\n{\"city\": \"Paris\"}", "", {}, "```json"},
      {"deepseek_garbage_in_section", F::deepseek_r1, "<｜tool▁calls▁begin｜>hello", "", {}, "expected"},

      // Kimi K2.
      {"kimi_two", F::kimi_k2,
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>"
       "<|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{\"city\": \"Tokyo\", \"unit\": \"celsius\"}<|tool_call_end|>"
       "<|tool_calls_section_end|>",
       "", {call("functions.get_weather:0", "get_weather", R"({"city":"Paris"})"), call("functions.get_weather:1", "get_weather", R"({"city":"Tokyo","unit":"celsius"})")}, ""},
      {"kimi_truncated", F::kimi_k2, "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"ci", "",
       {}, "truncated"},
  };
}

class ToolCallParse : public ::testing::TestWithParam<ParseCase> {};

TEST_P(ToolCallParse, Parses) {
  const ParseCase& c = GetParam();
  const ParsedReply r = parse_tool_calls(c.format, c.output);
  if (!c.error.empty()) {
    EXPECT_TRUE(r.parse_failed);
    EXPECT_EQ(r.content, c.output);  // the whole reply comes back as text
    EXPECT_TRUE(r.calls.empty());
    EXPECT_NE(r.error.find(c.error), std::string::npos) << r.error;
    return;
  }
  EXPECT_FALSE(r.parse_failed) << r.error;
  EXPECT_EQ(r.content, c.content);
  ASSERT_EQ(r.calls.size(), c.calls.size());
  for (size_t i = 0; i < c.calls.size(); ++i) {
    EXPECT_EQ(r.calls[i].id, c.calls[i].id) << i;
    EXPECT_EQ(r.calls[i].name, c.calls[i].name) << i;
    EXPECT_EQ(r.calls[i].arguments_json, c.calls[i].arguments_json) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, ToolCallParse, ::testing::ValuesIn(parse_cases()),
                         [](const ::testing::TestParamInfo<ParseCase>& info) { return info.param.label; });

// Every syntax has parse cases: one call, several, and a truncated one.
TEST(ToolCalls, EveryFormatHasCases) {
  std::map<F, int> ok, several, failed;
  for (const ParseCase& c : parse_cases()) {
    if (!c.error.empty()) ++failed[c.format];
    else if (c.calls.size() == 1) ++ok[c.format];
    else if (c.calls.size() > 1) ++several[c.format];
  }
  for (F f : {F::hermes, F::llama3, F::mistral, F::functionary_v3_1, F::functionary_v3_2, F::firefunction_v2, F::command_r,
              F::command_r7b, F::granite, F::deepseek_r1, F::kimi_k2}) {
    SCOPED_TRACE(std::string(tool_call_format_name(f)));
    EXPECT_GT(ok[f] + several[f], 0);
    EXPECT_GT(failed[f], 0);
  }
}

// ---- Bounds and hostile input --------------------------------------------------------

std::string hermes_calls(size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += "<tool_call>{\"name\": \"f\", \"arguments\": {\"i\": " + std::to_string(i) + "}}</tool_call>";
  return out;
}

TEST(ToolCalls, CallsAreCapped) {
  const ParsedReply at_cap = parse_tool_calls(F::hermes, hermes_calls(kMaxToolCalls));
  EXPECT_FALSE(at_cap.parse_failed) << at_cap.error;
  EXPECT_EQ(at_cap.calls.size(), kMaxToolCalls);
  EXPECT_EQ(at_cap.calls.back().id, "call_" + std::to_string(kMaxToolCalls - 1));
  const ParsedReply over = parse_tool_calls(F::hermes, hermes_calls(kMaxToolCalls + 1));
  EXPECT_TRUE(over.parse_failed);
  EXPECT_NE(over.error.find("more than 64"), std::string::npos) << over.error;
  EXPECT_TRUE(over.calls.empty());
}

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(ToolCalls, NestingIsBounded) {
  // The call object is one level: arguments may nest kMaxToolCallJsonDepth - 2 more.
  const auto with = [](size_t depth) {
    return "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " + nested(depth) + "}}</tool_call>";
  };
  const ParsedReply ok = parse_tool_calls(F::hermes, with(kMaxToolCallJsonDepth - 2));
  EXPECT_FALSE(ok.parse_failed) << ok.error;
  const ParsedReply deep = parse_tool_calls(F::hermes, with(kMaxToolCallJsonDepth - 1));
  EXPECT_TRUE(deep.parse_failed);
  EXPECT_NE(deep.error.find("nested deeper than 64"), std::string::npos) << deep.error;
  // Far deeper, and in arguments given as a string: refused the same way, no stack growth.
  const ParsedReply huge = parse_tool_calls(F::llama3, "{\"name\": \"f\", \"parameters\": " + nested(100000) + "}");
  EXPECT_TRUE(huge.parse_failed);
  const ParsedReply quoted =
      parse_tool_calls(F::hermes, "<tool_call>{\"name\": \"f\", \"arguments\": \"" + nested(100000) + "\"}</tool_call>");
  EXPECT_TRUE(quoted.parse_failed);
  EXPECT_NE(quoted.error.find("nested deeper"), std::string::npos) << quoted.error;
}

TEST(ToolCalls, InvalidUtf8IsAnErrorNotAThrow) {
  const ParsedReply r = parse_tool_calls(F::hermes, "<tool_call>{\"name\": \"f\xff\", \"arguments\": {}}</tool_call>");
  EXPECT_TRUE(r.parse_failed);
  EXPECT_NE(r.error.find("invalid JSON"), std::string::npos) << r.error;
}

// Random bytes around the syntaxes' markers: every reply parses or fails, nothing throws,
// and a failed reply is returned whole.
TEST(ToolCalls, RandomRepliesNeverThrow) {
  const std::vector<std::string> pieces = {"<tool_call>", "</tool_call>", "{", "}", "[", "]", "\"", "\\", "\"name\": ",
                                           "\"arguments\": ", ":", ",", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<function=",
                                           ">", "</function>", ">>>", "\n", "all", "f", "<|python_tag|>", ".call(", ")", "=",
                                           "Action:", "```", "json", "<|tool_call|>", "<|START_ACTION|>", " functools",
                                           "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<|tool_call_begin|>",
                                           "<|tool_calls_section_begin|>", "<|tool_call_argument_begin|>", "1", "\xff"};
  std::mt19937 rng(7);
  int calls = 0, failed = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string reply;
    const int n = static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) reply += pieces[rng() % pieces.size()];
    for (int f = 0; f <= static_cast<int>(F::kimi_k2); ++f) {
      const ParsedReply r = parse_tool_calls(static_cast<F>(f), reply);
      if (r.parse_failed) {
        ++failed;
        ASSERT_EQ(r.content, reply);
        ASSERT_FALSE(r.error.empty());
      }
      calls += static_cast<int>(r.calls.size());
      for (const ToolCall& c : r.calls) ASSERT_TRUE(Json::accept(c.arguments_json)) << c.arguments_json;
    }
  }
  EXPECT_GT(calls, 0);
  EXPECT_GT(failed, 0);
}

TEST(ToolCalls, FormatNamesAreDistinct) {
  std::set<std::string_view> names;
  for (int f = 0; f <= static_cast<int>(F::kimi_k2); ++f) names.insert(tool_call_format_name(static_cast<F>(f)));
  EXPECT_EQ(names.size(), static_cast<size_t>(F::kimi_k2) + 1);
  EXPECT_EQ(tool_call_format_name(F::none), "none");
  EXPECT_EQ(tool_call_format_name(F::hermes), "hermes");
}

// ---- Detection from the real templates ------------------------------------------------

// Every template in the test data that mentions tools, and the syntax it teaches (none where
// it has no tool-call syntax of its own, or one this library does not parse yet).
const std::map<std::string, F>& detection_table() {
  static const std::map<std::string, F> table = {
      {"CohereForAI-c4ai-command-r-plus-tool_use", F::command_r},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", F::command_r7b},
      {"Mistral-Small-3.2-24B-Instruct-2506", F::mistral},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", F::hermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", F::hermes},
      {"Qwen-QwQ-32B", F::hermes},
      {"Qwen-Qwen2.5-7B-Instruct", F::hermes},
      {"Qwen-Qwen3-0.6B", F::hermes},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", F::deepseek_r1},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", F::deepseek_r1},
      {"fireworks-ai-llama-3-firefunction-v2", F::firefunction_v2},
      {"ibm-granite-granite-3.3-2B-Instruct", F::granite},
      {"llama-cpp-deepseek-r1", F::deepseek_r1},
      {"meetkai-functionary-medium-v3.1", F::functionary_v3_1},
      {"meetkai-functionary-medium-v3.2", F::functionary_v3_2},
      {"meta-llama-Llama-3.1-8B-Instruct", F::llama3},
      {"meta-llama-Llama-3.2-3B-Instruct", F::llama3},
      {"meta-llama-Llama-3.3-70B-Instruct", F::llama3},
      {"mistralai-Mistral-Nemo-Instruct-2407", F::mistral},
      {"moonshotai-Kimi-K2", F::kimi_k2},
      {"openai-gpt-oss-120b", F::none},  // harmony channels (to=functions.x): not parsed yet
      {"test-chat-template-ChatGLM4", F::none},  // tools in a message's own field; no call syntax
      {"test-chat-template-Mistral-Large-Instruct-2407-mistralai-v3-template-modified-to-have-system-prompt-at-start", F::mistral},
      {"test-chat-template-Mistral-Nemo-Instruct-2407-mistralai-v3-tekken-template-modified-to-have-system-prompt-at-start", F::mistral},
      {"test-chat-template-ibm-granite-granite-3.0-8b-instruct", F::granite},
      {"test-chat-template-yandex-YandexGPT-5-Lite-8B-instruct", F::none},  // describes tools; no call syntax in the template
      {"unsloth-mistral-Devstral-Small-2507", F::mistral},
  };
  return table;
}

std::vector<std::string> template_names() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kData / "templates")) {
    if (e.path().extension() == ".jinja") out.push_back(e.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string template_source(const std::string& name) { return read_file(kData / "templates" / (name + ".jinja")); }

TEST(ToolCallDetection, EveryToolTemplateIsInTheTable) {
  const auto& table = detection_table();
  size_t mentioning = 0;
  for (const std::string& name : template_names()) {
    const std::string src = template_source(name);
    ASSERT_FALSE(src.empty()) << name;
    const bool tools = lower(src).find("tool") != std::string::npos;
    mentioning += tools;
    EXPECT_EQ(tools, table.count(name) == 1) << name << (tools ? " mentions tools but is not in the table" : " is in the table");
  }
  EXPECT_EQ(mentioning, table.size());
  EXPECT_GE(mentioning, 25u);
}

TEST(ToolCallDetection, DetectsEachTemplatesSyntax) {
  for (const auto& [name, want] : detection_table()) {
    EXPECT_EQ(tool_call_format_name(detect_tool_call_format(template_source(name))), tool_call_format_name(want)) << name;
  }
  // Templates without tools have no syntax.
  for (const std::string& name : template_names()) {
    if (detection_table().count(name) == 0) {
      EXPECT_EQ(detect_tool_call_format(template_source(name)), F::none) << name;
    }
  }
  EXPECT_EQ(detect_tool_call_format(""), F::none);
}

// ---- Calls rendered back through the templates ----------------------------------------

TEST(ToolCallsJson, IsTheOpenAiShape) {
  const std::vector<ToolCall> calls = {call("call_0", "get_weather", R"({"city":"Paris","n":[1,{"x":null}]})"),
                                       call("c\"1", "f", "not json")};
  EXPECT_EQ(tool_calls_json(calls),
            R"([{"id":"call_0","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris","n":[1,{"x":null}]}}},)"
            R"({"id":"c\"1","type":"function","function":{"name":"f","arguments":"not json"}}])");
  EXPECT_EQ(tool_calls_json(std::span(calls).first(1), ArgumentsAs::json_text),
            R"([{"id":"call_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"n\":[1,{\"x\":null}]}"}}])");
  EXPECT_EQ(tool_calls_json({}), "[]");
  EXPECT_EQ(tool_calls_json(std::vector<ToolCall>{call("i", "\xff", "{}")}), "[{\"id\":\"i\",\"type\":\"function\",\"function\":{\"name\":\"\xEF\xBF\xBD\",\"arguments\":{}}}]");
}

const Json& conversation(const std::string& name) {
  static const Json all = Json::parse(read_file(kData / "conversations.json"));
  for (const Json& c : all) {
    if (c["name"] == name) return c;
  }
  static const Json none;
  return none;
}

const Json& manifest_entry(const std::string& name) {
  static const Json manifest = Json::parse(read_file(kData / "manifest.json"));
  for (const Json& t : manifest["templates"]) {
    if (t["name"] == name) return t;
  }
  static const Json none;
  return none;
}

// Renders `messages` with the template's tokens and context as fetch_templates.py does.
Result<std::string> render(const std::string& name, const Json& messages, const Json& tools, bool agp) {
  const Json conv = {{"messages", messages}, {"tools", tools}};
  std::string m, t, x;
  return jinja::render_chat(template_source(name), jinja::testing::input_for(conv, manifest_entry(name), agp, m, t, x));
}

std::string expected_render(const std::string& name, const std::string& key) {
  const Json e = Json::parse(read_file(kData / "expected" / (name + ".json")));
  return e.contains(key) && e[key].contains("output") ? e[key]["output"].get<std::string>() : "";
}

// The "tool_calls" conversation with its assistant's calls replaced by `calls` as
// tool_calls_json gives them.
Json with_calls(const std::string& conv, const std::vector<ToolCall>& calls, ArgumentsAs as) {
  Json c = conversation(conv);
  for (Json& m : c["messages"]) {
    if (m.contains("tool_calls")) m["tool_calls"] = Json::parse(tool_calls_json(calls, as));
  }
  return c;
}

// Templates that render no assistant tool calls (Granite 3.3 drops them; Granite 3.0 takes
// them as an "assistant_tool_call" message's text).
bool renders_calls(const std::string& name) { return name.find("granite") == std::string::npos; }

// The two calls of conversations.json's "tool_calls", parsed from a Hermes reply and given
// the conversation's ids (the tool messages refer to them): the renders must equal jinja2's
// renders of the conversation as written, byte for byte.
TEST(ToolCallsRender, TwoCallsMatchJinja2) {
  ParsedReply r = parse_tool_calls(
      F::hermes,
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}\n</tool_call>");
  ASSERT_EQ(r.calls.size(), 2u) << r.error;
  r.calls[0].id = "call00001";
  r.calls[1].id = "call00002";
  int compared = 0;
  for (const auto& [name, format] : detection_table()) {
    const std::string want = expected_render(name, "tool_calls/gen");
    if (want.empty() || format == F::none || template_arguments(format) != ArgumentsAs::object) continue;
    SCOPED_TRACE(name);
    const Json c = with_calls("tool_calls", r.calls, ArgumentsAs::object);
    auto got = render(name, c["messages"], c["tools"], true);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, want);
    if (renders_calls(name)) {
      EXPECT_NE(got->find("\"Tokyo\""), std::string::npos);  // only the call quotes it
    }
    ++compared;
  }
  RecordProperty("templates", compared);
  EXPECT_GE(compared, 14);  // Hermes 2/3, Qwen x3, Mistral x5, Command R x2, Granite 3.3, Kimi
}

// One call with arguments "tool_calls_openai" gives as text: templates that render
// arguments with tojson (Llama 3.x) get an object from tool_calls_json, the others its text;
// jinja2's render with the arguments respelled so must equal ours.
TEST(ToolCallsRender, OneCallMatchesJinja2) {
  const std::vector<ToolCall> calls = {call("call00009", "search", R"({"query":"llama facts","max_results":3})")};
  const std::string as_text = R"({"query": "llama facts", "max_results": 3})";
  int compared = 0;
  for (const auto& [name, format] : detection_table()) {
    std::string want = expected_render(name, "tool_calls_openai/gen");
    const ArgumentsAs as = template_arguments(format);
    const bool quoted = format == F::llama3;  // tojson of a string: the text, quoted
    if (want.empty() || (!quoted && as != ArgumentsAs::json_text)) continue;
    SCOPED_TRACE(name);
    const std::string from = quoted ? Json(as_text).dump() : as_text;
    const std::string to = quoted ? as_text : calls[0].arguments_json;
    const size_t at = want.find(from);
    ASSERT_NE(at, std::string::npos);
    want.replace(at, from.size(), to);
    const Json c = with_calls("tool_calls_openai", calls, as);
    auto got = render(name, c["messages"], c["tools"], true);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, want);
    ++compared;
  }
  RecordProperty("templates", compared);
  EXPECT_GE(compared, 7);  // Llama 3.1/3.2/3.3, Functionary v3.1/v3.2, Firefunction v2, DeepSeek R1
}

TEST(ToolCallsRender, Llama31RendersTheCallAndTheResult) {
  const std::vector<ToolCall> calls = {call("call_0", "search", R"({"query":"llama facts","max_results":3})")};
  const Json c = with_calls("tool_calls_openai", calls, ArgumentsAs::object);
  auto got = render("meta-llama-Llama-3.1-8B-Instruct", c["messages"], c["tools"], true);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_NE(got->find("<|start_header_id|>assistant<|end_header_id|>\n\n"
                      R"({"name": "search", "parameters": {"query": "llama facts", "max_results": 3}}<|eot_id|>)"
                      "<|start_header_id|>ipython<|end_header_id|>\n\n\"Llamas hum.\"<|eot_id|>"),
            std::string::npos)
      << *got;
}

// What a template renders for an assistant's calls is what its model emits: the turn
// (the render with the calls less the render up to the generation prompt) parses back into
// the same calls.
TEST(ToolCallsRender, RenderedCallsParseBack) {
  const std::vector<ToolCall> calls = {call("call00001", "get_weather", R"({"city":"Paris","unit":"celsius"})"),
                                       call("call00002", "get_weather", R"({"city":"Tokyo"})")};
  const Json& conv = conversation("tool_calls");
  int checked = 0;
  for (const auto& [name, format] : detection_table()) {
    // llama-cpp-deepseek-r1 fails under jinja2 as soon as tools are declared (a generator
    // through tojson): it is skipped with the rest of jinja2's failures.
    if (format == F::none || !renders_calls(name) || expected_render(name, "tools_declared/gen").empty()) continue;
    SCOPED_TRACE(name);
    const size_t n = format == F::llama3 ? 1 : 2;  // Llama 3.x templates take one call a turn
    const std::vector<ToolCall> want(calls.begin(), calls.begin() + static_cast<std::ptrdiff_t>(n));
    Json user = Json::array({conv["messages"][0]});
    Json turn = user;
    Json assistant = {{"role", "assistant"}, {"content", ""}, {"tool_calls", Json::parse(tool_calls_json(want, template_arguments(format)))}};
    if (format == F::deepseek_r1) assistant["content"] = nullptr;  // its templates render calls only then
    turn.push_back(assistant);
    auto prompt = render(name, user, conv["tools"], true);
    auto full = render(name, turn, conv["tools"], false);
    if (!prompt.ok() || !full.ok()) {
      ADD_FAILURE() << (prompt.ok() ? full.status().message() : prompt.status().message());
      continue;
    }
    // The reply follows the generation prompt (Functionary v3.2's ends in ">>>"); where the
    // prompt opens a block the turn does not (QwQ's "<think>\n"), it follows the prompt's
    // last full line the turn shares.
    std::string_view reply = *full;
    size_t common = 0;
    while (common < prompt->size() && common < reply.size() && (*prompt)[common] == reply[common]) ++common;
    if (common < prompt->size()) common = reply.substr(0, common).rfind('\n') + 1;
    reply.remove_prefix(common);
    const ParsedReply r = parse_tool_calls(format, reply);
    EXPECT_FALSE(r.parse_failed) << r.error << "\nreply: " << reply;
    ASSERT_EQ(r.calls.size(), n) << "reply: " << reply;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(r.calls[i].name, want[i].name);
      EXPECT_EQ(r.calls[i].arguments_json, want[i].arguments_json);
    }
    ++checked;
  }
  RecordProperty("templates", checked);
  EXPECT_GE(checked, 20);
}

}  // namespace
}  // namespace llmsvc::chat
