// SPDX-License-Identifier: Apache-2.0
// ConnectionState: the rules of docs/PROTOCOL.md section 6 over sent and received messages.
#include "runtime/protocol/connection.h"

#include <string>

namespace llmsvc::protocol {
namespace {

Status violation(const char* who, std::string what) {
  return Status(Code::invalid_argument, std::string(who) + ": " + what);
}

std::string name_of(MsgType t) { return std::string(type_info(t).name); }

bool is_request(MsgType t) {
  switch (t) {
    case MsgType::context_new:
    case MsgType::context_open:
    case MsgType::context_close:
    case MsgType::context_delete:
    case MsgType::context_list:
    case MsgType::context_info:
    case MsgType::context_append:
    case MsgType::context_truncate:
    case MsgType::context_messages:
    case MsgType::context_fork:
    case MsgType::call:
    case MsgType::stats:
    case MsgType::model_info:
    case MsgType::count_tokens:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool is_final_answer(const Message& m) {
  if (const auto* list = std::get_if<ContextListReply>(&m)) return !list->more;
  return type_of(m) != MsgType::piece;
}

bool answers(MsgType request, MsgType answer) {
  if (answer == MsgType::error) return is_request(request);
  switch (request) {
    case MsgType::context_new:
    case MsgType::context_open:
    case MsgType::context_fork:
      return answer == MsgType::context_opened;
    case MsgType::context_close:
    case MsgType::context_delete:
    case MsgType::context_append:
    case MsgType::context_truncate:
      return answer == MsgType::ack;
    case MsgType::context_messages:
      return answer == MsgType::context_messages_reply;
    case MsgType::context_list:
      return answer == MsgType::context_list_reply;
    case MsgType::context_info:
      return answer == MsgType::context_info_reply;
    case MsgType::call:
      return answer == MsgType::piece || answer == MsgType::call_result;
    case MsgType::stats:
      return answer == MsgType::stats_reply;
    case MsgType::model_info:
      return answer == MsgType::model_info_reply;
    case MsgType::count_tokens:
      return answer == MsgType::count_tokens_reply;
    default:
      return false;
  }
}

bool ConnectionState::call_in_flight(uint32_t stream) const {
  auto it = streams_.find(stream);
  return it != streams_.end() && it->second == MsgType::call;
}

Status ConnectionState::track_request(uint32_t stream, MsgType type, const char* who) {
  if (phase_ != Phase::ready) return violation(who, name_of(type) + " before the handshake is complete");
  LLMSVC_RETURN_IF_ERROR(check_version(type, who));
  if (stream == 0) return violation(who, name_of(type) + " on stream 0");
  if (streams_.count(stream)) return violation(who, name_of(type) + " on stream " + std::to_string(stream) +
                                                        ", which has a request in flight");
  streams_.emplace(stream, type);
  if (type == MsgType::call) ++calls_;
  return Status::Ok();
}

Status ConnectionState::check_version(MsgType type, const char* who) const {
  if (type_info(type).since <= version_) return Status::Ok();
  return violation(who, name_of(type) + " is a message of protocol version " + std::to_string(type_info(type).since) +
                            ", this connection speaks " + std::to_string(version_));
}

Result<bool> ConnectionState::track_answer(uint32_t stream, const Message& m, const char* who) {
  const MsgType type = type_of(m);
  if (phase_ != Phase::ready) return violation(who, name_of(type) + " before the handshake is complete");
  LLMSVC_RETURN_IF_ERROR(check_version(type, who));
  auto it = streams_.find(stream);
  if (it == streams_.end()) return violation(who, name_of(type) + " on stream " + std::to_string(stream) +
                                                      ", which has no request in flight");
  if (!answers(it->second, type))
    return violation(who, name_of(type) + " does not answer " + name_of(it->second) + " (stream " +
                              std::to_string(stream) + ")");
  if (!is_final_answer(m)) return false;
  if (it->second == MsgType::call) --calls_;
  streams_.erase(it);
  return true;
}

Status ConnectionState::on_send(uint32_t stream, const Message& m) {
  const MsgType type = type_of(m);
  const char* who = self_ == Role::client ? "client" : "server";
  if (phase_ == Phase::closed) return violation(who, name_of(type) + " after the connection was closed");
  if (type == MsgType::ping || type == MsgType::pong) {
    if (phase_ != Phase::ready) return violation(who, name_of(type) + " before the handshake is complete");
    return Status::Ok();
  }
  if (self_ == Role::client) {
    if (type == MsgType::hello) {
      if (hello_seen_) return violation(who, "a second HELLO");
      hello_seen_ = true;
      return Status::Ok();
    }
    if (type == MsgType::cancel) {
      if (phase_ != Phase::ready) return violation(who, "CANCEL before the handshake is complete");
      return Status::Ok();
    }
    if (!is_request(type)) return violation(who, "a client does not send " + name_of(type));
    if (type == MsgType::call && phase_ == Phase::ready && calls_ >= max_calls_)
      return Status(Code::quota_exceeded, "the connection already has " + std::to_string(calls_) +
                                              " calls in flight, the server's limit");
    return track_request(stream, type, who);
  }
  // Server.
  if (type == MsgType::welcome) {
    if (!hello_seen_ || phase_ != Phase::handshake) return violation(who, "WELCOME not answering a HELLO");
    max_calls_ = std::get<Welcome>(m).max_calls;
    version_ = std::get<Welcome>(m).version;
    phase_ = Phase::ready;
    return Status::Ok();
  }
  if (type == MsgType::error && stream == 0) {
    phase_ = Phase::closed;
    return Status::Ok();
  }
  auto final_answer = track_answer(stream, m, who);
  return final_answer.status();
}

Result<Received> ConnectionState::on_receive(uint32_t stream, const Message& m) {
  const MsgType type = type_of(m);
  const char* who = self_ == Role::client ? "server" : "client";  // the peer broke the rule
  Received r;
  if (phase_ == Phase::closed) return violation(who, name_of(type) + " after the connection was closed");
  if (self_ == Role::server) {
    if (phase_ == Phase::handshake) {
      if (type != MsgType::hello) {
        return violation(who, hello_seen_ ? name_of(type) + " before WELCOME"
                                          : "the first frame must be HELLO, not " + name_of(type));
      }
      if (hello_seen_) return violation(who, "a second HELLO");
      hello_seen_ = true;
      return r;
    }
    if (type == MsgType::hello) return violation(who, "a second HELLO");
    if (type == MsgType::ping || type == MsgType::pong) return r;
    if (type == MsgType::cancel) {
      r.ignore = !call_in_flight(std::get<Cancel>(m).call);
      return r;
    }
    LLMSVC_RETURN_IF_ERROR(track_request(stream, type, who));
    r.request = type;
    if (type == MsgType::call && calls_ > max_calls_)
      r.refuse = Status(Code::quota_exceeded, "more than " + std::to_string(max_calls_) +
                                                  " calls in flight on this connection");
    return r;
  }
  // Client.
  if (type == MsgType::welcome) {
    if (!hello_seen_ || phase_ != Phase::handshake) return violation(who, "WELCOME not answering a HELLO");
    max_calls_ = std::get<Welcome>(m).max_calls;
    version_ = std::get<Welcome>(m).version;
    phase_ = Phase::ready;
    return r;
  }
  if (type == MsgType::error && stream == 0) {
    phase_ = Phase::closed;
    return r;
  }
  if (type == MsgType::ping || type == MsgType::pong) {
    if (phase_ != Phase::ready) return violation(who, name_of(type) + " before the handshake is complete");
    return r;
  }
  if (auto it = streams_.find(stream); it != streams_.end()) r.request = it->second;
  auto final_answer = track_answer(stream, m, who);
  if (!final_answer.ok()) return final_answer.status();
  r.ends_request = *final_answer;
  return r;
}

Status ConnectionState::on_bad_request(uint32_t stream, MsgType type) {
  if (self_ != Role::server || !is_request(type))
    return violation("client", "a malformed " + name_of(type) + " frame");
  return track_request(stream, type, "client");
}

}  // namespace llmsvc::protocol
