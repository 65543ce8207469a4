// SPDX-License-Identifier: Apache-2.0
// What the daemon benchmarks share: flags, order statistics, a daemon of their own in a
// temporary directory (tests/service/daemon_process.h), /proc figures, JSON output.
// The benchmarks themselves use only llmsvc.h and libllmsvc, like an app.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llmsvc/llmsvc.h"
#include "tests/common/proc_status.h"
#include "tests/service/daemon_process.h"

namespace llmsvc::bench {

using Clock = std::chrono::steady_clock;
using test::proc_status_bytes;

inline double ms_since(Clock::time_point t0, Clock::time_point t1 = Clock::now()) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// --name value pairs over defaults; an unknown name or a missing value is an error.
class Flags {
 public:
  Flags(std::map<std::string, std::string> defaults, std::string usage)
      : values_(std::move(defaults)), usage_(std::move(usage)) {}
  bool parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--help" || a == "-h" || a.rfind("--", 0) != 0 || !values_.count(a.substr(2)) || i + 1 >= argc) {
        std::fprintf(stderr, "%s%s\n", a == "--help" || a == "-h" ? "" : ("bad argument " + a + "\n").c_str(),
                     usage_.c_str());
        return false;
      }
      values_[a.substr(2)] = argv[++i];
    }
    return true;
  }
  const std::string& str(const std::string& name) const { return values_.at(name); }
  int integer(const std::string& name, int min = 0) const { return std::max(min, std::atoi(str(name).c_str())); }
  double number(const std::string& name) const { return std::atof(str(name).c_str()); }
  nlohmann::json json() const { return nlohmann::json(values_); }

 private:
  std::map<std::string, std::string> values_;
  std::string usage_;
};

// The p-th percentile (0..100) by nearest rank; 0 for no samples.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}
inline double median(const std::vector<double>& v) { return percentile(v, 50); }

inline nlohmann::json summary(const std::vector<double>& v) {
  return {{"n", v.size()},
          {"min", percentile(v, 0)},
          {"p50", percentile(v, 50)},
          {"p90", percentile(v, 90)},
          {"p99", percentile(v, 99)},
          {"max", v.empty() ? 0.0 : *std::max_element(v.begin(), v.end())}};
}

inline uint64_t file_bytes(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
}

// A fresh directory under $TMPDIR (or /tmp); exits on failure.
inline std::string temp_dir(const char* name) {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + name + "-XXXXXX";
  if (!::mkdtemp(tmpl.data())) {
    std::perror("mkdtemp");
    std::exit(1);
  }
  return tmpl;
}

// A daemon of the benchmark's own: its socket, state and log in `dir`, the model and engine
// threads given, any further flags in `args`. Exits when it does not come up.
inline std::unique_ptr<test::DaemonProcess> start_daemon(const std::string& dir, const std::string& model, int threads,
                                                         std::vector<std::string> args = {}) {
  auto d = std::make_unique<test::DaemonProcess>(dir, std::move(args));
  d->set_model(model);
  d->set_threads(threads);
  if (!d->start()) {
    std::fprintf(stderr, "llmsvcd did not start; see %s\n", d->log_path().c_str());
    std::exit(1);
  }
  return d;
}

// SIGTERM; true when it exited 0.
inline bool stop_daemon(test::DaemonProcess& d) {
  const int status = d.kill_and_wait(SIGTERM);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

inline llmsvc_service* bind_or_exit(const llmsvc_bind_options& o) {
  llmsvc_service* svc = nullptr;
  if (llmsvc_bind(&o, &svc) != LLMSVC_OK) {
    std::fprintf(stderr, "bind %s: %s\n", o.target, llmsvc_last_error());
    std::exit(1);
  }
  return svc;
}

inline llmsvc_context* new_context_or_exit(llmsvc_service* svc, const std::string& id, bool raw) {
  llmsvc_context_options o;
  llmsvc_context_options_init(&o);
  o.id = id.c_str();
  o.raw = raw;
  llmsvc_context* ctx = nullptr;
  if (llmsvc_context_new(svc, &o, &ctx) != LLMSVC_OK) {
    std::fprintf(stderr, "context %s: %s\n", id.c_str(), llmsvc_last_error());
    std::exit(1);
  }
  return ctx;
}

inline void write_json(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return;
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) std::fprintf(stderr, "could not write %s\n", path.c_str());
  else std::printf("JSON written to %s\n", path.c_str());
}

}  // namespace llmsvc::bench
