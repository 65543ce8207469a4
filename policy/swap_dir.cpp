// Listing and cleaning swap directories.
#include "policy/swap_dir.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "base/file_io.h"

namespace llmsvc::policy {
namespace {

struct DirClose {
  void operator()(DIR* d) const { ::closedir(d); }
};
using DirPtr = std::unique_ptr<DIR, DirClose>;

Result<DirPtr> open_dir(const std::string& dir) {
  DirPtr d(::opendir(dir.c_str()));
  if (!d) {
    if (errno == ENOENT) return Status(Code::not_found, "swap directory " + dir + ": no such directory");
    return fileio::io_status(errno, "open swap directory " + dir);
  }
  return d;
}

// Calls f(name) for each entry but . and ..
template <class F>
Status for_each_entry(const std::string& dir, F&& f) {
  auto d = open_dir(dir);
  if (!d.ok()) return d.status();
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(d->get());
    if (e == nullptr) break;
    const std::string name = e->d_name;
    if (name != "." && name != "..") LLMSVC_RETURN_IF_ERROR(f(name));
  }
  if (errno != 0) return fileio::io_status(errno, "read swap directory " + dir);
  return Status::Ok();
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
  std::vector<uint32_t> out;
  Status s = for_each_entry(dir, [&](const std::string& name) {
    if (auto i = parse_chunk_file_name(name)) out.push_back(*i);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  std::sort(out.begin(), out.end());
  return out;
}

Result<size_t> remove_temp_files(const std::string& dir) {
  size_t n = 0;
  Status s = for_each_entry(dir, [&](const std::string& name) {
    if (!fileio::is_temp_file_name(name)) return Status::Ok();
    const std::string path = dir + "/" + name;
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return fileio::io_status(errno, "remove " + path);
    ++n;
    return Status::Ok();
  });
  if (!s.ok()) return s;
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
