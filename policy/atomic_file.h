// Atomic file replacement: a reader sees the old file or the new one, never a mix, and a
// failed write leaves the old file as it was.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"

namespace llmsvc::policy {

// Writes `bytes` to a temporary file in the target's directory, fdatasyncs it, drops its
// pages from the page cache if `drop_cache` (swapped-out data must really leave RAM),
// and renames it over `path`. The directory entry is not synced: call sync_directory
// (once for many files). Any failure removes the temporary file and leaves `path` untouched;
// the Status (Code::io) names the step and the cause ("disk full (ENOSPC)", ...).
Status write_file_atomic(const std::string& path, std::span<const uint8_t> bytes, bool drop_cache);

// fsyncs a directory so that renames and creations in it are durable.
Status sync_directory(const std::string& dir);

// The directory part of `path` ("." when it has none).
std::string parent_directory(const std::string& path);

// Temporary files are named ".<target name>.<pid>.<n>.tmp": hidden, never "<n>.kvc".
bool is_temp_file_name(const std::string& name);

}  // namespace llmsvc::policy
