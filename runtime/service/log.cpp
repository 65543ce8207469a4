// SPDX-License-Identifier: Apache-2.0
// The daemon's log: native journal entries with fields, or whole lines on stderr.
#include "runtime/service/log.h"

#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace llmsvc::service {
namespace {

// systemd sets JOURNAL_STREAM to "DEV:INODE" of the stream it connected to stderr; a stderr
// redirected elsewhere since (a test's log file, a pipe) does not match it.
bool stderr_is_journal() {
  const char* env = std::getenv("JOURNAL_STREAM");
  if (!env || !*env) return false;
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(env, "%llu:%llu", &dev, &ino) != 2) return false;
  return dev == static_cast<unsigned long long>(st.st_dev) && ino == static_cast<unsigned long long>(st.st_ino);
}

bool to_journal(LogLevel level, std::string_view message, const LogFields& f) {
  std::vector<std::string> fields;
  fields.push_back("MESSAGE=" + std::string(message));
  fields.push_back("PRIORITY=" + std::to_string(static_cast<int>(level)));
  fields.emplace_back("SYSLOG_IDENTIFIER=llmsvcd");
  if (f.app) {
    fields.push_back("LLMSVC_APP=" + f.app->label());
    fields.push_back("LLMSVC_UID=" + std::to_string(f.app->uid));
    fields.push_back("LLMSVC_PID=" + std::to_string(f.app->pid));
    if (!f.app->unit.empty()) fields.push_back("LLMSVC_UNIT=" + f.app->unit);
    if (!f.app->exe.empty()) fields.push_back("LLMSVC_EXE=" + f.app->exe);
  }
  if (!f.context.empty()) fields.push_back("LLMSVC_CONTEXT=" + std::string(f.context));
  if (f.call != 0) fields.push_back("LLMSVC_CALL=" + std::to_string(f.call));
  std::vector<struct iovec> iov;
  for (std::string& s : fields) iov.push_back({s.data(), s.size()});
  return ::sd_journal_sendv(iov.data(), static_cast<int>(iov.size())) >= 0;
}

void to_stderr(std::string_view message, const LogFields& f) {
  std::string out = "llmsvcd: ";
  out.append(message);
  if (!f.context.empty() || f.call != 0) {
    out += " [";
    if (!f.context.empty()) out += "context=" + std::string(f.context);
    if (f.call != 0) out += std::string(f.context.empty() ? "" : " ") + "call=" + std::to_string(f.call);
    out += "]";
  }
  out.push_back('\n');
  ssize_t n = ::write(STDERR_FILENO, out.data(), out.size());  // one write: threads do not interleave
  (void)n;
}

// A token bucket: `burst` lines at once, then `per_s` a second.
struct Bucket {
  double tokens;
  std::chrono::steady_clock::time_point last;
  uint64_t suppressed = 0;

  bool take(double burst, double per_s, std::chrono::steady_clock::time_point now) {
    tokens = std::min(burst, tokens + per_s * std::chrono::duration<double>(now - last).count());
    last = now;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  }
};

// Lines about an app (whatever a client can make the daemon say) pass a bucket of that app
// and one of all apps together; the daemon's own lines are not limited.
class LineLimiter {
 public:
  // Whether the line goes out; `suppressed` then holds how many of the app's lines did not
  // since its last one (to be said first).
  bool admit(uid_t uid, uint64_t& suppressed) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mu_);
    if (apps_.size() >= kMaxApps) forget_quiet(now);
    auto [it, fresh] = apps_.try_emplace(uid, Bucket{kAppBurst, now});
    (void)fresh;
    Bucket& app = it->second;
    if (!app.take(kAppBurst, kAppPerS, now) || !all_.take(kAllBurst, kAllPerS, now)) {
      ++app.suppressed;
      return false;
    }
    suppressed = app.suppressed;
    app.suppressed = 0;
    return true;
  }

 private:
  static constexpr double kAppBurst = 20, kAppPerS = 1, kAllBurst = 200, kAllPerS = 20;
  static constexpr size_t kMaxApps = 4096;  // the map's bound: apps are uids, but stay safe
  void forget_quiet(std::chrono::steady_clock::time_point now) {
    for (auto it = apps_.begin(); it != apps_.end();) {
      Bucket& b = it->second;
      const bool full = b.tokens + kAppPerS * std::chrono::duration<double>(now - b.last).count() >= kAppBurst;
      it = full && b.suppressed == 0 ? apps_.erase(it) : std::next(it);
    }
    if (apps_.size() >= kMaxApps) apps_.clear();  // all busy at once: start over rather than grow
  }
  std::mutex mu_;
  std::map<uid_t, Bucket> apps_;
  Bucket all_{kAllBurst, std::chrono::steady_clock::now()};
};

void emit(LogLevel level, std::string_view message, const LogFields& fields) {
  static const bool journal = stderr_is_journal();
  if (journal && to_journal(level, message, fields)) return;
  to_stderr(message, fields);
}

}  // namespace

void log_event(LogLevel level, std::string_view message, const LogFields& fields) {
  if (fields.app != nullptr) {
    static LineLimiter limiter;
    uint64_t suppressed = 0;
    if (!limiter.admit(fields.app->uid, suppressed)) return;
    if (suppressed > 0)
      emit(LogLevel::warning,
           std::to_string(suppressed) + " lines about " + fields.app->label() + " were left out (at most 20 at once, then 1 a second)",
           LogFields{fields.app, {}, 0});
  }
  emit(level, message, fields);
}

}  // namespace llmsvc::service
