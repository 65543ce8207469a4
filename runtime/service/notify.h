// sd_notify: readiness and status for systemd (Type=notify). No-ops when not run by systemd
// (no $NOTIFY_SOCKET). WATCHDOG keep-alives come with the units.
#pragma once

#include <string>

namespace llmsvc::service {

void notify_ready(const std::string& status);
void notify_status(const std::string& status);
void notify_stopping(const std::string& status);

}  // namespace llmsvc::service
