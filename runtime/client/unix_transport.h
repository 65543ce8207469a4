// SPDX-License-Identifier: Apache-2.0
// The daemon transport: llmsvc_bind with target "unix:PATH". Every Transport operation is
// a protocol request to llmsvcd over one shared connection (ClientConnection).
//
// Context handles: the daemon names an open context by a per-connection handle; this
// transport keeps one per context id the app has open (counted, closed with the last app
// handle). When the connection is lost, requests in flight fail with Code::unavailable;
// the next operation reconnects and reopens every open context by id, so the app's
// llmsvc_context handles survive a daemon restart.
#pragma once

#include <memory>
#include <string>

#include "runtime/transport/transport.h"

namespace llmsvc::client {

// Connects to llmsvcd at `socket_path` (unavailable when it cannot be reached).
Result<std::unique_ptr<Transport>> make_unix_transport(const std::string& socket_path);

}  // namespace llmsvc::client
