// SPDX-License-Identifier: Apache-2.0
// RawProtocolClient: a client of llmsvcd of a test's own, on a raw socket with the protocol
// library's encoder and decoder (not libllmsvc), for what the library would never send: an
// older protocol version, requests past the daemon's limits that the library refuses first.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/protocol/frame.h"

namespace llmsvc::test {

class RawProtocolClient {
 public:
  // Connects to `path`; messages are laid out and decoded as protocol `version`, strictly.
  RawProtocolClient(const std::string& path, uint16_t version) : version_(version) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{60, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawProtocolClient() { ::close(fd_); }
  RawProtocolClient(const RawProtocolClient&) = delete;
  RawProtocolClient& operator=(const RawProtocolClient&) = delete;
  bool connected() const { return connected_; }
  int fd() const { return fd_; }  // for a test that writes raw bytes or reads nothing

  bool send(uint32_t stream, const protocol::Message& m) {
    std::vector<uint8_t> out;
    if (!protocol::append_frame(out, protocol::Role::client, stream, m, protocol::kDefaultMaxPayload, version_).ok())
      return false;
    return ::send(fd_, out.data(), out.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(out.size());
  }
  // HELLO offering versions [lowest, the client's], and the WELCOME that answers it.
  Result<protocol::Welcome> handshake(const std::string& name, uint16_t lowest = protocol::kMinVersion) {
    if (!send(0, protocol::Hello{lowest, version_, protocol::kDefaultMaxPayload, name}))
      return Status(Code::unavailable, "could not send HELLO");
    auto m = receive();
    if (!m.ok()) return m.status();
    if (const auto* w = std::get_if<protocol::Welcome>(&*m)) return *w;
    return Status(Code::internal, "HELLO was not answered by WELCOME");
  }
  // The next frame, decoded as the client's version (a later version's field would be
  // trailing bytes, an error).
  Result<protocol::Message> receive(uint32_t* stream = nullptr) {
    for (;;) {
      if (auto f = reader_.next()) {
        if (stream) *stream = f->stream;
        return protocol::decode_frame(*f, version_);
      }
      uint8_t buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return Status(Code::unavailable, "connection closed");
      if (!reader_.feed({buf, static_cast<size_t>(n)}).ok()) return reader_.error();
    }
  }
  // The final answer on `stream`, skipping PIECEs.
  Result<protocol::Message> answer(uint32_t stream) {
    for (;;) {
      uint32_t got = 0;
      auto m = receive(&got);
      if (!m.ok()) return m;
      EXPECT_EQ(got, stream);
      if (!std::holds_alternative<protocol::Piece>(*m)) return m;
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  uint16_t version_;
  protocol::FrameReader reader_{protocol::Role::client, protocol::kDefaultMaxPayload};
};

}  // namespace llmsvc::test
