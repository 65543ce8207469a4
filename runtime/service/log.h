// SPDX-License-Identifier: Apache-2.0
// The daemon's log. Under systemd, where stderr is the journal ($JOURNAL_STREAM names it),
// events go to the journal natively, with structured fields beside MESSAGE and PRIORITY:
//   LLMSVC_APP (the app's label), LLMSVC_UID, LLMSVC_PID, LLMSVC_UNIT or LLMSVC_EXE,
//   LLMSVC_CONTEXT, LLMSVC_CALL (the call's stream id)
// so `journalctl LLMSVC_UID=1000` shows one app's events. Otherwise (or if the journal
// refuses a message) one line on stderr, the fields appended as "[context=ID call=N]".
// Events about an app are rate-limited, per app (20 at once, then 1 a second) and over all
// apps (200, then 20 a second): a client cannot flood the log; what was left out is counted
// in the app's next line.
#pragma once

#include <cstdint>
#include <string_view>

#include "runtime/service/app_identity.h"

namespace llmsvc::service {

enum class LogLevel { error = 3, warning = 4, info = 6 };  // syslog priorities

struct LogFields {
  const AppIdentity* app = nullptr;
  std::string_view context;
  uint32_t call = 0;  // 0: none
};

void log_event(LogLevel level, std::string_view message, const LogFields& fields = {});
// An informational event about the daemon itself.
inline void log_line(std::string_view line) { log_event(LogLevel::info, line); }

}  // namespace llmsvc::service
