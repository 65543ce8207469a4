// SPDX-License-Identifier: Apache-2.0
// sd_notify wrappers.
#include "runtime/service/notify.h"

#include <systemd/sd-daemon.h>

namespace llmsvc::service {

void notify_ready(const std::string& status) { sd_notifyf(0, "READY=1\nSTATUS=%s", status.c_str()); }
void notify_status(const std::string& status) { sd_notifyf(0, "STATUS=%s", status.c_str()); }
void notify_stopping(const std::string& status) { sd_notifyf(0, "STOPPING=1\nSTATUS=%s", status.c_str()); }

uint64_t watchdog_interval_us() {
  uint64_t usec = 0;
  return sd_watchdog_enabled(0, &usec) > 0 ? usec : 0;
}

void notify_watchdog() { sd_notify(0, "WATCHDOG=1"); }

}  // namespace llmsvc::service
