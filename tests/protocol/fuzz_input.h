// SPDX-License-Identifier: Apache-2.0
// The input format of fuzz/protocol_fuzzer.cpp, shared with its seed writer
// (fuzz/make_protocol_seeds.cpp) and the test that reads the committed seeds:
//
//   byte 0   mode: bit 0 = the receiver (0: a server reading a client's frames, 1: a client
//            reading a server's); bit 1 = payload mode; bits 2-7 = feed chunk size - 1
//   stream mode:  bytes 1.. are a byte stream fed to a FrameReader in chunks of that size
//   payload mode: bytes 1-2 are a message type (u16 LE), bytes 3.. its payload
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/protocol/types.h"

namespace llmsvc::test {

inline constexpr uint8_t kFuzzClientReads = 1;
inline constexpr uint8_t kFuzzPayloadMode = 2;

inline protocol::Role fuzz_receiver(uint8_t mode) {
  return (mode & kFuzzClientReads) ? protocol::Role::client : protocol::Role::server;
}
inline size_t fuzz_chunk(uint8_t mode) { return 1 + (mode >> 2); }

inline std::vector<uint8_t> fuzz_stream_input(protocol::Role receiver, size_t chunk, std::span<const uint8_t> bytes) {
  std::vector<uint8_t> v;
  v.push_back(static_cast<uint8_t>(((chunk - 1) << 2) | (receiver == protocol::Role::client ? kFuzzClientReads : 0)));
  v.insert(v.end(), bytes.begin(), bytes.end());
  return v;
}

inline std::vector<uint8_t> fuzz_payload_input(protocol::MsgType type, std::span<const uint8_t> payload) {
  const auto t = static_cast<uint16_t>(type);
  std::vector<uint8_t> v = {kFuzzPayloadMode, static_cast<uint8_t>(t & 0xFF), static_cast<uint8_t>(t >> 8)};
  v.insert(v.end(), payload.begin(), payload.end());
  return v;
}

}  // namespace llmsvc::test
