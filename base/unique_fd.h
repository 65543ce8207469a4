// SPDX-License-Identifier: Apache-2.0
// UniqueFd: owns a file descriptor, closes it once.
#pragma once

#include <unistd.h>

#include <cerrno>

#include <utility>

namespace llmsvc::fileio {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Closes now; returns close()'s errno (0 on success) for callers that must see write-back errors.
  int close() {
    if (fd_ < 0) return 0;
    const int r = ::close(std::exchange(fd_, -1));
    return r == 0 ? 0 : errno;
  }
  // Gives up ownership without closing.
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace llmsvc::fileio
