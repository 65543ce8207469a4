// sd_notify wrappers.
#include "runtime/service/notify.h"

#include <systemd/sd-daemon.h>

namespace llmsvc::service {

void notify_ready(const std::string& status) { sd_notifyf(0, "READY=1\nSTATUS=%s", status.c_str()); }
void notify_status(const std::string& status) { sd_notifyf(0, "STATUS=%s", status.c_str()); }
void notify_stopping(const std::string& status) { sd_notifyf(0, "STOPPING=1\nSTATUS=%s", status.c_str()); }

}  // namespace llmsvc::service
