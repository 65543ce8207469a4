// stderr log lines, written whole (one write per line) so threads do not interleave.
#include "runtime/service/log.h"

#include <unistd.h>

#include <string>

namespace llmsvc::service {

void log_line(std::string_view line) {
  std::string out = "llmsvcd: ";
  out.append(line);
  out.push_back('\n');
  ssize_t n = ::write(STDERR_FILENO, out.data(), out.size());
  (void)n;
}

}  // namespace llmsvc::service
