// SPDX-License-Identifier: Apache-2.0
#include "runtime/service/memory_pressure.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "base/file_io.h"

namespace llmsvc::service {

namespace {

constexpr const char* kDefaultTrigger = "some 200000 2000000";

// This process's cgroup v2 memory.pressure, or "" (cgroup v1, or no such file).
std::string own_cgroup_pressure() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string path = "/sys/fs/cgroup" + line.substr(3) + "/memory.pressure";
    struct stat st{};
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return path;
  }
  return {};
}

Result<std::string> decode_trigger(const char* base64) {
  if (base64 == nullptr) return std::string(kDefaultTrigger);
  const size_t n = std::strlen(base64);
  std::vector<unsigned char> out(n / 4 * 3 + 3);
  size_t len = 0;
  if (sodium_base642bin(out.data(), out.size(), base64, n, nullptr, &len, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0)
    return Status(Code::invalid_argument, "MEMORY_PRESSURE_WRITE is not base64");
  return std::string(reinterpret_cast<const char*>(out.data()), len);
}

Status write_all(int fd, const std::string& data, const std::string& path) {
  // A PSI trigger is one write, its terminating NUL included.
  const std::string text = data + '\0';
  if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return fileio::io_status(errno, "writing the memory-pressure trigger to " + path);
  return Status::Ok();
}

}  // namespace

uint32_t MemoryPressure::epoll_events() const { return kind_ == Kind::psi ? EPOLLPRI : EPOLLIN; }

Result<MemoryPressure> MemoryPressure::open(const char* watch, const char* write_base64) {
  MemoryPressure m;
  std::string path = watch != nullptr ? watch : "";
  if (path == "/dev/null") {
    m.what_ = "off ($MEMORY_PRESSURE_WATCH=/dev/null)";
    return m;
  }
  auto trigger = decode_trigger(write_base64);
  if (!trigger.ok()) return trigger.status();
  if (path.empty()) path = own_cgroup_pressure();
  if (path.empty()) path = "/proc/pressure/memory";
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return fileio::io_status(errno, "memory-pressure source " + path);
  if (S_ISFIFO(st.st_mode)) {
    // Read-write: the daemon is a writer too, so the FIFO never hangs up when another closes.
    m.fd_.reset(::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
    if (!m.fd_.valid()) return fileio::io_status(errno, "opening memory-pressure FIFO " + path);
    m.kind_ = Kind::fifo;
    m.what_ = "fifo " + path;
    return m;
  }
  if (S_ISSOCK(st.st_mode)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path)) return Status(Code::invalid_argument, "memory-pressure socket path too long: " + path);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    m.fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!m.fd_.valid() || ::connect(m.fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0)
      return fileio::io_status(errno, "connecting to memory-pressure socket " + path);
    if (!trigger->empty()) LLMSVC_RETURN_IF_ERROR(write_all(m.fd_.get(), *trigger, path));
    if (::fcntl(m.fd_.get(), F_SETFL, O_NONBLOCK) != 0) return fileio::io_status(errno, "memory-pressure socket " + path);
    m.kind_ = Kind::socket;
    m.what_ = "socket " + path;
    return m;
  }
  m.fd_.reset(::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
  if (!m.fd_.valid()) return fileio::io_status(errno, "opening PSI file " + path);
  LLMSVC_RETURN_IF_ERROR(write_all(m.fd_.get(), *trigger, path));
  m.kind_ = Kind::psi;
  m.what_ = "psi " + path + ": " + *trigger;
  return m;
}

bool MemoryPressure::drain() {
  if (kind_ == Kind::psi || kind_ == Kind::none) return true;  // PSI: the event is the whole message
  char buf[256];
  for (;;) {
    const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n > 0) continue;
    if (n == 0) return kind_ != Kind::socket;  // the socket's peer is gone
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

}  // namespace llmsvc::service
