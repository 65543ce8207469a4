// SPDX-License-Identifier: Apache-2.0
// Listening sockets: systemd's (sd_listen_fds) or bound by hand, stale files replaced safely.
#include "runtime/service/listen_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "base/file_io.h"
#include "base/unique_fd.h"

namespace llmsvc::service {
namespace {

Status sys_error(const std::string& what) { return Status(Code::io, what + ": " + fileio::errno_text(errno)); }

Result<sockaddr_un> unix_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path))
    return Status(Code::invalid_argument, "socket path '" + path + "' is empty or longer than " +
                                              std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

}  // namespace

Result<std::vector<PassedSocket>> systemd_listen_fds() {
  std::vector<PassedSocket> fds;
  char** names = nullptr;
  const int n = sd_listen_fds_with_names(1, &names);  // unsets LISTEN_FDS etc.: children do not inherit them
  if (n < 0) return Status(Code::io, std::string("sd_listen_fds: ") + std::strerror(-n));
  std::vector<std::string> named;
  for (int i = 0; names && names[i]; ++i) {
    named.emplace_back(names[i]);
    std::free(names[i]);
  }
  std::free(names);
  for (int i = 0; i < n; ++i) {
    const int fd = SD_LISTEN_FDS_START + i;
    if (sd_is_socket_unix(fd, SOCK_STREAM, 1, nullptr, 0) <= 0)
      return Status(Code::invalid_argument, "systemd passed fd " + std::to_string(fd) +
                                                ", which is not a listening AF_UNIX stream socket");
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return sys_error("fcntl");
    fds.push_back({fd, i < static_cast<int>(named.size()) ? named[i] : "unknown"});
  }
  return fds;
}

Result<BoundUnixSocket> BoundUnixSocket::bind(const std::string& path, mode_t mode) {
  auto addr = unix_address(path);
  if (!addr.ok()) return addr.status();
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Status(Code::exists, "'" + path + "' exists and is not a socket");
    // Someone listening there? Then it is not ours to take over.
    fileio::UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe.valid()) return sys_error("socket");
    if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) == 0)
      return Status(Code::exists, "another daemon is listening on '" + path + "'");
    if (errno != ECONNREFUSED) return sys_error("probe '" + path + "'");
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return sys_error("remove stale socket '" + path + "'");
  }
  fileio::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return sys_error("socket");
  // Bind under a umask that leaves nothing wider than asked, then set the exact mode.
  const mode_t old = ::umask(0777 & ~mode);
  const int rc = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr));
  const int err = errno;
  ::umask(old);
  if (rc != 0) {
    errno = err;
    return sys_error("bind '" + path + "'");
  }
  if (::chmod(path.c_str(), mode) != 0) return sys_error("chmod '" + path + "'");
  struct stat bound {};
  if (::lstat(path.c_str(), &bound) != 0) return sys_error("stat '" + path + "'");
  return BoundUnixSocket(fd.release(), path, bound.st_dev, bound.st_ino);
}

BoundUnixSocket::BoundUnixSocket(BoundUnixSocket&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)), dev_(o.dev_), ino_(o.ino_) {}

BoundUnixSocket::~BoundUnixSocket() {
  if (fd_ < 0) return;
  if (still_ours()) ::unlink(path_.c_str());  // fails where its directory is root's and we are no longer
  ::close(fd_);
}

bool BoundUnixSocket::still_ours() const {
  struct stat now {};
  return ::lstat(path_.c_str(), &now) == 0 && now.st_dev == dev_ && now.st_ino == ino_;
}

Result<int> BoundUnixSocket::listen() {
  if (!still_ours())
    return Status(Code::exists, "'" + path_ + "' was taken over by another daemon while this one started");
  if (::listen(fd_, 128) != 0) return sys_error("listen '" + path_ + "'");
  return std::exchange(fd_, -1);
}

Result<int> listen_unix(const std::string& path, mode_t mode) {
  auto bound = BoundUnixSocket::bind(path, mode);
  if (!bound.ok()) return bound.status();
  return bound->listen();
}

}  // namespace llmsvc::service
