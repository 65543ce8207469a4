// SPDX-License-Identifier: Apache-2.0
// The rules of CallParams, in one place; the roles' names.
#include "runtime/core/engine/call_types.h"

#include "runtime/core/persist/state_dir.h"

#include <algorithm>
#include <cmath>

namespace llmsvc {
namespace {

Status bad(const std::string& what) { return Status(Code::invalid_argument, what); }

}  // namespace

const char* role_name(MessageRole role) {
  switch (role) {
    case MessageRole::system: return "system";
    case MessageRole::user: return "user";
    case MessageRole::assistant: return "assistant";
    case MessageRole::tool: return "tool";
  }
  return "unknown";
}

Status check_call_params(const CallParams& p) {
  const SamplerParams& s = p.sampling;
  // NaN passes every ordered comparison as false, so each check says "finite" first.
  if (!std::isfinite(s.temperature)) return bad("temperature is not a finite number");
  if (s.top_k < 0) return bad("top_k is negative");
  if (!std::isfinite(s.top_p) || s.top_p < 0.0f || s.top_p > 1.0f) return bad("top_p is outside [0, 1]");
  if (!std::isfinite(s.min_p) || s.min_p < 0.0f || s.min_p > 1.0f) return bad("min_p is outside [0, 1]");
  if (!std::isfinite(s.repeat_penalty) || s.repeat_penalty <= 0.0f) return bad("repeat_penalty must be > 0");
  if (s.repeat_last_n < -1) return bad("repeat_last_n must be >= -1");
  if (p.max_tokens < 0) return bad("max_tokens is negative");
  if (!std::isfinite(p.slo_ttft_ratio) || p.slo_ttft_ratio < 0.0f) return bad("slo_ttft_ratio must be >= 0");
  if (!std::isfinite(p.slo_tpot_ratio) || p.slo_tpot_ratio < 0.0f) return bad("slo_tpot_ratio must be >= 0");
  if (p.stop.size() > kMaxStopStrings) return bad("more than 16 stop strings");
  for (size_t i = 0; i < p.stop.size(); ++i) {
    const std::string what = "stop[" + std::to_string(i) + "]";
    if (p.stop[i].empty()) return bad(what + " is empty");
    if (p.stop[i].size() > kMaxStopBytes) return bad(what + " is longer than 256 bytes");
  }
  if (!p.json_schema.empty() && !p.grammar.empty()) return bad("json_schema and grammar are both set: one at most");
  if (p.json_schema.size() > kMaxConstraintBytes) return bad("json_schema is longer than 64 KiB");
  if (p.grammar.size() > kMaxConstraintBytes) return bad("grammar is longer than 64 KiB");
  if (p.level_percent < 0 || p.level_percent > 100)
    return bad("level_percent is " + std::to_string(p.level_percent) + ": 0 (the service chooses) or a level in 1..100");
  if (!std::isfinite(p.prompt_keep) || p.prompt_keep < 0.0f || p.prompt_keep > 1.0f)
    return bad("prompt_keep must be 0 (the service chooses) or a share in (0, 1]");
  if (!p.adapter.empty()) return check_adapter_name(p.adapter, "adapter");
  return Status::Ok();
}

Status check_adapter_name(std::string_view name, std::string_view what) {
  if (!persist::valid_context_id(name))
    return bad(std::string(what) + ": an adapter name is 1..64 bytes of [A-Za-z0-9._-], not '.' or '..'");
  return Status::Ok();
}

Result<std::vector<std::pair<std::string, std::string>>> parse_adapter_list(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    const size_t end = std::min(text.find(';'), text.size());
    const std::string_view entry = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq + 1 == entry.size())
      return Status(Code::invalid_argument, "adapters: '" + std::string(entry) + "' is not NAME=PATH");
    std::string name(entry.substr(0, eq));
    LLMSVC_RETURN_IF_ERROR(check_adapter_name(name, "adapters: '" + std::string(entry) + "'"));
    out.emplace_back(std::move(name), std::string(entry.substr(eq + 1)));
  }
  return out;
}

}  // namespace llmsvc
