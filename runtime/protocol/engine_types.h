// SPDX-License-Identifier: Apache-2.0
// The messages that mirror the engine's types, converted both ways: the daemon fills them
// from the engine, the client turns them back into what the C API writes. Each mapping lists
// its fields once (`*_fields(wire, core, op)`), for both directions.
#pragma once

#include "base/status.h"
#include "runtime/core/engine/call_types.h"
#include "runtime/protocol/messages.h"

namespace llmsvc::protocol {

// Sampling, max_tokens, stop strings and the SLO ratios, both ways (the values unchecked:
// the daemon checks what it receives with check_call_params).
CallOptions to_wire(const CallParams& params);
CallParams from_wire(const CallOptions& options);
ContextInfoReply to_wire(const llmsvc::ContextInfo& info);
llmsvc::ContextInfo from_wire(const ContextInfoReply& reply);
StatsReply to_wire(const EngineStats& stats, int32_t open_contexts);
EngineStats from_wire(const StatsReply& reply);
// The RESULT of a call that ran (ok or cancelled).
CallResult to_wire(const Status& status, const llmsvc::CallStats& stats);
void from_wire(const CallResult& result, llmsvc::CallStats* stats);
// A failure as an ERROR (the message cut to the protocol's limit, never in a code point).
Error error_message(const Status& status);

}  // namespace llmsvc::protocol
