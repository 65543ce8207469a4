// SPDX-License-Identifier: Apache-2.0
// The TOML configuration file (toml++).
#include "runtime/service/config.h"

#include <pwd.h>
#include <toml++/toml.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <vector>

#include "base/file_io.h"
#include "runtime/core/engine/call_types.h"
#include "runtime/core/engine/info_types.h"

namespace llmsvc::service {
namespace {

Status bad(const std::string& path, const std::string& what) {
  return Status(Code::invalid_argument, path + ": " + what);
}

}  // namespace

Result<uid_t> resolve_user(const std::string& name) {
  if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos) {
    if (name.size() > 10) return Status(Code::invalid_argument, "uid " + name + " is out of range");
    const unsigned long long v = std::stoull(name);
    if (v >= static_cast<unsigned long long>(static_cast<uid_t>(-1)))
      return Status(Code::invalid_argument, "uid " + name + " is out of range");
    return static_cast<uid_t>(v);
  }
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  const int rc = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0) return Status(Code::io, "looking up user '" + name + "': " + fileio::errno_text(rc));
  if (!found) return Status(Code::not_found, "no user '" + name + "' (name a user of this system, or a uid)");
  return found->pw_uid;
}

Result<mode_t> parse_mode(const std::string& text) {
  if (text.empty() || text.size() > 4) return Status(Code::invalid_argument, "socket mode '" + text + "' is not octal");
  mode_t m = 0;
  for (char c : text) {
    if (c < '0' || c > '7') return Status(Code::invalid_argument, "socket mode '" + text + "' is not octal");
    m = m * 8 + static_cast<mode_t>(c - '0');
  }
  return m;
}

Status load_config_file(const std::string& path, DaemonConfig& c) {
  toml::table t;
  try {
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << e.description() << " (line " << e.source().begin.line << ")";
    return bad(path, os.str());
  }
  static const std::set<std::string> kKeys = {"model", "state_dir", "listen", "socket_mode", "threads", "n_ctx",
                                              "fix_state_permissions",
                                              "user", "allow_root",
                                              "kv_budget_bytes", "kv_ratio", "idle_timeout_ms", "exit_idle_ms", "max_calls",
                                              "stop_timeout_ms", "max_unsent_bytes", "write_timeout_ms", "quotas",
                                              "min_rate_bytes_per_s", "rate_window_ms", "max_connections", "fd_reserve",
                                              "devices", "placement", "adapters"};
  for (const auto& [k, v] : t) {
    if (!kKeys.count(std::string(k.str()))) return bad(path, "unknown key '" + std::string(k.str()) + "'");
  }
  auto text = [&](const char* k, std::string& out) -> Status {
    if (!t.contains(k)) return Status::Ok();
    auto v = t[k].value<std::string>();
    if (!v) return bad(path, std::string(k) + " must be a string");
    out = *v;
    return Status::Ok();
  };
  // An integer key of table `in` (named `where` in messages).
  auto integer_in = [&](const toml::table& in, const std::string& where, const char* k, int64_t lo, int64_t hi,
                        auto& out) -> Status {
    if (!in.contains(k)) return Status::Ok();
    auto v = in[k].value<int64_t>();
    if (!v || *v < lo || *v > hi)
      return bad(path, where + k + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out = static_cast<std::remove_reference_t<decltype(out)>>(*v);
    return Status::Ok();
  };
  auto integer = [&](const char* k, int64_t lo, int64_t hi, auto& out) { return integer_in(t, "", k, lo, hi, out); };
  LLMSVC_RETURN_IF_ERROR(text("model", c.model));
  if (t.contains("devices")) {
    const toml::array* list = t["devices"].as_array();
    if (!list) return bad(path, "devices must be a list of device names (devices = [\"cpu\"])");
    std::vector<std::string> devices;
    for (const auto& d : *list) {
      auto name = d.value<std::string>();
      if (!name || name->empty()) return bad(path, "devices must be a list of device names (devices = [\"cpu\"])");
      if (std::find(devices.begin(), devices.end(), *name) != devices.end() || name->find(',') != std::string::npos)
        return bad(path, "devices: each device once, one per entry");
      devices.push_back(*name);
    }
    c.devices = std::move(devices);
  }
  LLMSVC_RETURN_IF_ERROR(text("placement", c.placement));
  LLMSVC_RETURN_IF_ERROR(text("state_dir", c.state_dir));
  if (t.contains("fix_state_permissions")) {
    auto v = t["fix_state_permissions"].value<bool>();
    if (!v) return bad(path, "fix_state_permissions must be true or false");
    c.fix_state_permissions = *v;
  }
  LLMSVC_RETURN_IF_ERROR(text("listen", c.listen));
  LLMSVC_RETURN_IF_ERROR(text("user", c.user));
  if (t.contains("allow_root")) {
    auto v = t["allow_root"].value<bool>();
    if (!v) return bad(path, "allow_root must be true or false");
    c.allow_root = *v;
  }
  std::string mode;
  LLMSVC_RETURN_IF_ERROR(text("socket_mode", mode));
  if (!mode.empty()) {
    auto m = parse_mode(mode);
    if (!m.ok()) return bad(path, m.status().message());
    c.socket_mode = *m;
  }
  LLMSVC_RETURN_IF_ERROR(integer("threads", 0, 1024, c.threads));
  LLMSVC_RETURN_IF_ERROR(integer("n_ctx", 0, 1 << 20, c.n_ctx));
  LLMSVC_RETURN_IF_ERROR(integer("kv_budget_bytes", 0, INT64_MAX, c.kv_budget_bytes));
  LLMSVC_RETURN_IF_ERROR(integer("idle_timeout_ms", 0, UINT32_MAX, c.idle_timeout_ms));
  LLMSVC_RETURN_IF_ERROR(integer("exit_idle_ms", 0, UINT32_MAX, c.exit_idle_ms));
  LLMSVC_RETURN_IF_ERROR(integer("max_calls", 1, 1024, c.max_calls));
  LLMSVC_RETURN_IF_ERROR(integer("stop_timeout_ms", 0, 600000, c.stop_timeout_ms));
  // Per connection; a frame past it is still queued whole (the bound pauses, never splits).
  LLMSVC_RETURN_IF_ERROR(integer("max_unsent_bytes", 64 << 10, 1 << 30, c.max_unsent_bytes));
  LLMSVC_RETURN_IF_ERROR(integer("write_timeout_ms", 100, 3600000, c.write_timeout_ms));
  LLMSVC_RETURN_IF_ERROR(integer("min_rate_bytes_per_s", 0, 1 << 30, c.min_rate_bytes_per_s));
  LLMSVC_RETURN_IF_ERROR(integer("rate_window_ms", 100, 3600000, c.rate_window_ms));
  LLMSVC_RETURN_IF_ERROR(integer("max_connections", 0, 1 << 24, c.max_connections));
  LLMSVC_RETURN_IF_ERROR(integer("fd_reserve", 16, 1 << 20, c.fd_reserve));
  if (t.contains("quotas")) {
    const toml::table* q = t["quotas"].as_table();
    if (!q) return bad(path, "quotas must be a table ([quotas])");
    // The keys of one app's limits (the defaults, or one override) from `in` over `out`.
    auto quota_keys = [&](const toml::table& in, const std::string& where, AppQuotas& out,
                          bool overrides_allowed) -> Status {
      static const std::set<std::string> kQuotaKeys = {"contexts", "context_tokens", "concurrent_calls",
                                                        "connections", "kv_share", "swap_bytes"};
      for (const auto& [k, v] : in) {
        const std::string key(k.str());
        if (!kQuotaKeys.count(key) && !(overrides_allowed && key == "app"))
          return bad(path, "unknown key '" + where + key + "'");
      }
      LLMSVC_RETURN_IF_ERROR(integer_in(in, where, "contexts", 0, 1 << 20, out.contexts));
      LLMSVC_RETURN_IF_ERROR(integer_in(in, where, "context_tokens", 0, 1 << 20, out.context_tokens));
      LLMSVC_RETURN_IF_ERROR(integer_in(in, where, "concurrent_calls", 0, 1 << 16, out.concurrent_calls));
      LLMSVC_RETURN_IF_ERROR(integer_in(in, where, "connections", 0, 1 << 20, out.connections));
      LLMSVC_RETURN_IF_ERROR(integer_in(in, where, "swap_bytes", 0, INT64_MAX, out.swap_bytes));
      if (in.contains("kv_share")) {
        auto v = in["kv_share"].value<double>();
        if (!v || *v < 0.0 || *v > 1.0) return bad(path, where + "kv_share must be a number in [0, 1]");
        out.kv_share = *v;
      }
      return Status::Ok();
    };
    LLMSVC_RETURN_IF_ERROR(quota_keys(*q, "quotas.", c.quotas.defaults, true));
    if (q->contains("app")) {
      const toml::table* apps = (*q)["app"].as_table();
      if (!apps) return bad(path, "quotas.app must be a table of apps ([quotas.app.NAME])");
      for (const auto& [k, v] : *apps) {
        const std::string name(k.str()), where = "quotas.app." + name + ".";
        const toml::table* one = v.as_table();
        if (!one) return bad(path, "quotas.app." + name + " must be a table");
        auto uid = resolve_user(name);
        if (!uid.ok()) return bad(path, "quotas.app." + name + ": " + uid.status().message());
        if (c.quotas.by_uid.count(*uid)) return bad(path, "quotas.app." + name + ": uid " + std::to_string(*uid) + " named twice");
        AppQuotas app = c.quotas.defaults;
        LLMSVC_RETURN_IF_ERROR(quota_keys(*one, where, app, false));
        c.quotas.by_uid[*uid] = app;
      }
    }
  }
  if (t.contains("adapters")) {
    const toml::table* a = t["adapters"].as_table();
    if (!a) return bad(path, "adapters must be a table of NAME = \"PATH\" ([adapters])");
    for (const auto& [k, v] : *a) {
      const std::string name(k.str());
      if (Status s = check_adapter_name(name, "adapters." + name); !s.ok()) return bad(path, s.message());
      auto file = v.value<std::string>();
      if (!file || file->empty()) return bad(path, "adapters." + name + " must be a file path");
      c.adapters.emplace_back(name, *file);
    }
    if (c.adapters.size() > kMaxAdapters) return bad(path, "adapters: more than " + std::to_string(kMaxAdapters));
  }
  if (t.contains("kv_ratio")) {
    auto v = t["kv_ratio"].value<double>();
    if (!v || *v > 1.0) return bad(path, "kv_ratio must be a number <= 1");
    c.kv_ratio = *v;
  }
  return Status::Ok();
}

}  // namespace llmsvc::service
