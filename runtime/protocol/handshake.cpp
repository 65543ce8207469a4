// SPDX-License-Identifier: Apache-2.0
// Version negotiation.
#include "runtime/protocol/handshake.h"

#include <algorithm>
#include <string>

namespace llmsvc::protocol {
namespace {

std::string range(uint16_t lo, uint16_t hi) { return std::to_string(lo) + ".." + std::to_string(hi); }

}  // namespace

Result<uint16_t> negotiate(const Hello& hello, uint16_t server_min, uint16_t server_max) {
  const uint16_t lo = std::max(hello.min_version, server_min);
  const uint16_t hi = std::min(hello.max_version, server_max);
  if (lo > hi) {
    return Status{Code::unsupported, "no common protocol version: the client speaks " +
                                         range(hello.min_version, hello.max_version) + ", the server " +
                                         range(server_min, server_max)};
  }
  return hi;
}

Status check_welcome(const Hello& sent, const Welcome& got) {
  if (got.version >= sent.min_version && got.version <= sent.max_version) return Status::Ok();
  return {Code::unsupported, "the server chose protocol version " + std::to_string(got.version) +
                                 ", outside the client's " + range(sent.min_version, sent.max_version)};
}

}  // namespace llmsvc::protocol
