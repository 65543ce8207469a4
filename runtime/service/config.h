// SPDX-License-Identifier: Apache-2.0
// DaemonConfig: what llmsvcd runs with. Read from a TOML file (--config), then overridden by
// command-line flags. Keys (all optional):
//
//   model = "/path/model.gguf"        # default: the default model (LLMSVC_MODEL_DIR, ~/.cache)
//   state_dir = "/var/lib/llmsvc"     # default: $LLMSVC_STATE_DIR, XDG state, ~/.local/state
//   fix_state_permissions = false     # a state_dir of ours its group or others can write:
//                                     #   chmod it 0700 instead of refusing to start (another
//                                     #   user's is refused always, never chowned)
//   listen = "/run/llmsvc/llmsvc.sock"  # ignored when systemd passes sockets
//   socket_mode = "0666"              # permissions of a socket llmsvcd creates
//   user = "llmsvc"                   # started as root: the unprivileged user (name or uid) it
//                                     #   switches to once its socket is bound
//   allow_root = false                # started as root without `user`: run on as uid 0 (still
//                                     #   without capabilities) instead of refusing
//   threads = 0                       # engine threads; 0: all CPUs
//   n_ctx = 0                         # tokens per context; 0: the model's trained length
//   kv_budget_bytes = 0               # all contexts' resident KV; 0: no limit
//   kv_ratio = 0.5                    # KV compression (average bits / 8); < 0: none
//   idle_timeout_ms = 120000          # close connections idle this long (no request, nothing
//                                     #   sent; libllmsvc pings an idle one); 0: never
//   exit_idle_ms = 0                  # socket-activated: exit after this long without clients; 0: never
//   max_calls = 4                     # calls in flight per connection
//   stop_timeout_ms = 5000            # SIGTERM: how long in-flight calls may go on
//   max_unsent_bytes = 262144         # a connection's answers not yet read: past this its
//                                     #   calls wait and its requests are not read
//   write_timeout_ms = 30000          # a client that reads nothing this long while answers
//                                     #   wait is disconnected (its calls cancelled)
//   min_rate_bytes_per_s = 4096       # a client owing bytes (answers unread, a frame begun)
//   rate_window_ms = 10000            #   must move this many a second over each window
//   max_connections = 0               # connections at once, all apps; 0: the descriptor limit
//                                     #   less fd_reserve
//   fd_reserve = 64                   # descriptors kept for the daemon's own files
//   [adapters]                        # LoRA adapters offered to apps, by name (sorted):
//   summarize = "/usr/share/llmsvc/adapters/summarize.gguf"  # NAME = GGUF path; NAME 1..64 of
//                                     #   [A-Za-z0-9._-]; a bad file stops the start
//   [quotas]                          # per app (uid), each; 0: no limit (QUOTA_EXCEEDED past one)
//   contexts = 64                     # contexts held, open or stored
//   context_tokens = 0                # tokens in one context (0: the engine's n_ctx)
//   concurrent_calls = 8              # calls in flight on all its connections
//   connections = 8                   # connections open at once
//   kv_share = 0.5                    # fraction of kv_budget_bytes its contexts hold resident
//   [quotas.app.NAME]                 # one app's own limits: NAME a user name or uid; the same
//   contexts = 64                     #   keys, and those it leaves out keep the [quotas] values
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "runtime/service/app_quotas.h"

namespace llmsvc::service {

struct DaemonConfig {
  std::string model;
  // The devices that run the model, by spec (hal/devices/device_registry.h), in order of
  // preference; empty: the default. With several, `placement` (hal/placement.h) says how ops
  // are spread: "" by capability and cost, "layers:N", "ops:KIND[+KIND...]".
  std::vector<std::string> devices;
  std::string placement;
  std::vector<std::pair<std::string, std::string>> adapters;  // (name, path), by name
  std::string state_dir;
  bool fix_state_permissions = false;  // persist/state_root.h: chmod 0700 rather than refuse
  std::string listen;
  mode_t socket_mode = 0666;
  std::string user;         // started as root: switch to this user (privileges.h)
  bool allow_root = false;  // started as root without `user`: stay uid 0, without capabilities
  int threads = 0;
  int n_ctx = 0;
  uint64_t kv_budget_bytes = 0;
  double kv_ratio = 0.5;
  uint32_t idle_timeout_ms = 120000;
  uint32_t exit_idle_ms = 0;  // only when systemd passed the sockets (it starts us again)
  uint32_t max_calls = 4;
  int stop_timeout_ms = 5000;
  uint64_t max_unsent_bytes = 256u << 10;
  int write_timeout_ms = 30000;
  uint32_t min_rate_bytes_per_s = 4096;
  int rate_window_ms = 10000;
  uint32_t max_connections = 0;
  uint32_t fd_reserve = 64;
  QuotaTable quotas;
};

// Applies the keys of the TOML file `path` over `config`. Unknown keys are refused (a typo
// must not silently fall back to a default).
Status load_config_file(const std::string& path, DaemonConfig& config);
// A user name or a decimal uid, as the system's user database knows it.
Result<uid_t> resolve_user(const std::string& name);
// Parses "0666"-style octal permissions.
Result<mode_t> parse_mode(const std::string& text);

}  // namespace llmsvc::service
