// SPDX-License-Identifier: Apache-2.0
// bench_attacks: the adversarial suite's attacks (tests/adversarial/attacks.h) as a table, run
// against a given llmsvcd binary at its defaults (only the KV budget set), a fresh daemon per
// attack (with systemd's default descriptor limits, 1024 raisable to 524288), while honest
// apps (other uids) call: the daemon's RSS growth (peak over the start)
// and what it still holds after the attack, the honest calls' median latency before and during
// (and their errors, and the ratio), the daemon's CPU time per second before and during (how
// much of its work the attacker takes), and what the attacker met. Run it on an old binary and the current one
// for the before/after table:
//
//   bench_attacks [--llmsvcd PATH] [--old] [--seconds S] [--json FILE] [--only NAME,...]
//
// --old: the binary predates --allow-root (started as root without it). Needs root (the
// attackers and honest apps are other uids).
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/adversarial/attacks.h"
#include "tests/common/proc_status.h"
#include "tests/service/daemon_process.h"

using namespace llmsvc::test;

namespace {

constexpr double kMiB = 1 << 20;

struct Options {
  std::string binary = LLMSVCD_PATH;
  bool old = false;
  double seconds = 15;
  std::string json;
  std::string only;
};

struct Row {
  std::string attack;
  double growth_mib = 0, held_mib = 0;
  double p50_before = 0, p50_during = 0;
  double cpu_before = 0, cpu_during = 0;  // the daemon's CPU seconds per second
  int honest_calls = 0, honest_errors = 0;
  std::string outcome, extra;
};

std::string temp_dir() {
  std::string t = "/tmp/llmsvc-attacks-XXXXXX";
  return ::mkdtemp(t.data()) ? t : "";
}

Row run_one(const Options& opt, const std::string& name, int honest_apps,
            const std::function<AttackOutcome(const Target&, std::string& extra)>& attack) {
  Row row;
  row.attack = name;
  const std::string dir = temp_dir();
  ::chmod(dir.c_str(), 0711);  // other uids reach the socket
  {
    std::ofstream(dir + "/llmsvcd.toml") << "kv_budget_bytes = " << (64u << 20) << "\n";
  }
  DaemonProcess d(dir, {"--config", dir + "/llmsvcd.toml"});
  d.set_binary(opt.binary, !opt.old);
  // systemd's default for services: 1024 descriptors, which a daemon may raise to 524288.
  d.before_exec([] {
    const rlimit nofile{1024, 524288};
    (void)::setrlimit(RLIMIT_NOFILE, &nofile);
  });
  if (!d.start()) {
    row.outcome = "daemon did not start (" + d.log_path() + ")";
    return row;
  }
  const Target t{d.socket_path(), d.state_dir(), d.log_path(), d.pid()};
  HonestApps honest(t, honest_apps, 20000);
  std::string why;
  if (!honest.start(&why)) {
    row.outcome = "honest apps could not start: " + why;
    return row;
  }
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  double cpu0 = proc_cpu_seconds(d.pid());
  auto t0 = Clock::now();
  honest.run();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  honest.stop();
  row.cpu_before = (proc_cpu_seconds(d.pid()) - cpu0) / seconds_since(t0);
  row.p50_before = honest.p50_ms();
  const uint64_t before = proc_status_bytes(d.pid(), "VmRSS");
  RssSampler rss(d.pid());
  cpu0 = proc_cpu_seconds(d.pid());
  t0 = Clock::now();
  honest.run();
  std::string extra;
  const AttackOutcome o = attack(t, extra);
  honest.stop();
  row.cpu_during = (proc_cpu_seconds(d.pid()) - cpu0) / seconds_since(t0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // what the daemon keeps after
  rss.stop();
  row.growth_mib = (static_cast<double>(rss.peak()) - static_cast<double>(before)) / kMiB;
  row.held_mib = (static_cast<double>(proc_status_bytes(d.pid(), "VmRSS")) - static_cast<double>(before)) / kMiB;
  row.p50_during = honest.p50_ms();
  row.honest_calls = honest.calls();
  row.honest_errors = honest.errors();
  row.outcome = o.summary();
  row.extra = extra;
  if (row.honest_errors > 0) row.extra += (row.extra.empty() ? "" : "; ") + std::string("honest: ") + honest.first_error();
  (void)d.kill_and_wait(SIGTERM);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--llmsvcd") opt.binary = value();
    else if (a == "--old") opt.old = true;
    else if (a == "--seconds") opt.seconds = std::stod(value());
    else if (a == "--json") opt.json = value();
    else if (a == "--only") opt.only = std::string(",").append(value()).append(",");
    else {
      std::fprintf(stderr, "usage: bench_attacks [--llmsvcd PATH] [--old] [--seconds S] [--json FILE] [--only A,B]\n");
      return 2;
    }
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr, "bench_attacks: needs root (attackers and honest apps are other uids)\n");
    return 2;
  }
  AttackPlan plan;
  plan.seconds = opt.seconds;
  struct Case {
    std::string name;
    std::function<AttackOutcome(const Target&, std::string&)> run;
  };
  const std::vector<Case> cases = {
      {"flood-1", [&](const Target& t, std::string&) { return flood_without_reading(t, plan, 1); }},
      {"flood-4", [&](const Target& t, std::string&) { return flood_without_reading(t, plan, 4); }},
      {"trickle-2", [&](const Target& t, std::string&) { return trickle_reader(t, plan, 2); }},
      {"claimed-500", [&](const Target& t, std::string&) { return claimed_length_headers(t, plan, 500, 1); }},
      {"descriptors-2000",
       [&](const Target& t, std::string& extra) {
         AttackPlan p = plan;
         p.seconds = 3;
         AttackOutcome o = descriptor_exhaustion(t, p, 2000);
         HonestApps late(t, 1, 21000);  // a new app while the attacker holds what it got
         std::string why;
         extra = late.start(&why) ? "a new app binds" : "a new app cannot bind: " + why;
         return o;
       }},
      {"contexts-8KiB",
       [&](const Target& t, std::string& extra) {
         AttackOutcome o = context_flood(t, plan, 8u << 10);
         extra = "disk " + std::to_string(static_cast<int>(tree_bytes(t.state_dir + "/contexts/uid-" +
                                                                      std::to_string(plan.attacker_uid)) /
                                                           kMiB)) +
                 " MiB";
         return o;
       }},
      {"log-2000",
       [&](const Target& t, std::string& extra) {
         const size_t before = log_lines(t.log_path);
         AttackOutcome o = log_flood(t, plan, 2000);
         std::this_thread::sleep_for(std::chrono::seconds(1));
         extra = std::to_string(log_lines(t.log_path) - before) + " log lines";
         return o;
       }},
      {"interleaved-32", [&](const Target& t, std::string&) { return interleaved_frames(t, plan, 32, 8); }},
  };
  std::printf("binary: %s\n\n", opt.binary.c_str());
  std::printf("| attack | RSS growth MiB | held after MiB | honest p50 ms before -> during (x) | daemon CPU s/s before -> during | honest calls / errors | attacker met | notes |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  nlohmann::json rows = nlohmann::json::array();
  for (const Case& c : cases) {
    if (!opt.only.empty() && opt.only.find("," + c.name + ",") == std::string::npos) continue;
    const Row r = run_one(opt, c.name, 4, c.run);
    std::printf("| %s | %+.1f | %+.1f | %.0f -> %.0f (%.1fx) | %.2f -> %.2f | %d / %d | %s | %s |\n", r.attack.c_str(),
                r.growth_mib, r.held_mib, r.p50_before, r.p50_during, r.p50_before > 0 ? r.p50_during / r.p50_before : 0.0,
                r.cpu_before, r.cpu_during, r.honest_calls, r.honest_errors, r.outcome.c_str(), r.extra.c_str());
    std::fflush(stdout);
    rows.push_back({{"attack", r.attack},
                    {"rss_growth_mib", r.growth_mib},
                    {"rss_held_mib", r.held_mib},
                    {"honest_p50_before_ms", r.p50_before},
                    {"honest_p50_during_ms", r.p50_during},
                    {"daemon_cpu_before", r.cpu_before},
                    {"daemon_cpu_during", r.cpu_during},
                    {"honest_calls", r.honest_calls},
                    {"honest_errors", r.honest_errors},
                    {"outcome", r.outcome},
                    {"notes", r.extra}});
  }
  if (!opt.json.empty()) std::ofstream(opt.json) << nlohmann::json{{"binary", opt.binary}, {"rows", rows}}.dump(2) << "\n";
  return 0;
}
