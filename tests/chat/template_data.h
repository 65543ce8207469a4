// SPDX-License-Identifier: Apache-2.0
// Shared by the tests over tests/data/chat_templates: reading its files, and a conversation's
// template input as tools/chat/fetch_templates.py gives it to jinja2 (the manifest's tokens
// and context, the conversation's extra variables, strftime_now at FIXED_NOW).
#pragma once

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/core/chat/jinja/chat.h"

namespace llmsvc::jinja::testing {

inline const std::filesystem::path kChatData = std::filesystem::path(LLMSVC_TEST_DATA) / "chat_templates";

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline nlohmann::ordered_json read_json(const std::filesystem::path& p) { return nlohmann::ordered_json::parse(read_file(p)); }

// strftime_now's time in the expected renders (FIXED_NOW in fetch_templates.py).
inline std::tm fixed_now() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 0;
  tm.tm_mday = 15;
  tm.tm_hour = 9;
  tm.tm_min = 30;
  tm.tm_wday = 4;  // a Thursday
  tm.tm_yday = 14;
  return tm;
}

// The context for one conversation ({"messages", "tools"?, "extra"?}) and a manifest entry;
// the strings hold the JSON texts the input points to.
inline ChatInput input_for(const nlohmann::ordered_json& conv, const nlohmann::ordered_json& tmpl, bool agp,
                           std::string& messages, std::string& tools, std::string& extra) {
  messages = conv["messages"].dump();
  tools = conv.contains("tools") ? conv["tools"].dump() : "";
  nlohmann::ordered_json x = tmpl["context"];
  if (conv.contains("extra")) {
    for (const auto& [k, v] : conv["extra"].items()) x[k] = v;
  }
  extra = x.empty() ? "" : x.dump();
  ChatInput in;
  in.messages_json = messages;
  in.tools_json = tools;
  in.extra_json = extra;
  in.add_generation_prompt = agp;
  in.bos_token = tmpl["bos_token"].get_ref<const std::string&>();
  in.eos_token = tmpl["eos_token"].get_ref<const std::string&>();
  in.now = fixed_now();
  return in;
}

}  // namespace llmsvc::jinja::testing
