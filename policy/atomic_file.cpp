// Temp-file + fdatasync + rename writes.
#include "policy/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "policy/io_errors.h"
#include "policy/unique_fd.h"

namespace llmsvc::policy {
namespace {

std::atomic<uint64_t> g_temp_counter{0};

std::string temp_path_for(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + "." + name + "." + std::to_string(::getpid()) + "." + std::to_string(g_temp_counter++) + ".tmp";
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

Status write_temp(const std::string& tmp, std::span<const uint8_t> bytes, bool drop_cache, const std::string& what) {
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return io_status(errno, what + ": create temporary file");
  LLMSVC_RETURN_IF_ERROR(write_all(fd.get(), bytes, what));
  // Delayed allocation can surface ENOSPC / EDQUOT only here.
  if (::fdatasync(fd.get()) != 0) return io_status(errno, what + ": fdatasync");
  // The pages are clean after fdatasync, so DONTNEED really evicts them.
  if (drop_cache) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  if (const int err = fd.close(); err != 0) return io_status(err, what + ": close");
  return Status::Ok();
}

}  // namespace

Status write_file_atomic(const std::string& path, std::span<const uint8_t> bytes, bool drop_cache) {
  const std::string what = "swap write " + path;
  const std::string tmp = temp_path_for(path);
  Status s = write_temp(tmp, bytes, drop_cache, what);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = io_status(errno, what + ": rename");
  if (!s.ok()) ::unlink(tmp.c_str());  // may not exist (create failed): nothing else to do
  return s;
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

}  // namespace llmsvc::policy
