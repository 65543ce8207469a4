// SPDX-License-Identifier: Apache-2.0
// llmsvcd: the llmsvc daemon. One shared model; apps reach it through llmsvc.h bound to
// "unix:PATH". Listens on the sockets systemd passes, or on --listen PATH.
#include <cstdlib>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "runtime/core/model/default_model.h"
#include "runtime/core/engine/engine.h"
#include "runtime/core/persist/state_dir.h"
#include "runtime/core/persist/state_root.h"
#include "runtime/service/app_contexts.h"
#include "runtime/service/config.h"
#include "runtime/service/listen_socket.h"
#include "runtime/service/log.h"
#include "runtime/service/memory_bound.h"
#include "runtime/service/memory_pressure.h"
#include "runtime/service/notify.h"
#include "runtime/service/privileges.h"
#include "runtime/service/server.h"
#include "runtime/service/syscall_filter.h"

using namespace llmsvc;
using namespace llmsvc::service;

namespace {

int fail(const Status& st) {
  log_line(st.message());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"llmsvcd: the llmsvc daemon (one shared on-device LLM for every app)"};
  std::string config_file, listen, state_dir, model, device, socket_mode, user;
  int threads = -1;
  bool no_syscall_filter = false, allow_root = false;
  int64_t idle_ms = -1, exit_idle_ms = -1, stop_ms = -1, max_calls = -1, write_timeout_ms = -1, max_unsent = -1;
  app.add_option("--config", config_file, "TOML configuration file (flags override it)");
  app.add_option("--listen", listen, "Unix socket path to listen on (unless systemd passes sockets)");
  app.add_option("--socket-mode", socket_mode, "permissions of the socket it creates (octal, default 0666)");
  app.add_option("--state-dir", state_dir, "where the apps' contexts live");
  bool fix_state_permissions = false;
  app.add_flag("--fix-state-permissions", fix_state_permissions,
               "a state directory of ours that others can write: chmod it 0700 instead of refusing");
  app.add_option("--model", model, "GGUF model (default: the default model)");
  app.add_option("--threads", threads, "engine threads (0: all CPUs)");
  app.add_option("--device", device, "the devices that run the model, comma-separated (default: cpu)");
  app.add_option("--idle-timeout-ms", idle_ms, "close connections idle this long (0: never)");
  app.add_option("--exit-idle-ms", exit_idle_ms, "socket-activated: exit after this long without clients (0: never)");
  app.add_option("--stop-timeout-ms", stop_ms, "on SIGTERM, how long calls in flight may go on");
  app.add_option("--max-calls", max_calls, "calls in flight per connection")->check(CLI::Range(1, 1024));
  app.add_option("--write-timeout-ms", write_timeout_ms, "disconnect a client that reads no answer this long")
      ->check(CLI::Range(100, 3600000));
  app.add_option("--max-unsent-bytes", max_unsent, "answers a connection may leave unread before its calls wait")
      ->check(CLI::Range(64 << 10, 1 << 30));
  app.add_option("--user", user, "started as root: the unprivileged user to run as (name or uid)");
  app.add_flag("--allow-root", allow_root, "started as root without --user: stay uid 0 (without capabilities)");
  app.add_flag("--no-syscall-filter", no_syscall_filter, "run without the seccomp allowlist (debugging only)");
  CLI11_PARSE(app, argc, argv);

  DaemonConfig cfg;
  if (!config_file.empty())
    if (Status st = load_config_file(config_file, cfg); !st.ok()) return fail(st);
  if (!listen.empty()) cfg.listen = listen;
  if (!state_dir.empty()) cfg.state_dir = state_dir;
  if (fix_state_permissions) cfg.fix_state_permissions = true;
  if (!model.empty()) cfg.model = model;
  if (!device.empty()) cfg.devices = {device};
  if (!user.empty()) cfg.user = user;
  if (allow_root) cfg.allow_root = true;
  if (!socket_mode.empty()) {
    auto m = parse_mode(socket_mode);
    if (!m.ok()) return fail(m.status());
    cfg.socket_mode = *m;
  }
  if (threads >= 0) cfg.threads = threads;
  if (idle_ms >= 0) cfg.idle_timeout_ms = static_cast<uint32_t>(idle_ms);
  if (exit_idle_ms >= 0) cfg.exit_idle_ms = static_cast<uint32_t>(exit_idle_ms);
  if (stop_ms >= 0) cfg.stop_timeout_ms = static_cast<int>(stop_ms);
  if (max_calls > 0) cfg.max_calls = static_cast<uint32_t>(max_calls);
  if (write_timeout_ms > 0) cfg.write_timeout_ms = static_cast<int>(write_timeout_ms);
  if (max_unsent > 0) cfg.max_unsent_bytes = static_cast<uint64_t>(max_unsent);

  // Who it will run as, decided now (the user looked up): as root with no user to switch to
  // and no allow_root, it refuses here.
  auto privileges = plan_privileges(cfg.user, cfg.allow_root);
  if (!privileges.ok()) return fail(privileges.status());

  // Signals are taken by the event loop's signalfd: blocked here, before any thread starts.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  auto passed = systemd_listen_fds();
  if (!passed.ok()) return fail(passed.status());
  if (passed->empty() && cfg.listen.empty())
    return fail(Status(Code::invalid_argument, "nothing to listen on: give --listen PATH or run under systemd"));
  // Bound while still privileged (its directory may be root's); listening comes with serving
  // (a failed start-up removes the file again).
  std::optional<BoundUnixSocket> bound;
  if (passed->empty()) {
    auto b = BoundUnixSocket::bind(cfg.listen, cfg.socket_mode);
    if (!b.ok()) return fail(b.status());
    bound.emplace(std::move(b).value());
  }

  auto model_path = resolve_model_path(cfg.model);
  if (!model_path.ok()) return fail(model_path.status());
  auto root = persist::resolve_state_root(cfg.state_dir);
  if (!root.ok()) return fail(root.status());
  // Privileges go before the state directory is touched and the engine starts its threads
  // (capabilities are per thread), so every state file is the unprivileged user's. Switching
  // user, a state root yet to be made is made now, as that user's.
  if (Status st = make_state_root_for(*root, *privileges); !st.ok()) return fail(st);
  auto dropped = drop_privileges(*privileges);
  if (!dropped.ok()) return fail(dropped.status());
  log_line(*dropped);
  // The root must be ours and closed to others (persist/state_root.h); made 0700 if absent.
  auto checked_root = persist::open_state_root(*root, cfg.fix_state_permissions);
  if (!checked_root.ok()) return fail(checked_root.status());
  if (!checked_root->fixed.empty()) log_line(checked_root->fixed);

  // PoCL (the OpenCL device on CPUs, and in CI) links each kernel it runs into a shared
  // object by running /usr/bin/ld, which the system-call filter refuses (no execve, no
  // fork), and only at a kernel's first launch for each work-group size, so after the filter
  // is on. Without specialization it makes one generic object a kernel, all of them when the
  // program's binary is read (the program cache stores it after every compile; a program
  // loaded from that binary brings them along): every link then happens in Engine::create,
  // before the filter. Its cache goes into the state root: the daemon loads code from it,
  // so it must be the checked 0700 directory (not $XDG_CACHE_HOME, which ProtectHome= makes
  // read-only anyway). Set before PoCL reads them at the first OpenCL call; other OpenCL
  // implementations ignore both.
  if (::setenv("POCL_WORK_GROUP_SPECIALIZATION", "0", 1) != 0 ||
      ::setenv("POCL_CACHE_DIR", (*root + "/cache/pocl").c_str(), 1) != 0)
    return fail(Status(Code::internal, "setting PoCL's environment failed"));
  // NVIDIA's OpenCL gives a program's binary as PTX, so what the program cache keeps is turned
  // into GPU code again at every load unless the driver's own compute cache can be written: by
  // default under $HOME, which a dynamic user lacks and ProtectHome= makes read-only. Without
  // it llmsvcd spent 7-22 s opening an H100 at every start, with it 0.25 s
  // (docs/measurements/2026-11-27-opencl-int8-gemm.md). So it goes into the state root too,
  // unless the environment names one.
  if (::setenv("CUDA_CACHE_PATH", (*root + "/cache/nvidia").c_str(), 0) != 0)
    return fail(Status(Code::internal, "setting the CUDA compute cache's path failed"));
  EngineOptions eo;
  eo.model_path = *model_path;
  eo.n_threads = cfg.threads;
  for (const std::string& d : cfg.devices) eo.device += (eo.device.empty() ? "" : ",") + d;
  eo.placement = cfg.placement;
  eo.adapters = cfg.adapters;
  eo.n_ctx = cfg.n_ctx;
  eo.kv_budget_bytes = cfg.kv_budget_bytes;
  eo.kv_ratio = cfg.kv_ratio;
  eo.kv_share = cfg.quotas.defaults.kv_share;
  eo.swap_bytes = cfg.quotas.defaults.swap_bytes;
  for (const auto& [uid, q] : cfg.quotas.by_uid) {
    eo.kv_share_by_scope[AppIdentity::scope_of(uid)] = q.kv_share;
    eo.swap_bytes_by_scope[AppIdentity::scope_of(uid)] = q.swap_bytes;
  }
  eo.state_dir = *root;
  auto engine = Engine::create(eo);
  if (!engine.ok()) return fail(engine.status());
  std::string devices;
  for (const std::string& d : (*engine)->device_names()) devices += (devices.empty() ? "" : ", ") + d;
  log_line("model " + *model_path + ", state " + *root + ", devices " + devices);

  AppContexts apps(**engine, cfg.quotas);
  ServerOptions so;
  so.model_name = model_path->substr(model_path->find_last_of('/') + 1);
  so.max_calls = cfg.max_calls;
  so.quotas = cfg.quotas;
  so.idle_timeout_ms = cfg.idle_timeout_ms;
  so.stop_timeout_ms = cfg.stop_timeout_ms;
  so.write_timeout_ms = cfg.write_timeout_ms;
  so.max_unsent_bytes = cfg.max_unsent_bytes;
  so.min_rate_bytes_per_s = cfg.min_rate_bytes_per_s;
  so.rate_window_ms = cfg.rate_window_ms;
  so.max_connections = cfg.max_connections;
  so.fd_reserve = cfg.fd_reserve;
  so.watchdog_us = watchdog_interval_us();
  if (!passed->empty()) so.exit_idle_ms = cfg.exit_idle_ms;  // systemd keeps the socket and restarts us
  {
    const MemoryBound mb = memory_bound(so, static_cast<uint32_t>((*engine)->n_ctx()),
                                        static_cast<uint32_t>((*engine)->max_piece_bytes()));
    auto mib = [](uint64_t b) { return std::to_string((b + (1u << 19)) >> 20) + " MiB"; };
    log_line("memory bound beyond the model and the KV budget: " + mib(mb.per_connection) + " a connection, " +
             mib(mb.per_app) + " an app (its connections and contexts)" +
             (mb.contexts_bounded ? "" : "; warning: no contexts quota, so nothing bounds what an app's closed contexts hold"));
  }
  Server server(apps, so);
  // systemd's memory-pressure protocol (memory_pressure.h): pressure gives back what the
  // engine can remake. A source that cannot be watched is logged, and the daemon runs on.
  if (auto mp = MemoryPressure::open(std::getenv("MEMORY_PRESSURE_WATCH"), std::getenv("MEMORY_PRESSURE_WRITE"));
      !mp.ok()) {
    log_line("memory pressure not watched: " + mp.status().message());
  } else {
    log_line("memory pressure: " + mp->describe());
    Engine& e = **engine;
    server.watch_memory_pressure(std::move(mp).value(), [&e] { return e.trim_weights(); });
  }
  if (!passed->empty()) {
    for (const PassedSocket& p : *passed) {
      server.add_listener(p.fd);
      log_line("listening on the socket systemd passed ('" + p.name + "')");
    }
  } else {
    auto fd = bound->listen();
    if (!fd.ok()) return fail(fd.status());
    server.add_listener(*fd, cfg.listen);
    log_line("listening on " + cfg.listen);
  }
  // Start-up is done (model mapped, listeners open, threads running): from here on only the
  // allowlisted system calls.
  if (!no_syscall_filter) {
    SyscallFilterOptions fo;
    fo.allow_ioctl = (*engine)->devices_need_ioctl();
    auto filter = install_syscall_filter(fo);
    if (!filter.ok()) return fail(filter.status());
    log_line("system-call filter on (" + *filter + (fo.allow_ioctl ? "; ioctl allowed for the GPU driver" : "") + ")");
  }
  return server.run();
}
