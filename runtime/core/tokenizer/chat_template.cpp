// SPDX-License-Identifier: Apache-2.0
// Chat formats (ChatML, Gemma turns, raw) and what is read from the GGUF's Jinja template:
// the family, ChatML's default system prompt and Gemma's system separator. For those two
// families the template is not executed (their shapes are written out here and checked
// against Jinja's rendering in the tests); any other family's template is (jinja_turns.h).
#include "runtime/core/tokenizer/chat_template.h"

#include <initializer_list>
#include <optional>

#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/tokenizer/jinja_turns.h"
#include "runtime/core/tokenizer/unicode_class.h"

namespace llmsvc {
namespace {

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";
constexpr std::string_view kTurnStart = "<start_of_turn>";
constexpr std::string_view kTurnEnd = "<end_of_turn>";

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

// Reads a Jinja string literal's text starting at `pos` (just after its opening quote)
// up to `stop` (exclusive); nullopt when the literal ends or an escape is unknown first.
std::optional<std::string> literal_until(std::string_view t, size_t pos, char quote, std::string_view stop) {
  std::string out;
  while (pos < t.size()) {
    if (t.substr(pos, stop.size()) == stop) return out;
    const char c = t[pos];
    if (c == quote) return std::nullopt;
    if (c == '\\' && pos + 1 < t.size()) {
      const char e = t[pos + 1];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': case '\'': case '"': out += e; break;
        default: return std::nullopt;
      }
      pos += 2;
      continue;
    }
    out += c;
    ++pos;
  }
  return std::nullopt;
}

// The quote character of the string literal that position `pos` is inside, if it is one
// whose opening quote lies on the same template line (templates keep literals short).
std::optional<char> enclosing_quote(std::string_view t, size_t pos) {
  for (size_t i = pos; i-- > 0;) {
    const char c = t[i];
    if (c == '\'' || c == '"') return (i > 0 && t[i - 1] == '\\') ? std::nullopt : std::optional<char>(c);
    if (c == '}' || c == '{' || c == '+') return std::nullopt;
  }
  return std::nullopt;
}

// ChatML: a literal "<|im_start|>system\n<text><|im_end|>" is the default system turn.
std::string chatml_default_system(std::string_view t) {
  const std::string_view head = "<|im_start|>system";
  for (size_t at = t.find(head); at != std::string_view::npos; at = t.find(head, at + 1)) {
    size_t pos = at + head.size();
    if (t.substr(pos, 1) == "\n") {
      pos += 1;
    } else if (t.substr(pos, 2) == "\\n") {
      pos += 2;
    } else {
      continue;
    }
    const std::optional<char> quote = enclosing_quote(t, at);
    if (!quote) continue;
    if (auto text = literal_until(t, pos, *quote, kImEnd); text && !text->empty()) return *text;
  }
  return {};
}

// Gemma: "first_user_prefix = messages[0]['content'] + '<sep>'".
std::string gemma_separator(std::string_view t) {
  for (std::string_view key : {"messages[0]['content'] + ", "messages[0][\"content\"] + "}) {
    const size_t at = t.find(key);
    if (at == std::string_view::npos) continue;
    const size_t q = at + key.size();
    if (q >= t.size() || (t[q] != '\'' && t[q] != '"')) continue;
    const std::string stop(1, t[q]);
    if (auto sep = literal_until(t, q + 1, '\0', stop)) return *sep;
  }
  return "\n\n";
}

// Jinja's trim: Python's str.strip(), i.e. Unicode whitespace at both ends.
bool py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string_view py_strip(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    size_t next = begin;
    if (!py_space(unicode::decode_lenient(s, next))) break;
    begin = next;
  }
  size_t end = begin;
  for (size_t off = begin; off < s.size();) {
    if (!py_space(unicode::decode_lenient(s, off))) end = off;  // end of the last non-space
  }
  return s.substr(begin, end - begin);
}

std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out.append(p);
  return out;
}

}  // namespace

ChatFormat detect_chat_format(const gguf::GgufFile& file) {
  if (auto t = file.get_string("tokenizer.chat_template")) {
    if (contains(*t, kImStart)) return ChatFormat::chatml;
    if (contains(*t, kTurnStart)) return ChatFormat::gemma;
    return ChatFormat::jinja;
  }
  const std::string_view arch = file.get_string("general.architecture").value_or("");
  if (arch == "gemma" || arch == "gemma2" || arch == "gemma3") return ChatFormat::gemma;
  if (arch == "qwen2" || arch == "qwen2moe" || arch == "qwen3" || arch == "qwen3moe") return ChatFormat::chatml;
  // No template: a vocabulary with ChatML's markers speaks ChatML.
  if (const auto* tokens = file.get_string_array("tokenizer.ggml.tokens")) {
    bool start = false, end = false;
    for (const std::string& s : *tokens) {
      start = start || s == kImStart;
      end = end || s == kImEnd;
    }
    if (start && end) return ChatFormat::chatml;
  }
  return ChatFormat::raw;
}

namespace {

// The text of the special token whose id the metadata `key` names ("" without one).
std::string token_text(const gguf::GgufFile& file, const char* key) {
  const auto id = file.get_uint(key);
  const auto* tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (!id || !tokens || *id >= tokens->size()) return {};
  return (*tokens)[static_cast<size_t>(*id)];
}

}  // namespace

ChatTemplate make_chat_template(const gguf::GgufFile& file) {
  ChatTemplate t;
  t.format = detect_chat_format(file);
  const std::string_view text = file.get_string("tokenizer.chat_template").value_or("");
  t.source = std::string(text);
  t.bos_text = token_text(file, "tokenizer.ggml.bos_token_id");
  t.eos_text = token_text(file, "tokenizer.ggml.eos_token_id");
  t.tool_format = chat::detect_tool_call_format(text);
  if (t.format == ChatFormat::chatml) t.default_system = chatml_default_system(text);
  if (t.format == ChatFormat::gemma && !text.empty()) t.system_separator = gemma_separator(text);
  if (t.format == ChatFormat::jinja) {
    auto turns = JinjaTurns::make(text, t.bos_text, t.eos_text);
    if (turns.ok()) {
      t.jinja = std::move(turns).value();
    } else {
      t.error = turns.status();
    }
  }
  return t;
}

Result<ChatTemplate> ChatTemplate::with_tools(const std::string& tools_json) const {
  if (format == ChatFormat::raw || !contains(source, "tools"))
    return Status(Code::unsupported, "the model's chat template does not render tools");
  if (tool_format == chat::ToolCallFormat::none)
    return Status(Code::unsupported, "the model's chat template renders tools, but its tool-call syntax is not one "
                                     "this library parses");
  auto turns = JinjaTurns::make(source, bos_text, eos_text, tools_json);
  if (!turns.ok()) return turns.status();
  ChatTemplate t = *this;
  t.format = ChatFormat::jinja;
  t.jinja = std::move(turns).value();
  t.default_system.clear();
  t.error = Status::Ok();
  return t;
}

Status ChatTemplate::usable(std::string_view system_prompt) const {
  if (!error.ok()) return error;
  if (format == ChatFormat::jinja && jinja && !system_prompt.empty()) return jinja->first_turn(system_prompt).status();
  return Status::Ok();
}

std::string ChatTemplate::system_prefix(std::string_view system_prompt) const {
  if (format != ChatFormat::chatml) return {};
  const std::string_view sys = system_prompt.empty() ? std::string_view(default_system) : system_prompt;
  if (sys.empty()) return {};
  return cat({kImStart, "system\n", sys, kImEnd, "\n"});
}

std::pair<std::string, std::string> ChatTemplate::user_turn_parts(std::string_view system_prompt, bool first) const {
  switch (format) {
    case ChatFormat::chatml:
      return {cat({kImStart, "user\n"}), cat({kImEnd, "\n", kImStart, "assistant\n"})};
    case ChatFormat::gemma: {
      const bool with_system = first && !system_prompt.empty();
      return {cat({kTurnStart, "user\n", with_system ? system_prompt : "", with_system ? system_separator : ""}),
              cat({kTurnEnd, "\n", kTurnStart, "model\n"})};
    }
    case ChatFormat::jinja: {
      if (!jinja) break;
      if (!first) return jinja->next_turn();
      auto parts = jinja->first_turn(system_prompt);  // (usable() reported a failure here)
      if (parts.ok()) return std::move(parts).value();
      break;
    }
    case ChatFormat::raw:
      break;
  }
  return {};
}

std::string ChatTemplate::user_content(std::string_view user) const {
  const bool trims = format == ChatFormat::gemma || (format == ChatFormat::jinja && jinja && jinja->trims_content());
  return std::string(trims ? py_strip(user) : user);
}

std::string ChatTemplate::user_turn(std::string_view user, std::string_view system_prompt, bool first) const {
  auto [before, after] = user_turn_parts(system_prompt, first);
  return before + user_content(user) + after;
}

std::string ChatTemplate::reply_text(std::string_view reply) const {
  std::string out = format == ChatFormat::jinja && jinja ? jinja->reply_prefix() : std::string();
  out.append(user_content(reply));
  return out;
}

std::string ChatTemplate::assistant_end() const {
  switch (format) {
    case ChatFormat::chatml: return cat({kImEnd, "\n"});
    case ChatFormat::gemma: return cat({kTurnEnd, "\n"});
    case ChatFormat::jinja: return jinja ? jinja->assistant_end() : std::string();
    case ChatFormat::raw: break;
  }
  return {};
}

}  // namespace llmsvc
