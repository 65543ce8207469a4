// SPDX-License-Identifier: Apache-2.0
// Listing and cleaning swap directories.
#include "policy/swap/swap_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/file_io.h"

namespace llmsvc::policy {
namespace {

// `dir` itself as the anchor: a caller's own path, trusted as it is.
Result<fileio::SafeDirRef> open_anchor(const std::string& dir) {
  auto d = fileio::SafeDir::open(dir, dir);
  if (!d.ok() && d.status().code() == Code::not_found)
    return Status(Code::not_found, "swap directory " + dir + ": no such directory");
  return d;
}

}  // namespace

std::optional<uint32_t> parse_chunk_file_name(const std::string& name) {
  constexpr size_t kSuffix = 4;  // ".kvc"
  if (name.size() <= kSuffix || name.compare(name.size() - kSuffix, kSuffix, ".kvc") != 0) return std::nullopt;
  const size_t digits = name.size() - kSuffix;
  if (digits > 10 || (digits > 1 && name[0] == '0')) return std::nullopt;
  uint64_t v = 0;
  for (size_t i = 0; i < digits; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  if (v > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(v);
}

Result<std::vector<uint32_t>> list_chunk_files(const std::string& dir) {
  auto d = open_anchor(dir);
  if (!d.ok()) return d.status();
  return list_chunk_files(**d, ".");
}

Result<std::vector<uint32_t>> list_chunk_files(const fileio::SafeDir& base, std::string_view rel) {
  auto names = base.list(rel);
  if (!names.ok()) return names.status();
  std::vector<uint32_t> out;
  for (const std::string& name : *names)
    if (auto i = parse_chunk_file_name(name)) out.push_back(*i);
  std::sort(out.begin(), out.end());
  return out;
}

Result<size_t> remove_temp_files(const std::string& dir) {
  auto d = open_anchor(dir);
  if (!d.ok()) return d.status();
  return remove_temp_files(**d);
}

Result<size_t> remove_temp_files(const fileio::SafeDir& dir) {
  auto names = dir.list(".");
  if (!names.ok()) return names.status();
  size_t n = 0;
  for (const std::string& name : *names) {
    if (!fileio::is_temp_file_name(name)) continue;
    Status s = dir.unlink(name);
    if (s.code() == Code::not_found) continue;
    LLMSVC_RETURN_IF_ERROR(s);
    ++n;
  }
  return n;
}

Status ensure_directory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) == 0) return Status::Ok();
  if (errno != EEXIST) return fileio::io_status(errno, "create swap directory " + dir);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return fileio::io_status(errno, "stat " + dir);
  if (!S_ISDIR(st.st_mode)) return Status(Code::io, "swap directory " + dir + ": exists and is not a directory");
  return Status::Ok();
}

}  // namespace llmsvc::policy
