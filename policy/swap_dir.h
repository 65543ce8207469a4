// Swap directory contents: which chunk files it holds, and cleaning up after a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace llmsvc::policy {

// The chunk index of a file name "<n>.kvc" (canonical decimal, n <= UINT32_MAX), else nullopt.
std::optional<uint32_t> parse_chunk_file_name(const std::string& name);

// The chunk indices of the "<n>.kvc" files in `dir`, ascending. Missing dir: not_found.
Result<std::vector<uint32_t>> list_chunk_files(const std::string& dir);

// Removes the temporary files an interrupted write left in `dir` (atomic_file.h's names);
// returns how many. Only for a directory no writer is using.
Result<size_t> remove_temp_files(const std::string& dir);

// Creates `dir` (mode 0700) unless it exists; its parent must exist.
Status ensure_directory(const std::string& dir);

}  // namespace llmsvc::policy
