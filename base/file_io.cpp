// SPDX-License-Identifier: Apache-2.0
// POSIX implementations of base/file_io.h.
#include "base/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <type_traits>

#include "base/unique_fd.h"

namespace llmsvc::fileio {
namespace {

std::atomic<uint64_t> g_temp_counter{0};

std::string temp_path_for(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + temp_file_name(name);
}

Status write_temp(const std::string& tmp, const FileFiller& fill, mode_t mode, bool drop_cache, const std::string& what) {
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd.valid()) return io_status(errno, what + ": create temporary file");
  LLMSVC_RETURN_IF_ERROR(fill(fd.get()));
  // Delayed allocation can surface ENOSPC / EDQUOT only here.
  if (::fdatasync(fd.get()) != 0) return io_status(errno, what + ": fdatasync");
  // The pages are clean after fdatasync, so DONTNEED really evicts them.
  if (drop_cache) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  if (const int err = fd.close(); err != 0) return io_status(err, what + ": close");
  return Status::Ok();
}

// The temporary file filled, synced and renamed over `path`; on failure, removed.
Status replace_file(const std::string& path, const FileFiller& fill, mode_t mode, bool drop_cache) {
  const std::string what = "write " + path;
  const std::string tmp = temp_path_for(path);
  Status s = write_temp(tmp, fill, mode, drop_cache, what);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = io_status(errno, what + ": rename");
  if (!s.ok()) ::unlink(tmp.c_str());  // may not exist (create failed): nothing else to do
  return s;
}

}  // namespace

std::string errno_text(int err) {
  switch (err) {
    case ENOSPC: return "disk full (ENOSPC)";
    case EDQUOT: return "disk quota exceeded (EDQUOT)";
    case EROFS: return "read-only file system (EROFS)";
    case EACCES: return "permission denied (EACCES)";
    // A file size limit (RLIMIT_FSIZE) or the file system's largest file.
    case EFBIG: return "file too large (EFBIG)";
    // Where a path is opened with O_NOFOLLOW (safe_dir.h), a link there is refused this way.
    case ELOOP: return "a symbolic link was refused, or links loop (ELOOP)";
    default: break;
  }
  char buf[128];
  // GNU strerror_r returns the message (maybe not in buf); the XSI form fills buf.
  const auto r = strerror_r(err, buf, sizeof buf);
  if constexpr (std::is_same_v<decltype(r), char*>) {
    return r;
  } else {
    return r == 0 ? buf : "errno " + std::to_string(err);
  }
}

Status io_status(int err, const std::string& what) { return Status(Code::io, what + ": " + errno_text(err)); }

Status write_file_atomic(const std::string& path, std::span<const uint8_t> bytes, bool drop_cache) {
  return replace_file(path, [&](int fd) { return write_all(fd, bytes, "write " + path); }, 0600, drop_cache);
}

Status write_atomic(const std::string& path, std::span<const uint8_t> bytes) {
  LLMSVC_RETURN_IF_ERROR(write_file_atomic(path, bytes, /*drop_cache=*/false));
  return sync_directory(parent_directory(path));
}

Status write_atomic(const std::string& path, const FileFiller& fill, mode_t mode) {
  LLMSVC_RETURN_IF_ERROR(replace_file(path, fill, mode, /*drop_cache=*/false));
  return sync_directory(parent_directory(path));
}

Status write_atomic(const std::string& path, const std::string& text) {
  return write_atomic(path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

Status sync_directory(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return io_status(errno, "open directory " + dir);
  if (::fsync(fd.get()) != 0) return io_status(errno, "fsync directory " + dir);
  return Status::Ok();
}

std::string parent_directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool is_temp_file_name(const std::string& name) {
  return name.size() > 5 && name[0] == '.' && name.compare(name.size() - 4, 4, ".tmp") == 0;
}

std::string temp_file_name(const std::string& name) {
  return "." + name + "." + std::to_string(::getpid()) + "." + std::to_string(g_temp_counter++) + ".tmp";
}

pid_t temp_file_pid(const std::string& name) {
  if (!is_temp_file_name(name)) return 0;
  // ".<name>.<pid>.<n>.tmp": the pid is the second number from the end.
  const size_t n_dot = name.rfind('.', name.size() - 5);
  if (n_dot == std::string::npos || n_dot == 0) return 0;
  const size_t pid_dot = name.rfind('.', n_dot - 1);
  if (pid_dot == std::string::npos || pid_dot + 1 >= n_dot || n_dot - pid_dot - 1 > 9) return 0;
  pid_t pid = 0;
  for (size_t i = pid_dot + 1; i < n_dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return 0;
    pid = pid * 10 + (name[i] - '0');
  }
  return pid;
}

Status write_all(int fd, std::span<const uint8_t> bytes, const std::string& what) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_status(errno, what);
    }
    // A short write is followed by another call, which reports the cause (ENOSPC, ...).
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Result<std::string> read_all(int fd, size_t max_bytes, const std::string& name) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return io_status(errno, "stat " + name);
  if (!S_ISREG(st.st_mode)) return Status(Code::io, "'" + name + "' is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return Status(Code::io, "'" + name + "' is larger than " + std::to_string(max_bytes) + " bytes");
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t r = ::pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return io_status(errno, "read " + name);
    if (r == 0) break;  // shrank meanwhile
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

Result<std::string> read_file(const std::string& path, size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return Status(Code::not_found, "no file '" + path + "'");
    return io_status(errno, "open " + path);
  }
  return read_all(fd.get(), max_bytes, path);
}

Status make_dirs(const std::string& path) {
  if (path.empty()) return Status(Code::invalid_argument, "empty directory path");
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    const std::string part = path.substr(0, pos);
    if (part.empty()) continue;
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return io_status(errno, "create directory " + part);
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return Status(Code::io, "'" + path + "' is not a directory");
  return Status::Ok();
}

Status remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? Status::Ok() : io_status(errno, "stat " + path);
  if (S_ISDIR(st.st_mode)) {
    DIR* d = ::opendir(path.c_str());
    if (!d) return io_status(errno, "open directory " + path);
    Status s;
    while (dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      s = remove_tree(path + "/" + e->d_name);
      if (!s.ok()) break;
    }
    ::closedir(d);
    if (!s.ok()) return s;
    if (::rmdir(path.c_str()) != 0) return io_status(errno, "remove directory " + path);
  } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return io_status(errno, "remove " + path);
  }
  return Status::Ok();
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace llmsvc::fileio
