// SPDX-License-Identifier: Apache-2.0
// POSIX file helpers with Status errors, the one place for them: atomic replacement
// (temp file, fdatasync, rename, directory fsync), bounded whole-file reads, directory
// creation and removal. Every error message names the path and the cause. Paths here are
// taken as they are (links followed): files below a directory that others might write into
// (the state directory) go through safe_dir.h instead.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "base/status.h"

namespace llmsvc::fileio {

// strerror, with the causes users act on spelled out: "disk full (ENOSPC)", ...
std::string errno_text(int err);
// Code::io: "<what>: <errno_text(err)>".
Status io_status(int err, const std::string& what);

// Writes `bytes` to a temporary file in the target's directory, fdatasyncs it, drops its
// pages from the page cache if `drop_cache` (swapped-out data must really leave RAM),
// and renames it over `path` (mode 0600). The directory entry is not synced: call
// sync_directory (once for many files). Any failure removes the temporary file and leaves
// `path` untouched.
Status write_file_atomic(const std::string& path, std::span<const uint8_t> bytes, bool drop_cache);
// write_file_atomic, then sync_directory of its directory: durable when it returns.
Status write_atomic(const std::string& path, std::span<const uint8_t> bytes);
Status write_atomic(const std::string& path, const std::string& text);
// Writes the contents of a file to the open descriptor (with write_all, say), in as many
// pieces as it likes, so that a large file is never held whole in memory; returns why not.
using FileFiller = std::function<Status(int fd)>;
// write_atomic for contents written by `fill`: the temporary file (created with `mode`,
// less the umask) is fdatasync'ed, renamed over `path` and the directory fsync'ed. A
// failure of `fill` or of any step removes the temporary file and leaves `path` untouched.
Status write_atomic(const std::string& path, const FileFiller& fill, mode_t mode = 0600);
// fsyncs a directory so that renames and creations in it are durable.
Status sync_directory(const std::string& dir);
// The directory part of `path` ("." when it has none).
std::string parent_directory(const std::string& path);
// Temporary files are named ".<target name>.<pid>.<n>.tmp": hidden, and recognizable for cleanup.
bool is_temp_file_name(const std::string& name);
// A fresh temporary file name for the file named `name` (no directory part).
std::string temp_file_name(const std::string& name);
// The <pid> of a temporary file name (the process that was writing it), or 0.
pid_t temp_file_pid(const std::string& name);

// Writes all of `bytes` to `fd` (Code::io "<what>: <cause>" on failure).
Status write_all(int fd, std::span<const uint8_t> bytes, const std::string& what);
// The whole file open at `fd` (read with pread from offset 0), named `name` in messages;
// Code::io if it is not a regular file or is larger than max_bytes.
Result<std::string> read_all(int fd, size_t max_bytes, const std::string& name);

// The whole file; Code::not_found if it does not exist, Code::io if larger than max_bytes.
Result<std::string> read_file(const std::string& path, size_t max_bytes);

// mkdir -p, 0700 for the directories it creates.
Status make_dirs(const std::string& path);
// rm -r (no-op when absent). Symlinks are removed, never followed.
Status remove_tree(const std::string& path);
bool exists(const std::string& path);

}  // namespace llmsvc::fileio
