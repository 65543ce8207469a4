// errno -> Status messages.
#include "policy/io_errors.h"

#include <cerrno>
#include <cstring>
#include <type_traits>

namespace llmsvc::policy {

std::string errno_text(int err) {
  switch (err) {
    case ENOSPC: return "disk full (ENOSPC)";
    case EDQUOT: return "disk quota exceeded (EDQUOT)";
    case EROFS: return "read-only file system (EROFS)";
    default: break;
  }
  char buf[128];
  // GNU strerror_r returns the message (maybe not in buf); the XSI form fills buf.
  const auto r = strerror_r(err, buf, sizeof buf);
  if constexpr (std::is_same_v<decltype(r), char*>) return r;
  else return r == 0 ? buf : "errno " + std::to_string(err);
}

Status io_status(int err, const std::string& what) { return Status(Code::io, what + ": " + errno_text(err)); }

}  // namespace llmsvc::policy
