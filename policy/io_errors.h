// Status messages for failed system calls: a disk-full or quota error says so in words
// (callers and users act on those), any other error carries strerror.
#pragma once

#include <string>

#include "base/status.h"

namespace llmsvc::policy {

// "disk full (ENOSPC)", "disk quota exceeded (EDQUOT)", else strerror(err).
std::string errno_text(int err);
// Code::io: "<what>: <errno_text(err)>".
Status io_status(int err, const std::string& what);

}  // namespace llmsvc::policy
