// SPDX-License-Identifier: Apache-2.0
// Swap directory contents: which chunk files it holds, and cleaning up after a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/safe_dir.h"
#include "base/status.h"

namespace llmsvc::policy {

// The chunk index of a file name "<n>.kvc" (canonical decimal, n <= UINT32_MAX), else nullopt.
std::optional<uint32_t> parse_chunk_file_name(const std::string& name);

// The chunk indices of the "<n>.kvc" files in `dir`, ascending. Missing dir: not_found.
Result<std::vector<uint32_t>> list_chunk_files(const std::string& dir);
// The same for directory `rel` below `base` ("." for itself), reached through no link.
Result<std::vector<uint32_t>> list_chunk_files(const fileio::SafeDir& base, std::string_view rel);

// Removes the temporary files an interrupted write left in `dir` (file_io.h's names);
// returns how many. Only for a directory no writer is using.
Result<size_t> remove_temp_files(const std::string& dir);
Result<size_t> remove_temp_files(const fileio::SafeDir& dir);

// Creates `dir` (mode 0700) unless it exists; its parent must exist.
Status ensure_directory(const std::string& dir);

}  // namespace llmsvc::policy
