// The daemon's log: one line per event on stderr (systemd puts stderr in the journal;
// structured journal fields — app, context, call — come with sd_journal later).
#pragma once

#include <string_view>

namespace llmsvc::service {

void log_line(std::string_view line);

}  // namespace llmsvc::service
