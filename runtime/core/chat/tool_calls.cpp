// SPDX-License-Identifier: Apache-2.0
// Tool-call syntaxes (see tool_calls.h). Each parser walks the reply once with a cursor;
// JSON is delimited first by a bounded, non-recursive scan (so nesting and truncation are
// reported before nlohmann sees the text), then parsed by nlohmann with its exceptions
// caught here. Markers follow the templates in tests/data/chat_templates and llama.cpp's
// common/chat.cpp, which documents what the models emit.
#include "runtime/core/chat/tool_calls.h"

#include <array>
#include <exception>
#include <initializer_list>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace llmsvc::chat {
namespace {

using Json = nlohmann::ordered_json;  // arguments keep the model's key order

constexpr size_t kMaxNameBytes = 256;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

Status fail(std::string what) { return Status(Code::invalid_argument, std::move(what)); }

// A cursor over the reply, and what has been taken from it so far.
class Parse {
 public:
  explicit Parse(std::string_view text) : s_(text) {}

  std::string_view text() const { return s_; }
  size_t pos() const { return pos_; }
  bool at_end() const { return pos_ >= s_.size(); }
  std::string_view rest() const { return s_.substr(pos_); }
  void skip_space() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }
  bool take(std::string_view lit) {
    if (!rest().starts_with(lit)) return false;
    pos_ += lit.size();
    return true;
  }
  // Moves past the next `marker`, keeping the text before it as content; false (cursor
  // unmoved) when there is none.
  bool seek(std::string_view marker) {
    const size_t at = s_.find(marker, pos_);
    if (at == std::string_view::npos) return false;
    content_ += s_.substr(pos_, at - pos_);
    pos_ = at + marker.size();
    return true;
  }
  // The text up to `stop` (not taken), or nullopt when it never comes.
  std::optional<std::string_view> until(std::string_view stop) {
    const size_t at = s_.find(stop, pos_);
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view out = s_.substr(pos_, at - pos_);
    pos_ = at;
    return out;
  }
  void keep_rest() {
    content_ += rest();
    pos_ = s_.size();
  }
  void keep(std::string_view text) { content_ += text; }
  // The content is what was kept even without calls (the syntax wraps plain text too).
  void rewrites_text() { raw_ = false; }

  // A closing marker after a call; the reply may end before it (a stop string, max_tokens).
  Status close(std::string_view tag) {
    skip_space();
    if (at_end() || take(tag)) return Status::Ok();
    return fail("expected " + std::string(tag) + " after a tool call");
  }

  Result<Json> json(std::string_view what);
  Status add(std::string name, const Json& args, std::string id);
  Status add_object(const Json& call);
  Status add_array(std::string_view what);

  ParsedReply finish() && {
    ParsedReply r;
    r.calls = std::move(calls_);
    if (!r.calls.empty()) r.content = std::string(trim(content_));
    else r.content = raw_ ? std::string(s_) : std::move(content_);
    return r;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
  std::string content_;
  std::vector<ToolCall> calls_;
  bool raw_ = true;
};

// The end of the JSON value starting at s[at] (after whitespace): strings by their quotes,
// containers by bracket depth, scalars by their characters. No recursion; bounded depth.
Result<size_t> json_extent(std::string_view s, size_t at) {
  if (at >= s.size()) return fail("truncated: no JSON value");
  const char first = s[at];
  if (first != '{' && first != '[' && first != '"') {
    size_t i = at;
    while (i < s.size() && (is_word(s[i]) || s[i] == '-' || s[i] == '+' || s[i] == '.')) ++i;
    if (i == at) return fail("expected a JSON value");
    return i;
  }
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = at; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') {
        in_string = false;
        if (depth == 0) return i + 1;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxToolCallJsonDepth) {
        return fail("JSON nested deeper than " + std::to_string(kMaxToolCallJsonDepth));
      }
    } else if (c == '}' || c == ']') {
      if (depth == 0) return fail("unbalanced JSON brackets");
      if (--depth == 0) return i + 1;
    }
  }
  return fail("truncated JSON");
}

Result<Json> parse_json_text(std::string_view text) {
  try {  // nlohmann's parser is iterative: only the scan above bounds its input's nesting
    return Json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    return fail(std::string("invalid JSON: ") + e.what());
  }
}

// A whole text that must be one JSON value (arguments given as a string), bounded alike.
Result<Json> parse_bounded(std::string_view text) {
  text = trim(text);
  auto end = json_extent(text, 0);
  if (!end.ok()) return end.status();
  if (*end != text.size()) return fail("text after the JSON value");
  return parse_json_text(text);
}

Result<Json> Parse::json(std::string_view what) {
  skip_space();
  auto end = json_extent(s_, pos_);
  if (!end.ok()) return fail(std::string(what) + ": " + end.status().message());
  auto j = parse_json_text(s_.substr(pos_, *end - pos_));
  if (!j.ok()) return fail(std::string(what) + ": " + j.status().message());
  pos_ = *end;
  return j;
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (const char c : name) {
    if (static_cast<unsigned char>(c) <= ' ') return false;
  }
  return true;
}

// Compact JSON text. Parsed JSON is valid UTF-8; raw code (python) may not be: replaced.
std::string compact(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// Arguments come as an object, as a string holding one (some models quote them), or absent.
Result<std::string> arguments_text(const Json* args) {
  if (args == nullptr || args->is_null()) return std::string("{}");
  if (args->is_string()) {
    auto inner = parse_bounded(args->get_ref<const std::string&>());
    if (!inner.ok()) return fail("arguments: " + inner.status().message());
    if (!inner->is_object()) return fail("arguments: a string that is not a JSON object");
    return compact(*inner);
  }
  if (!args->is_object()) return fail("arguments: not a JSON object");
  return compact(*args);
}

Status Parse::add(std::string name, const Json& args, std::string id) {
  if (calls_.size() >= kMaxToolCalls) return fail("more than " + std::to_string(kMaxToolCalls) + " tool calls");
  if (!valid_name(name)) return fail("tool call without a valid name");
  auto text = arguments_text(&args);
  if (!text.ok()) return text.status();
  if (id.empty()) id = "call_" + std::to_string(calls_.size());
  calls_.push_back({std::move(id), std::move(name), std::move(text).value()});
  return Status::Ok();
}

const Json* field(const Json& o, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    const auto it = o.find(k);
    if (it != o.end()) return &*it;
  }
  return nullptr;
}

// One call as an object: {"name", "arguments"} and the families' spellings of each field,
// or OpenAI's {"id", "function": {...}}.
Status Parse::add_object(const Json& call) {
  if (!call.is_object()) return fail("tool call is not a JSON object");
  const Json* fn = field(call, {"function"});
  const Json& body = fn != nullptr && fn->is_object() ? *fn : call;
  const Json* name = field(body, {"name", "tool_name"});
  if (name == nullptr || !name->is_string()) return fail("tool call without a name");
  std::string id;
  if (const Json* i = field(call, {"id", "tool_call_id"})) {
    if (i->is_string()) id = i->get<std::string>();
    else if (i->is_number_integer()) id = i->dump();
  }
  static const Json kNone;
  const Json* args = field(body, {"arguments", "parameters"});
  return add(name->get<std::string>(), args != nullptr ? *args : kNone, std::move(id));
}

Status Parse::add_array(std::string_view what) {
  auto list = json(what);
  if (!list.ok()) return list.status();
  if (list->is_object()) return add_object(*list);  // a lone call where a list was taught
  if (!list->is_array()) return fail(std::string(what) + ": not a JSON array");
  for (const Json& call : *list) LLMSVC_RETURN_IF_ERROR(add_object(call));
  return Status::Ok();
}

// <tool_call>{...}</tool_call>, any number, text between.
Status parse_hermes(Parse& p) {
  while (p.seek("<tool_call>")) {
    auto call = p.json("<tool_call>");
    if (!call.ok()) return call.status();
    LLMSVC_RETURN_IF_ERROR(p.add_object(*call));
    LLMSVC_RETURN_IF_ERROR(p.close("</tool_call>"));
  }
  p.keep_rest();
  return Status::Ok();
}

// Raw code after <|python_tag|>: a call of the "python" tool with {"code": ...}.
Status add_code(Parse& p) {
  const Json args = {{"code", std::string(p.rest())}};
  return p.add("python", args, "");
}

// Llama 3.1's built-in tools: name.call(key=value, ...) with JSON values.
Status parse_builtin_call(Parse& p) {
  size_t n = 0;
  const std::string_view r = p.rest();
  while (n < r.size() && is_word(r[n])) ++n;
  const std::string name(r.substr(0, n));
  if (n == 0 || !r.substr(n).starts_with(".call(")) return add_code(p);
  p.take(r.substr(0, n + 6));
  Json args = Json::object();
  for (p.skip_space(); !p.take(")");) {
    if (p.at_end()) return fail("<|python_tag|>: truncated call");
    const std::string_view a = p.rest();
    size_t k = 0;
    while (k < a.size() && is_word(a[k])) ++k;
    if (k == 0) return fail("<|python_tag|>: expected an argument name");
    const std::string key(a.substr(0, k));
    p.take(a.substr(0, k));
    p.skip_space();
    if (!p.take("=")) return fail("<|python_tag|>: expected = after " + key);
    auto v = p.json("<|python_tag|> argument");
    if (!v.ok()) return v.status();
    args[key] = std::move(v).value();
    p.skip_space();
    if (p.take(",")) p.skip_space();
  }
  LLMSVC_RETURN_IF_ERROR(p.add(name, args, ""));
  p.keep_rest();
  return Status::Ok();
}

// True when `rest` (after a '{') begins with one of the keys a call object starts with,
// or with a prefix of one (a reply cut inside the key is still a call).
bool starts_call_object(std::string_view rest) {
  rest = trim(rest);
  for (std::string_view key : {"\"name\"", "\"type\"", "\"function\""}) {
    if (rest.starts_with(key) || (rest.size() < key.size() && key.starts_with(rest))) return true;
  }
  return false;
}

bool call_shaped(const Json& j) {
  return j.is_object() && (j.contains("function") || (j.contains("name") && (j.contains("parameters") || j.contains("arguments"))));
}

// A bare {"name", "parameters"} object at the start, or <|python_tag|> then a call.
Status parse_llama3(Parse& p) {
  const bool tagged = p.seek("<|python_tag|>");
  if (tagged) {
    p.skip_space();
    if (!p.rest().starts_with("{")) return parse_builtin_call(p);
  } else {
    p.skip_space();
    if (!p.rest().starts_with("{") || !starts_call_object(p.rest().substr(1))) {
      p.keep_rest();
      return Status::Ok();
    }
  }
  // Calls separated by whitespace or ';' (the model is taught one; some emit more).
  for (bool first = true; p.rest().starts_with("{"); first = false) {
    auto call = p.json("tool call");
    if (!call.ok()) return call.status();
    if (!call_shaped(*call)) {
      if (first && !tagged) return Status::Ok();  // a JSON answer, not a call: all text
      return fail("tool call: an object without a name and parameters");
    }
    LLMSVC_RETURN_IF_ERROR(p.add_object(*call));
    p.skip_space();
    if (p.take(";")) p.skip_space();
  }
  p.keep_rest();
  return Status::Ok();
}

// [TOOL_CALLS] then a JSON list (v3), or name[CALL_ID]id[ARGS]{...} (v11+), per marker.
Status parse_mistral(Parse& p) {
  while (p.seek("[TOOL_CALLS]")) {
    p.skip_space();
    if (p.at_end()) return fail("[TOOL_CALLS]: truncated");
    if (p.rest().starts_with("[")) {
      LLMSVC_RETURN_IF_ERROR(p.add_array("[TOOL_CALLS]"));
      continue;
    }
    const auto name = p.until("[");
    if (!name) return fail("[TOOL_CALLS]: truncated before [ARGS]");
    std::string id;
    if (p.take("[CALL_ID]")) {
      const auto i = p.until("[ARGS]");
      if (!i) return fail("[CALL_ID]: truncated before [ARGS]");
      id = std::string(trim(*i));
    }
    if (!p.take("[ARGS]")) return fail("[TOOL_CALLS]: expected [ARGS] after the name");
    auto args = p.json("[ARGS]");
    if (!args.ok()) return args.status();
    LLMSVC_RETURN_IF_ERROR(p.add(std::string(trim(*name)), *args, std::move(id)));
  }
  p.keep_rest();
  return Status::Ok();
}

// <function=name>{...}</function>, any number; <|python_tag|> ends the reply with code.
Status parse_functionary_v3_1(Parse& p) {
  constexpr std::string_view kOpen = "<function=", kPython = "<|python_tag|>";
  for (;;) {
    const std::string_view r = p.rest();
    const size_t f = r.find(kOpen), py = r.find(kPython);
    if (f == std::string_view::npos && py == std::string_view::npos) break;
    if (py < f) {
      p.seek(kPython);
      return add_code(p);
    }
    p.seek(kOpen);
    const auto name = p.until(">");
    if (!name) return fail("<function=: truncated name");
    p.take(">");
    auto args = p.json("<function=" + std::string(*name) + ">");
    if (!args.ok()) return args.status();
    LLMSVC_RETURN_IF_ERROR(p.add(std::string(*name), *args, ""));
    LLMSVC_RETURN_IF_ERROR(p.close("</function>"));
  }
  p.keep_rest();
  return Status::Ok();
}

// Sections "recipient\nbody" separated by ">>>" (the prompt ends in ">>>", so the reply
// starts with the first recipient): "all" is text to the user; a name with a JSON body, or
// "python" with code, is a call; anything else is kept as text.
Status parse_functionary_v3_2(Parse& p) {
  const std::string_view s = p.text();
  p.rewrites_text();
  size_t at = 0;
  for (bool first = true; at <= s.size(); first = false) {
    size_t next = s.find(">>>", at);
    if (next == std::string_view::npos) next = s.size();
    const std::string_view section = s.substr(at, next - at);
    const size_t nl = section.find('\n');
    const std::string_view recipient = section.substr(0, nl);
    bool word = !recipient.empty();
    for (const char c : recipient) word = word && is_word(c);
    const std::string_view body = nl == std::string_view::npos ? std::string_view() : section.substr(nl + 1);
    if (word && nl == std::string_view::npos && next == s.size() && !first) {
      return fail(">>>" + std::string(recipient) + ": truncated");
    }
    if (!word || nl == std::string_view::npos) {
      p.keep(first ? section : s.substr(at - 3, next - at + 3));
    } else if (recipient == "all") {
      p.keep(body);
    } else if (recipient == "python" && !trim(body).starts_with("{")) {
      LLMSVC_RETURN_IF_ERROR(p.add("python", Json{{"code", std::string(body)}}, ""));
    } else if (trim(body).starts_with("{") || (body.empty() && next == s.size())) {
      Parse call(body);
      auto args = call.json(">>>" + std::string(recipient));
      if (!args.ok()) return args.status();
      LLMSVC_RETURN_IF_ERROR(p.add(std::string(recipient), *args, ""));
      p.keep(call.rest());
    } else {
      p.keep(first ? section : s.substr(at - 3, next - at + 3));
    }
    at = next + 3;
  }
  return Status::Ok();
}

// A marker, then a JSON list of calls, then an optional closing marker (empty: none).
Status parse_marked_list(Parse& p, std::string_view open, std::string_view fence, std::string_view close) {
  if (!p.seek(open)) {
    p.keep_rest();
    return Status::Ok();
  }
  p.skip_space();
  const bool fenced = !fence.empty() && p.take(fence);
  if (fenced) p.take("json");
  LLMSVC_RETURN_IF_ERROR(p.add_array(open));
  if (fenced) LLMSVC_RETURN_IF_ERROR(p.close(fence));
  if (!close.empty()) LLMSVC_RETURN_IF_ERROR(p.close(close));
  p.keep_rest();
  return Status::Ok();
}

// A section of calls between a begin and an end marker, each call between its own markers.
struct Section {
  std::string_view begin, end, call_begin, call_end;
};

// DeepSeek R1: type<｜tool▁sep｜>name\n```json\n{...}\n``` inside each call's markers.
Status deepseek_call(Parse& p) {
  if (!p.until("<｜tool▁sep｜>")) return fail("<｜tool▁call▁begin｜>: truncated before <｜tool▁sep｜>");
  p.take("<｜tool▁sep｜>");
  const auto name = p.until("\n");
  if (!name) return fail("<｜tool▁sep｜>: truncated name");
  p.skip_space();
  if (!p.take("```")) return fail("<｜tool▁sep｜>" + std::string(*name) + ": expected ```json");
  p.take("json");
  auto args = p.json("<｜tool▁sep｜>" + std::string(*name));
  if (!args.ok()) return args.status();
  LLMSVC_RETURN_IF_ERROR(p.add(std::string(trim(*name)), *args, ""));
  return p.close("```");
}

// Kimi K2: functions.name:index<|tool_call_argument_begin|>{...}; the id is that prefix.
Status kimi_call(Parse& p) {
  const auto id = p.until("<|tool_call_argument_begin|>");
  if (!id) return fail("<|tool_call_begin|>: truncated before <|tool_call_argument_begin|>");
  p.take("<|tool_call_argument_begin|>");
  std::string_view name = trim(*id);
  if (name.starts_with("functions.")) name.remove_prefix(10);
  name = name.substr(0, name.rfind(':'));
  auto args = p.json("<|tool_call_begin|>" + std::string(trim(*id)));
  if (!args.ok()) return args.status();
  return p.add(std::string(name), *args, std::string(trim(*id)));
}

Status parse_section(Parse& p, const Section& sec, Status (*one)(Parse&)) {
  if (!p.seek(sec.begin)) {
    p.keep_rest();
    return Status::Ok();
  }
  for (;;) {
    p.skip_space();
    if (p.at_end() || p.take(sec.end)) break;
    if (!p.take(sec.call_begin)) return fail("expected " + std::string(sec.call_begin) + " or " + std::string(sec.end));
    LLMSVC_RETURN_IF_ERROR(one(p));
    LLMSVC_RETURN_IF_ERROR(p.close(sec.call_end));
  }
  p.keep_rest();
  return Status::Ok();
}

Status parse(ToolCallFormat format, Parse& p) {
  switch (format) {
    case ToolCallFormat::none: p.keep_rest(); return Status::Ok();
    case ToolCallFormat::hermes: return parse_hermes(p);
    case ToolCallFormat::llama3: return parse_llama3(p);
    case ToolCallFormat::mistral: return parse_mistral(p);
    case ToolCallFormat::functionary_v3_1: return parse_functionary_v3_1(p);
    case ToolCallFormat::functionary_v3_2: return parse_functionary_v3_2(p);
    case ToolCallFormat::firefunction_v2: return parse_marked_list(p, "functools", "", "");
    case ToolCallFormat::command_r: return parse_marked_list(p, "Action:", "```", "");
    case ToolCallFormat::command_r7b: return parse_marked_list(p, "<|START_ACTION|>", "", "<|END_ACTION|>");
    case ToolCallFormat::granite: return parse_marked_list(p, "<|tool_call|>", "", "");
    case ToolCallFormat::deepseek_r1:
      return parse_section(p, {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"},
                           deepseek_call);
    case ToolCallFormat::kimi_k2:
      return parse_section(p, {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_end|>"},
                           kimi_call);
  }
  return fail("unknown tool call format");
}

struct Detector {
  ToolCallFormat format;
  std::string_view name;
  std::array<std::string_view, 2> markers;  // all must occur in the source (empty: skipped)
};

// First match wins: the order separates families whose templates share markers (Functionary
// v3.1 also renders Llama's ipython role; Hermes 3 is a Llama 3.1 fine-tune).
constexpr std::array<Detector, 11> kDetectors = {{
    {ToolCallFormat::deepseek_r1, "deepseek_r1", {"<｜tool▁calls▁begin｜>", ""}},
    {ToolCallFormat::command_r7b, "command_r7b", {"<|START_ACTION|>", ""}},
    {ToolCallFormat::granite, "granite", {"<|tool_call|>", ""}},
    {ToolCallFormat::hermes, "hermes", {"<tool_call>", ""}},
    {ToolCallFormat::kimi_k2, "kimi_k2", {"<|tool_calls_section_begin|>", ""}},
    {ToolCallFormat::functionary_v3_2, "functionary_v3_2", {">>>all", ""}},
    {ToolCallFormat::firefunction_v2, "firefunction_v2", {" functools[", ""}},
    {ToolCallFormat::functionary_v3_1, "functionary_v3_1", {"<function=", "<|start_header_id|>"}},
    {ToolCallFormat::llama3, "llama3", {"<|start_header_id|>ipython<|end_header_id|>", ""}},
    {ToolCallFormat::mistral, "mistral", {"[TOOL_CALLS]", ""}},
    {ToolCallFormat::command_r, "command_r", {"Action:", "\"tool_name\""}},
}};

}  // namespace

std::string_view tool_call_format_name(ToolCallFormat format) {
  for (const Detector& d : kDetectors) {
    if (d.format == format) return d.name;
  }
  return "none";
}

ToolCallFormat detect_tool_call_format(std::string_view template_source) {
  for (const Detector& d : kDetectors) {
    bool all = true;
    for (std::string_view m : d.markers) all = all && (m.empty() || template_source.find(m) != std::string_view::npos);
    if (all) return d.format;
  }
  return ToolCallFormat::none;
}

ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view model_output) {
  Status st;
  try {
    Parse p(model_output);
    st = parse(format, p);
    if (st.ok()) return std::move(p).finish();
  } catch (const std::exception& e) {  // allocation failure: the reply is kept as text
    st = fail(std::string("tool call parser: ") + e.what());
  }
  ParsedReply r;
  r.content = std::string(model_output);
  r.parse_failed = true;
  r.error = st.message();
  return r;
}

ArgumentsAs template_arguments(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::functionary_v3_1:
    case ToolCallFormat::functionary_v3_2:
    case ToolCallFormat::firefunction_v2:
    case ToolCallFormat::deepseek_r1: return ArgumentsAs::json_text;
    default: return ArgumentsAs::object;
  }
}

std::string tool_calls_json(std::span<const ToolCall> calls, ArgumentsAs arguments) {
  Json out = Json::array();
  for (const ToolCall& c : calls) {
    auto parsed = arguments == ArgumentsAs::object ? parse_bounded(c.arguments_json) : Result<Json>(fail("as text"));
    Json args = parsed.ok() && parsed->is_object() ? std::move(parsed).value() : Json(c.arguments_json);
    out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", std::move(args)}}}});
  }
  return compact(out);  // a hand-built ToolCall's name or id may be invalid UTF-8
}

}  // namespace llmsvc::chat
