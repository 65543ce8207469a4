// The daemon's log: native journal entries with fields, or whole lines on stderr.
#include "runtime/service/log.h"

#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
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

}  // namespace

void log_event(LogLevel level, std::string_view message, const LogFields& fields) {
  static const bool journal = stderr_is_journal();
  if (journal && to_journal(level, message, fields)) return;
  to_stderr(message, fields);
}

}  // namespace llmsvc::service
