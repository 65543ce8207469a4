// SPDX-License-Identifier: Apache-2.0
// ContextMeta <-> JSON (nlohmann), validated field by field.
#include "runtime/core/persist/context_meta.h"

#include <nlohmann/json.hpp>

#include <cinttypes>
#include <cstdio>

#include "runtime/core/persist/state_dir.h"

namespace llmsvc::persist {
namespace {

constexpr size_t kMaxMetaBytes = size_t{4} << 20;  // the system prompt dominates

std::string hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016" PRIx64, v);
  return b;
}

bool parse_hex64(const std::string& s, uint64_t* out) {
  if (s.size() != 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

}  // namespace

std::string to_json(const ContextMeta& m) {
  nlohmann::json j = {{"format", ContextMeta::kFormatVersion},
                      {"id", m.id},
                      {"model", {{"hash", hex64(m.model_hash)}, {"vocab_hash", hex64(m.vocab_hash)}, {"name", m.model_name}}},
                      {"raw", m.raw},
                      {"system_prompt", m.system_prompt},
                      {"chunk_tokens", m.chunk_tokens},
                      {"created_unix", m.created_unix}};
  if (!m.tools.empty()) j["tools"] = m.tools;  // absent in files of contexts without tools
  if (!m.adapter.empty()) j["adapter"] = m.adapter;  // likewise without an adapter
  return j.dump(2) + "\n";
}

Result<ContextMeta> parse_context_meta(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status(Code::io, "context.json: not a JSON object");
  auto bad = [](const char* field) { return Status(Code::io, std::string("context.json: bad or missing '") + field + "'"); };
  ContextMeta m;
  if (!j.contains("format") || !j["format"].is_number_integer()) return bad("format");
  if (j["format"].get<int64_t>() != ContextMeta::kFormatVersion)
    return Status(Code::unsupported, "context.json: format version " + j["format"].dump() + " is not supported");
  if (!j.contains("id") || !j["id"].is_string() || !valid_context_key(j["id"].get<std::string>())) return bad("id");
  m.id = j["id"].get<std::string>();
  if (!j.contains("model") || !j["model"].is_object()) return bad("model");
  const auto& mo = j["model"];
  if (!mo.contains("hash") || !mo["hash"].is_string() || !parse_hex64(mo["hash"].get<std::string>(), &m.model_hash))
    return bad("model.hash");
  if (!mo.contains("vocab_hash") || !mo["vocab_hash"].is_string() ||
      !parse_hex64(mo["vocab_hash"].get<std::string>(), &m.vocab_hash))
    return bad("model.vocab_hash");
  if (mo.contains("name") && mo["name"].is_string()) m.model_name = mo["name"].get<std::string>();
  if (!j.contains("raw") || !j["raw"].is_boolean()) return bad("raw");
  m.raw = j["raw"].get<bool>();
  if (!j.contains("system_prompt") || !j["system_prompt"].is_string()) return bad("system_prompt");
  m.system_prompt = j["system_prompt"].get<std::string>();
  if (!j.contains("chunk_tokens") || !j["chunk_tokens"].is_number_integer()) return bad("chunk_tokens");
  const int64_t ct = j["chunk_tokens"].get<int64_t>();
  if (ct < 1 || ct > 4096) return bad("chunk_tokens");
  m.chunk_tokens = static_cast<int32_t>(ct);
  if (j.contains("created_unix") && j["created_unix"].is_number_integer()) m.created_unix = j["created_unix"].get<int64_t>();
  if (j.contains("tools")) {  // checked again (normalize_tools) by whoever renders them
    if (!j["tools"].is_string()) return bad("tools");
    m.tools = j["tools"].get<std::string>();
  }
  if (j.contains("adapter")) {  // a name, as context ids are spelt
    if (!j["adapter"].is_string() || !valid_context_id(j["adapter"].get<std::string>())) return bad("adapter");
    m.adapter = j["adapter"].get<std::string>();
  }
  return m;
}

Status write_context_meta(const fileio::SafeDir& dir, std::string_view rel, const ContextMeta& m) {
  return dir.write_atomic(rel, to_json(m));
}

Result<ContextMeta> read_context_meta(const fileio::SafeDir& dir, std::string_view rel) {
  auto text = dir.read_file(rel, kMaxMetaBytes);
  if (!text.ok()) return text.status();
  auto m = parse_context_meta(*text);
  if (!m.ok()) return Status(m.status().code(), dir.name_of(rel) + ": " + m.status().message());
  return m;
}

}  // namespace llmsvc::persist
