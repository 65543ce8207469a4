// SPDX-License-Identifier: Apache-2.0
// sd_notify: readiness, status and watchdog keep-alives for systemd (Type=notify). No-ops
// when not run by systemd (no $NOTIFY_SOCKET).
#pragma once

#include <cstdint>
#include <string>

namespace llmsvc::service {

void notify_ready(const std::string& status);
void notify_status(const std::string& status);
void notify_stopping(const std::string& status);
// The service manager's watchdog interval ($WATCHDOG_USEC for this process), 0 when none;
// a keep-alive is due at least every half of it.
uint64_t watchdog_interval_us();
void notify_watchdog();

}  // namespace llmsvc::service
