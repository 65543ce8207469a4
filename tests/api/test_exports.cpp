// SPDX-License-Identifier: Apache-2.0
// libllmsvc.so exports exactly the llmsvc_* functions of llmsvc.h and nothing else
// (no C++ symbols from the static core, no libstdc++ template instances).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <set>
#include <string>

namespace {

// A version node the version script defines: LLMSVC_1, LLMSVC_1.2, ...
bool is_version_node(const std::string& n) { return n == "LLMSVC_1" || n.rfind("LLMSVC_1.", 0) == 0; }

// Dynamic symbols defined by the library, versions stripped ("llmsvc_bind@@LLMSVC_1") unless
// `keep_versions`.
std::set<std::string> exported_symbols(const std::string& lib, bool keep_versions = false) {
  std::set<std::string> names;
  std::string cmd = "nm -D --defined-only '" + lib + "' 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) return names;
  char line[4096];
  while (fgets(line, sizeof line, pipe.get())) {
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    // "ADDRESS TYPE NAME"; the name is the last field.
    auto space = s.rfind(' ');
    std::string name = space == std::string::npos ? s : s.substr(space + 1);
    if (auto at = name.find('@'); at != std::string::npos && !keep_versions) name.resize(at);
    names.insert(name);
  }
  return names;
}

TEST(Exports, OnlyLlmsvcSymbols) {
  auto names = exported_symbols(LLMSVC_SHARED_LIB);
  ASSERT_FALSE(names.empty()) << "nm found nothing in " << LLMSVC_SHARED_LIB;
  for (const auto& n : names) {
    if (is_version_node(n)) continue;  // the version nodes the version script defines
    EXPECT_EQ(n.rfind("llmsvc_", 0), 0u) << "exported non-API symbol: " << n;
  }
}

TEST(Exports, EveryHeaderFunctionIsExported) {
  const std::set<std::string> api = {
      "llmsvc_abi_version",
      "llmsvc_status_name",
      "llmsvc_last_error",
      "llmsvc_bind_options_init",
      "llmsvc_bind",
      "llmsvc_unbind",
      "llmsvc_context_options_init",
      "llmsvc_context_new",
      "llmsvc_context_open",
      "llmsvc_context_id",
      "llmsvc_context_close",
      "llmsvc_context_delete",
      "llmsvc_context_cancel",
      "llmsvc_context_info_init",
      "llmsvc_context_info_get",
      "llmsvc_context_list",
      "llmsvc_call_options_init",
      "llmsvc_call_result_init",
      "llmsvc_call",
      "llmsvc_stats_init",
      "llmsvc_get_stats",
      // ABI 1.2
      "llmsvc_model_info_init",
      "llmsvc_model_info_get",
      "llmsvc_count_options_init",
      "llmsvc_count_tokens",
      // ABI 1.3
      "llmsvc_message_init",
      "llmsvc_context_append",
      "llmsvc_context_generate",
      "llmsvc_context_truncate",
      "llmsvc_context_messages",
      // ABI 1.4
      "llmsvc_context_fork",
      // ABI 1.6
      "llmsvc_adapter_list",
  };
  auto names = exported_symbols(LLMSVC_SHARED_LIB);
  for (const auto& f : api) EXPECT_TRUE(names.count(f)) << f << " is not exported";
  for (const auto& n : names) {
    if (!is_version_node(n)) {
      EXPECT_TRUE(api.count(n)) << n << " is exported but not in llmsvc.h";
    }
  }
}

// Functions added after 1.0 carry the version of the ABI that added them (runtime/api/llmsvc.map),
// the first ones LLMSVC_1.
TEST(Exports, LaterFunctionsCarryTheirVersion) {
  auto names = exported_symbols(LLMSVC_SHARED_LIB, true);
  for (const char* f : {"llmsvc_model_info_init", "llmsvc_model_info_get", "llmsvc_count_options_init",
                        "llmsvc_count_tokens"})
    EXPECT_TRUE(names.count(std::string(f) + "@@LLMSVC_1.2")) << f;
  for (const char* f : {"llmsvc_message_init", "llmsvc_context_append", "llmsvc_context_generate",
                        "llmsvc_context_truncate", "llmsvc_context_messages"})
    EXPECT_TRUE(names.count(std::string(f) + "@@LLMSVC_1.3")) << f;
  EXPECT_TRUE(names.count("llmsvc_context_fork@@LLMSVC_1.4"));
  EXPECT_TRUE(names.count("llmsvc_adapter_list@@LLMSVC_1.6"));
  EXPECT_TRUE(names.count("llmsvc_call@@LLMSVC_1"));
}

}  // namespace
