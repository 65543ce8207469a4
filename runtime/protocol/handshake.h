// SPDX-License-Identifier: Apache-2.0
// Version negotiation (docs/PROTOCOL.md, "Handshake"): the server picks the highest version
// both sides speak; the client checks that the WELCOME answers its HELLO.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "runtime/protocol/messages.h"

namespace llmsvc::protocol {

// Server side: the version to speak with this client, or Code::unsupported (then the server
// sends ERROR on stream 0 and closes).
Result<uint16_t> negotiate(const Hello& hello, uint16_t server_min = kMinVersion, uint16_t server_max = kMaxVersion);

// Client side: the server chose a version the client offered (else Code::unsupported).
Status check_welcome(const Hello& sent, const Welcome& got);

}  // namespace llmsvc::protocol
