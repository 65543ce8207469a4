// POSIX implementations of base/file_io.h.
#include "base/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace llmsvc::fileio {
namespace {

// Closes a descriptor on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

Status io_error(const std::string& what, const std::string& path, int err) {
  return Status(Code::io, what + " '" + path + "': " + errno_text(err));
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Status write_all(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write", path, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

}  // namespace

std::string errno_text(int err) {
  switch (err) {
    case ENOSPC: return "disk full (ENOSPC)";
    case EDQUOT: return "disk quota exceeded (EDQUOT)";
    case EROFS: return "read-only file system (EROFS)";
    case EACCES: return "permission denied (EACCES)";
    default: return std::strerror(err);
  }
}

Status write_atomic(const std::string& path, std::span<const uint8_t> bytes, mode_t mode) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string tmp = path + ".tmp." + std::to_string(rng() & 0xffffffffffull);
  Status s;
  {
    Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
    if (f.fd < 0) return io_error("cannot create", tmp, errno);
    s = write_all(f.fd, bytes.data(), bytes.size(), tmp);
    if (s.ok() && ::fsync(f.fd) != 0) s = io_error("cannot sync", tmp, errno);
  }
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = io_error("cannot rename into", path, errno);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return fsync_dir(dir_of(path));
}

Status write_atomic(const std::string& path, const std::string& text, mode_t mode) {
  return write_atomic(path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()), mode);
}

Result<std::string> read_file(const std::string& path, size_t max_bytes) {
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) {
    if (errno == ENOENT) return Status(Code::not_found, "no file '" + path + "'");
    return io_error("cannot open", path, errno);
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return io_error("cannot stat", path, errno);
  if (!S_ISREG(st.st_mode)) return Status(Code::io, "'" + path + "' is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return Status(Code::io, "'" + path + "' is larger than " + std::to_string(max_bytes) + " bytes");
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t r = ::read(f.fd, out.data() + got, out.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return io_error("cannot read", path, errno);
    if (r == 0) break;  // shrank meanwhile
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

Status make_dirs(const std::string& path, mode_t mode) {
  if (path.empty()) return Status(Code::invalid_argument, "empty directory path");
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    const std::string part = path.substr(0, pos);
    if (part.empty()) continue;
    if (::mkdir(part.c_str(), mode) != 0 && errno != EEXIST) return io_error("cannot create directory", part, errno);
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return Status(Code::io, "'" + path + "' is not a directory");
  return Status::Ok();
}

Status remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? Status::Ok() : io_error("cannot stat", path, errno);
  if (S_ISDIR(st.st_mode)) {
    DIR* d = ::opendir(path.c_str());
    if (!d) return io_error("cannot open directory", path, errno);
    Status s;
    while (dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      s = remove_tree(path + "/" + e->d_name);
      if (!s.ok()) break;
    }
    ::closedir(d);
    if (!s.ok()) return s;
    if (::rmdir(path.c_str()) != 0) return io_error("cannot remove directory", path, errno);
  } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return io_error("cannot remove", path, errno);
  }
  return Status::Ok();
}

Status fsync_dir(const std::string& dir) {
  Fd f(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (f.fd < 0) return io_error("cannot open directory", dir, errno);
  if (::fsync(f.fd) != 0) return io_error("cannot sync directory", dir, errno);
  return Status::Ok();
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace llmsvc::fileio
