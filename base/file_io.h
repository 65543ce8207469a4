// Small POSIX file helpers with Status errors: atomic replace, bounded whole-file reads,
// directory creation and removal. Every error message names the path and the cause.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"

namespace llmsvc::fileio {

// strerror-like text, with the causes users act on spelled out ("disk full", ...).
std::string errno_text(int err);

// Replaces `path` with `bytes` atomically: a temporary file in the same directory is
// written and fsynced, renamed over `path`, and the directory is fsynced. On failure the
// temporary file is removed and any previous `path` is untouched.
Status write_atomic(const std::string& path, std::span<const uint8_t> bytes, mode_t mode = 0600);
Status write_atomic(const std::string& path, const std::string& text, mode_t mode = 0600);

// The whole file; Code::not_found if it does not exist, Code::io if larger than max_bytes.
Result<std::string> read_file(const std::string& path, size_t max_bytes);

// mkdir -p with `mode` for the directories it creates.
Status make_dirs(const std::string& path, mode_t mode = 0700);
// rm -r (no-op when absent). Symlinks are removed, never followed.
Status remove_tree(const std::string& path);
Status fsync_dir(const std::string& dir);
bool exists(const std::string& path);

}  // namespace llmsvc::fileio
