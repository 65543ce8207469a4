// SPDX-License-Identifier: Apache-2.0
// The message type table of docs/PROTOCOL.md ("Message types").
#include "runtime/protocol/types.h"

#include <array>

namespace llmsvc::protocol {
namespace {

constexpr std::array<TypeInfo, 30> kTypes = {{
    {MsgType::hello, "HELLO", Sender::client, StreamRule::zero},
    {MsgType::welcome, "WELCOME", Sender::server, StreamRule::zero},
    {MsgType::ping, "PING", Sender::both, StreamRule::zero},
    {MsgType::pong, "PONG", Sender::both, StreamRule::zero},
    {MsgType::error, "ERROR", Sender::server, StreamRule::any},
    {MsgType::ack, "ACK", Sender::server, StreamRule::request},
    {MsgType::context_new, "CONTEXT_NEW", Sender::client, StreamRule::request},
    {MsgType::context_open, "CONTEXT_OPEN", Sender::client, StreamRule::request},
    {MsgType::context_close, "CONTEXT_CLOSE", Sender::client, StreamRule::request},
    {MsgType::context_delete, "CONTEXT_DELETE", Sender::client, StreamRule::request},
    {MsgType::context_list, "CONTEXT_LIST", Sender::client, StreamRule::request},
    {MsgType::context_info, "CONTEXT_INFO", Sender::client, StreamRule::request},
    {MsgType::context_append, "CONTEXT_APPEND", Sender::client, StreamRule::request, kVersionMessages},
    {MsgType::context_truncate, "CONTEXT_TRUNCATE", Sender::client, StreamRule::request, kVersionMessages},
    {MsgType::context_messages, "CONTEXT_MESSAGES", Sender::client, StreamRule::request, kVersionMessages},
    {MsgType::context_fork, "CONTEXT_FORK", Sender::client, StreamRule::request, kVersionFork},
    {MsgType::call, "CALL", Sender::client, StreamRule::request},
    {MsgType::cancel, "CANCEL", Sender::client, StreamRule::zero},
    {MsgType::stats, "STATS", Sender::client, StreamRule::request},
    {MsgType::model_info, "MODEL_INFO", Sender::client, StreamRule::request, kVersionModelInfo},
    {MsgType::count_tokens, "COUNT_TOKENS", Sender::client, StreamRule::request, kVersionModelInfo},
    {MsgType::context_opened, "CONTEXT_OPENED", Sender::server, StreamRule::request},
    {MsgType::context_list_reply, "CONTEXT_LIST_REPLY", Sender::server, StreamRule::request},
    {MsgType::context_info_reply, "CONTEXT_INFO_REPLY", Sender::server, StreamRule::request},
    {MsgType::context_messages_reply, "CONTEXT_MESSAGES_REPLY", Sender::server, StreamRule::request, kVersionMessages},
    {MsgType::piece, "PIECE", Sender::server, StreamRule::request},
    {MsgType::call_result, "RESULT", Sender::server, StreamRule::request},
    {MsgType::stats_reply, "STATS_REPLY", Sender::server, StreamRule::request},
    {MsgType::model_info_reply, "MODEL_INFO_REPLY", Sender::server, StreamRule::request, kVersionModelInfo},
    {MsgType::count_tokens_reply, "COUNT_TOKENS_REPLY", Sender::server, StreamRule::request, kVersionModelInfo},
}};

}  // namespace

const TypeInfo* find_type(uint16_t raw) {
  for (const TypeInfo& t : kTypes)
    if (static_cast<uint16_t>(t.type) == raw) return &t;
  return nullptr;
}

const TypeInfo& type_info(MsgType type) { return *find_type(static_cast<uint16_t>(type)); }

bool receivable(const TypeInfo& info, Role role) {
  if (info.sender == Sender::both) return true;
  return role == Role::server ? info.sender == Sender::client : info.sender == Sender::server;
}

}  // namespace llmsvc::protocol
