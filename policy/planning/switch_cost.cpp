// SPDX-License-Identifier: Apache-2.0
// SwitchCost (de)serialization.
#include "policy/planning/switch_cost.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/file_io.h"

namespace llmsvc::policy {
namespace {

constexpr int kSwitchProfileVersion = 1;

struct Field {
  const char* name;
  double SwitchCost::*member;
};
constexpr Field kFields[] = {
    {"rc_fixed_s", &SwitchCost::rc_fixed_s}, {"rc_token_s", &SwitchCost::rc_token_s},
    {"rc_token_ctx_s", &SwitchCost::rc_token_ctx_s}, {"io_fixed_s", &SwitchCost::io_fixed_s},
    {"io_chunk_s", &SwitchCost::io_chunk_s}, {"io_byte_s", &SwitchCost::io_byte_s},
};

}  // namespace

std::string switch_cost_to_json(const SwitchCost& cost) {
  nlohmann::json j;
  j["version"] = kSwitchProfileVersion;
  j["source"] = cost.source;
  for (const Field& f : kFields) j[f.name] = cost.*f.member;
  return j.dump(1) + "\n";
}

Result<SwitchCost> switch_cost_from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status(Code::invalid_argument, "switch-cost profile: not a JSON object");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kSwitchProfileVersion)
    return Status(Code::invalid_argument, "switch-cost profile: field 'version' missing or not " + std::to_string(kSwitchProfileVersion));
  SwitchCost c;
  for (const Field& f : kFields) {
    if (!j.contains(f.name) || !j[f.name].is_number())
      return Status(Code::invalid_argument, std::string("switch-cost profile: field '") + f.name + "' missing or not a number");
    const double v = j[f.name].get<double>();
    if (!std::isfinite(v) || v < 0)
      return Status(Code::invalid_argument, std::string("switch-cost profile: field '") + f.name + "' must be finite and >= 0");
    c.*f.member = v;
  }
  c.source = j.contains("source") && j["source"].is_string() ? j["source"].get<std::string>() : "profile";
  return c;
}

Result<SwitchCost> load_switch_cost(const std::string& path) {
  if (!fileio::exists(path)) return SwitchCost{};
  auto text = fileio::read_file(path, 1 << 16);
  if (!text.ok()) return text.status();
  auto c = switch_cost_from_json(*text);
  if (!c.ok()) return Status(c.status().code(), path + ": " + c.status().message());
  return c;
}

}  // namespace llmsvc::policy
