// SPDX-License-Identifier: Apache-2.0
// The protocol's constants: versions, limits, message types and who may send each on which
// stream. docs/PROTOCOL.md is the specification; this file is its tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace llmsvc::protocol {

// Protocol versions this implementation speaks (negotiated by Hello / Welcome). Version 2
// appends the memory policy's figures to RESULT, STATS_REPLY and CONTEXT_INFO_REPLY, version 3
// the count of 3-bit chunks to CONTEXT_INFO_REPLY (docs/PROTOCOL.md section 8.1); a connection
// carries the layouts of the version it agreed on. The statistics tables of
// runtime/core/engine/stats_fields.h name these versions by number (their `since` column).
// Version 4 adds the model information and token counting messages, and token ids (and their
// log-probabilities) in PIECE. Version 5 adds a context's conversation: CONTEXT_APPEND,
// CONTEXT_TRUNCATE, CONTEXT_MESSAGES and its reply, and CALL's reply_only. Version 6 adds
// CONTEXT_FORK, and the count of shared chunks to CONTEXT_INFO_REPLY. Version 7 appends the
// elastic level to CALL's options and to RESULT's stats. Version 8 adds LoRA adapters: a name
// in CONTEXT_NEW and in CALL's options, and the names offered in MODEL_INFO_REPLY. Version 9
// adds prompt compression: the share of the prompt to keep in CALL's options, the share kept
// in RESULT's stats.
inline constexpr uint16_t kMinVersion = 1;
inline constexpr uint16_t kMaxVersion = 9;
inline constexpr uint16_t kVersionPolicyFigures = 2;
inline constexpr uint16_t kVersionQ3Chunks = 3;
inline constexpr uint16_t kVersionModelInfo = 4;
inline constexpr uint16_t kVersionMessages = 5;
inline constexpr uint16_t kVersionFork = 6;
inline constexpr uint16_t kVersionLevels = 7;
inline constexpr uint16_t kVersionAdapters = 8;
inline constexpr uint16_t kVersionPromptKeep = 9;

// Frame header: magic "LLMS", type u16, flags u16, stream u32, payload length u32.
inline constexpr size_t kHeaderBytes = 16;
inline constexpr uint8_t kMagic[4] = {'L', 'L', 'M', 'S'};

// Payload limits. A receiver's limit is announced in Hello / Welcome; before the handshake
// both sides use kHandshakeMaxPayload.
inline constexpr uint32_t kDefaultMaxPayload = 1u << 20;   // 1 MiB
inline constexpr uint32_t kMinMaxPayload = 64u << 10;      // smallest limit a peer may announce
inline constexpr uint32_t kMaxMaxPayload = 16u << 20;      // largest limit a peer may announce
inline constexpr uint32_t kHandshakeMaxPayload = 4096;

// Field limits (bytes unless said otherwise).
inline constexpr size_t kMaxIdBytes = 64;          // context ids: 1..64
inline constexpr size_t kMaxNameBytes = 256;       // client / server / model names
inline constexpr size_t kMaxMessageBytes = 4096;   // error messages
inline constexpr size_t kMaxStopStrings = 16;      // llmsvc_call_options.n_stop
inline constexpr size_t kMaxStopBytes = 256;       // each stop string: 1..256
inline constexpr size_t kMaxPieceBytes = 65536;    // one streamed piece
inline constexpr int32_t kMaxFinishReason = 5;     // LLMSVC_FINISH_CONTEXT_FULL
inline constexpr size_t kMaxPieceIds = 1024;       // token ids (and log-probabilities) in one PIECE
inline constexpr size_t kMaxCountIds = 16384;      // token ids in one COUNT_TOKENS_REPLY
inline constexpr size_t kMaxAppendMessages = 1024; // messages in one CONTEXT_APPEND
inline constexpr size_t kMaxMessagesPage = 64;     // messages in one CONTEXT_MESSAGES_REPLY
inline constexpr size_t kMaxConstraintBytes = 65536; // CALL.options.json_schema, .grammar
inline constexpr size_t kMaxToolsBytes = 65536;      // CONTEXT_NEW.tools (version 6)

// Message types (u16 on the wire). 0x00xx from the client, 0x008x-0x00Fx replies from the
// server; Ping / Pong go both ways.
enum class MsgType : uint16_t {
  hello = 0x0001,
  welcome = 0x0002,
  ping = 0x0003,
  pong = 0x0004,
  error = 0x0005,
  ack = 0x0006,
  context_new = 0x0010,
  context_open = 0x0011,
  context_close = 0x0012,
  context_delete = 0x0013,
  context_list = 0x0014,
  context_info = 0x0015,
  context_append = 0x0016,
  context_truncate = 0x0017,
  context_messages = 0x0018,
  context_fork = 0x0019,
  call = 0x0020,
  cancel = 0x0021,
  stats = 0x0030,
  model_info = 0x0031,
  count_tokens = 0x0032,
  context_opened = 0x0090,
  context_list_reply = 0x0094,
  context_info_reply = 0x0095,
  context_messages_reply = 0x0096,
  piece = 0x00A0,
  call_result = 0x00A1,
  stats_reply = 0x00B0,
  model_info_reply = 0x00B1,
  count_tokens_reply = 0x00B2,
};

enum class Sender : uint8_t { client, server, both };
// Stream ids: connection-level frames use stream 0; requests and their replies a non-zero id
// the client picks (Error may use either: 0 for the connection, else the failed request's).
enum class StreamRule : uint8_t { zero, request, any };

struct TypeInfo {
  MsgType type;
  std::string_view name;  // as in docs/PROTOCOL.md, e.g. "CONTEXT_NEW"
  Sender sender;
  StreamRule stream;
  uint16_t since = 1;  // the protocol version that added it: a connection of an older one refuses it
};

// Every type of this version; nullptr for a value that names none.
const TypeInfo* find_type(uint16_t raw);
const TypeInfo& type_info(MsgType type);

// Which end of the connection a reader or writer is on.
enum class Role : uint8_t { client, server };

// True if `role`'s peer may send `type` (the server receives what clients send).
bool receivable(const TypeInfo& info, Role role);

}  // namespace llmsvc::protocol
