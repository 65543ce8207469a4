// SPDX-License-Identifier: Apache-2.0
// The messages of the protocol (docs/PROTOCOL.md, "Messages"). Each struct lists its fields
// once, in wire order, in `fields(io, m)`: a template run by the Encoder (m const) and by the
// Decoder (m filled in), so both directions check the same rules. The option, info, result and
// stats messages mirror the engine's figures behind the C structs of include/llmsvc/llmsvc.h;
// the info, result and stats figures are declared and listed by the tables of
// runtime/core/engine/stats_fields.h, which the engine's structs expand too.
//
// Versions: a later version only appends fields, after an `io.version()` check, so one list
// serves every version (docs/PROTOCOL.md section 8). A field a connection's version lacks is
// neither sent nor read: it stays 0.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "base/status.h"
#include "runtime/core/engine/message_types.h"
#include "runtime/core/engine/info_types.h"
#include "runtime/core/engine/stats_fields.h"
#include "runtime/protocol/types.h"
#include "runtime/protocol/wire.h"

namespace llmsvc::protocol {

inline constexpr Bounds kIdBounds{1, kMaxIdBytes};
inline constexpr Bounds kNameBounds{0, kMaxNameBytes};
inline constexpr Bounds kMessageBounds{0, kMaxMessageBytes};
inline constexpr size_t kMaxListIds = 1024;  // ids in one CONTEXT_LIST_REPLY
inline constexpr uint32_t kMaxU32 = 0xFFFFFFFFu;

// One figure of a statistics table (runtime/core/engine/stats_fields.h): its type picks the
// encoding, and a connection whose version predates it neither sends nor reads it.
template <class IO, class T>
Status figure(IO& io, uint16_t since, const char* field, T& v) {
  using V = std::remove_const_t<T>;
  static_assert(std::is_same_v<V, int32_t> || std::is_same_v<V, uint64_t> || std::is_same_v<V, double>,
                "a figure is int32_t (count), uint64_t (u64) or double (f64)");
  if (io.version() < since) return Status::Ok();
  if constexpr (std::is_same_v<V, int32_t>) return io.count(field, v);
  else if constexpr (std::is_same_v<V, uint64_t>) return io.u64(field, v);
  else return io.f64(field, v);
}

// A table's `since` column never decreases and names versions this file speaks: skipping the
// fields a version lacks then cuts the payload after that version's own, as appending requires
// (docs/PROTOCOL.md section 8).
constexpr bool appended_only(std::initializer_list<int> since) {
  return std::ranges::is_sorted(since) && *std::ranges::max_element(since) <= kMaxVersion;
}
#define LLMSVC_FIGURE_SINCE(type, name, since, ...) since,
static_assert(appended_only({LLMSVC_CALL_STATS_FIELDS(LLMSVC_FIGURE_SINCE)}));
static_assert(appended_only({LLMSVC_ENGINE_STATS_FIELDS(LLMSVC_FIGURE_SINCE)}));
static_assert(appended_only({LLMSVC_CONTEXT_INFO_FIELDS(LLMSVC_FIGURE_SINCE)}));
#undef LLMSVC_FIGURE_SINCE

// Handshake. Both are extensible: a decoder ignores bytes after the fields it knows, since a
// newer peer's handshake must reach an older one before any version is agreed.
struct Hello {
  static constexpr MsgType kType = MsgType::hello;
  static constexpr bool kExtensible = true;
  uint16_t min_version = kMinVersion;
  uint16_t max_version = kMaxVersion;
  uint32_t max_frame_payload = kDefaultMaxPayload;  // the client's receive limit
  std::string client_name;                          // informational only, never trusted

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.u16_in("min_version", m.min_version, 1, 0xFFFF));
    LLMSVC_RETURN_IF_ERROR(io.u16_in("max_version", m.max_version, 1, 0xFFFF));
    if (m.max_version < m.min_version) return io.fail("max_version", "is below min_version");
    LLMSVC_RETURN_IF_ERROR(io.u32_in("max_frame_payload", m.max_frame_payload, kMinMaxPayload, kMaxMaxPayload));
    return io.text("client_name", m.client_name, kNameBounds);
  }
  bool operator==(const Hello&) const = default;
};

struct Welcome {
  static constexpr MsgType kType = MsgType::welcome;
  static constexpr bool kExtensible = true;
  uint16_t version = kMaxVersion;                   // chosen; within the Hello's range
  uint32_t max_frame_payload = kDefaultMaxPayload;  // the server's receive limit
  uint32_t max_prompt_bytes = 0;                    // CALL.prompt and CONTEXT_NEW.system_prompt
  uint32_t max_context_tokens = 0;                  // tokens per context (n_ctx)
  uint32_t max_calls = 1;                           // calls in flight on this connection
  uint32_t idle_timeout_ms = 0;                     // 0: none; else ping more often than this
  std::string server;                               // e.g. "llmsvcd 1.0.0"
  std::string model;                                // the model's name

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.u16_in("version", m.version, 1, 0xFFFF));
    LLMSVC_RETURN_IF_ERROR(io.u32_in("max_frame_payload", m.max_frame_payload, kMinMaxPayload, kMaxMaxPayload));
    LLMSVC_RETURN_IF_ERROR(io.u32("max_prompt_bytes", m.max_prompt_bytes));
    LLMSVC_RETURN_IF_ERROR(io.u32("max_context_tokens", m.max_context_tokens));
    LLMSVC_RETURN_IF_ERROR(io.u32_in("max_calls", m.max_calls, 1, kMaxU32));
    LLMSVC_RETURN_IF_ERROR(io.u32("idle_timeout_ms", m.idle_timeout_ms));
    LLMSVC_RETURN_IF_ERROR(io.text("server", m.server, kNameBounds));
    return io.text("model", m.model, kNameBounds);
  }
  bool operator==(const Welcome&) const = default;
};

// PING / PONG: a keep-alive; PONG echoes the nonce.
template <MsgType T>
struct Keepalive {
  static constexpr MsgType kType = T;
  static constexpr bool kExtensible = false;
  uint64_t nonce = 0;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    return io.u64("nonce", m.nonce);
  }
  bool operator==(const Keepalive&) const = default;
};
using Ping = Keepalive<MsgType::ping>;
using Pong = Keepalive<MsgType::pong>;

// A request's failure (its stream), or the connection's (stream 0; the server then closes).
struct Error {
  static constexpr MsgType kType = MsgType::error;
  static constexpr bool kExtensible = false;
  uint32_t status = code_to_wire(Code::internal);  // llmsvc_status, never LLMSVC_OK
  std::string message;

  Status to_status() const { return status_from_wire(status, message); }
  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.status("status", m.status, false));
    return io.text("message", m.message, kMessageBounds);
  }
  bool operator==(const Error&) const = default;
};

// Messages without fields: ACK (success of CONTEXT_CLOSE / CONTEXT_DELETE), CONTEXT_LIST, STATS.
template <MsgType T>
struct Empty {
  static constexpr MsgType kType = T;
  static constexpr bool kExtensible = false;

  template <class IO, class M>
  static Status fields(IO&, M&) {
    return Status::Ok();
  }
  bool operator==(const Empty&) const = default;
};
using Ack = Empty<MsgType::ack>;
using ContextList = Empty<MsgType::context_list>;
using Stats = Empty<MsgType::stats>;
using ModelInfoRequest = Empty<MsgType::model_info>;  // MODEL_INFO, since version 4

// llmsvc_context_options.
struct ContextNew {
  static constexpr MsgType kType = MsgType::context_new;
  static constexpr bool kExtensible = false;
  std::optional<std::string> id;             // absent: the server generates one
  std::optional<std::string> system_prompt;  // absent: none / the template's default
  bool raw = false;
  std::string tools{};  // version 6: the tools the conversation may call (JSON; "": none)
  std::string adapter{};  // version 8: its LoRA adapter's name ("": none)

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.opt_text("id", m.id, kIdBounds));
    LLMSVC_RETURN_IF_ERROR(io.opt_text("system_prompt", m.system_prompt, kAnyText));
    LLMSVC_RETURN_IF_ERROR(io.boolean("raw", m.raw));
    if (io.version() < kVersionFork) return Status::Ok();
    LLMSVC_RETURN_IF_ERROR(io.text("tools", m.tools, Bounds{0, kMaxToolsBytes}));
    if (io.version() < kVersionAdapters) return Status::Ok();
    return io.text("adapter", m.adapter, Bounds{0, 64});
  }
  bool operator==(const ContextNew&) const = default;
};

// Requests naming one context by id: CONTEXT_OPEN, CONTEXT_DELETE, CONTEXT_INFO.
template <MsgType T>
struct IdRequest {
  static constexpr MsgType kType = T;
  static constexpr bool kExtensible = false;
  std::string id;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    return io.text("id", m.id, kIdBounds);
  }
  bool operator==(const IdRequest&) const = default;
};
using ContextOpen = IdRequest<MsgType::context_open>;
using ContextDelete = IdRequest<MsgType::context_delete>;
using ContextInfo = IdRequest<MsgType::context_info>;

// Reply to CONTEXT_NEW / CONTEXT_OPEN: a handle valid on this connection until closed.
struct ContextOpened {
  static constexpr MsgType kType = MsgType::context_opened;
  static constexpr bool kExtensible = false;
  uint32_t handle = 0;
  std::string id;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.u32_in("handle", m.handle, 1, kMaxU32));
    return io.text("id", m.id, kIdBounds);
  }
  bool operator==(const ContextOpened&) const = default;
};

struct ContextClose {
  static constexpr MsgType kType = MsgType::context_close;
  static constexpr bool kExtensible = false;
  uint32_t handle = 0;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    return io.u32_in("handle", m.handle, 1, kMaxU32);
  }
  bool operator==(const ContextClose&) const = default;
};

// One part of the reply to CONTEXT_LIST; the last part has more = false.
struct ContextListReply {
  static constexpr MsgType kType = MsgType::context_list_reply;
  static constexpr bool kExtensible = false;
  bool more = false;
  std::vector<std::string> ids;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.boolean("more", m.more));
    return io.text_list("ids", m.ids, kMaxListIds, kIdBounds);
  }
  bool operator==(const ContextListReply&) const = default;
};

// llmsvc_context_info: the id and mode, then LLMSVC_CONTEXT_INFO_FIELDS.
struct ContextInfoReply {
  static constexpr MsgType kType = MsgType::context_info_reply;
  static constexpr bool kExtensible = false;
  std::string id;
  bool raw = false;
  LLMSVC_CONTEXT_INFO_FIELDS(LLMSVC_STATS_MEMBER)

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.text("id", m.id, kIdBounds));
    LLMSVC_RETURN_IF_ERROR(io.boolean("raw", m.raw));
#define LLMSVC_WIRE_FIGURE(type, name, since, ...) LLMSVC_RETURN_IF_ERROR(figure(io, since, #name, m.name));
    LLMSVC_CONTEXT_INFO_FIELDS(LLMSVC_WIRE_FIGURE)
#undef LLMSVC_WIRE_FIGURE
    return Status::Ok();
  }
  bool operator==(const ContextInfoReply&) const = default;
};

// llmsvc_call_options (defaults as llmsvc_call_options_init). The decoder checks form
// (finite floats, stop strings 1..256 bytes of UTF-8, at most 16); the receiver checks the
// values' ranges with the C API's rules.
struct CallOptions {
  uint64_t seed = 0;
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repeat_penalty = 1.0f;
  int32_t repeat_last_n = 64;
  int32_t max_tokens = 256;
  std::vector<std::string> stop;
  float slo_ttft_ratio = 0.0f;
  float slo_tpot_ratio = 0.0f;
  bool token_ids = false;  // version 4: PIECEs carry their token ids (llmsvc_call_options.on_tokens)
  bool logprobs = false;   // version 4: ... and their log-probabilities
  bool reply_only = false; // version 5: no prompt, the reply to the conversation (llmsvc_context_generate)
  std::string json_schema; // version 5: structured output ("": none)
  std::string grammar;
  int32_t level_percent = 0; // version 7: the elastic level in per cent (0: the service chooses)
  std::string adapter;       // version 8: the LoRA adapter's name ("": the context's)
  float prompt_keep = 0.0f;  // version 9: the share of the prompt's tokens to keep (0: the service chooses)
  bool operator==(const CallOptions&) const = default;
};

// The stream id of a CALL is the call's id: PIECEs and the RESULT come back on it.
struct Call {
  static constexpr MsgType kType = MsgType::call;
  static constexpr bool kExtensible = false;
  uint32_t handle = 0;
  std::string prompt;
  CallOptions options;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    auto& o = m.options;
    LLMSVC_RETURN_IF_ERROR(io.u32_in("handle", m.handle, 1, kMaxU32));
    LLMSVC_RETURN_IF_ERROR(io.text("prompt", m.prompt, kAnyText));
    LLMSVC_RETURN_IF_ERROR(io.u64("options.seed", o.seed));
    LLMSVC_RETURN_IF_ERROR(io.f32("options.temperature", o.temperature));
    LLMSVC_RETURN_IF_ERROR(io.i32("options.top_k", o.top_k));
    LLMSVC_RETURN_IF_ERROR(io.f32("options.top_p", o.top_p));
    LLMSVC_RETURN_IF_ERROR(io.f32("options.min_p", o.min_p));
    LLMSVC_RETURN_IF_ERROR(io.f32("options.repeat_penalty", o.repeat_penalty));
    LLMSVC_RETURN_IF_ERROR(io.i32("options.repeat_last_n", o.repeat_last_n));
    LLMSVC_RETURN_IF_ERROR(io.i32("options.max_tokens", o.max_tokens));
    LLMSVC_RETURN_IF_ERROR(io.text_list("options.stop", o.stop, kMaxStopStrings, Bounds{1, kMaxStopBytes}));
    LLMSVC_RETURN_IF_ERROR(io.f32("options.slo_ttft_ratio", o.slo_ttft_ratio));
    LLMSVC_RETURN_IF_ERROR(io.f32("options.slo_tpot_ratio", o.slo_tpot_ratio));
    if (io.version() < kVersionModelInfo) return Status::Ok();
    LLMSVC_RETURN_IF_ERROR(io.boolean("options.token_ids", o.token_ids));
    LLMSVC_RETURN_IF_ERROR(io.boolean("options.logprobs", o.logprobs));
    if (io.version() < kVersionMessages) return Status::Ok();
    LLMSVC_RETURN_IF_ERROR(io.boolean("options.reply_only", o.reply_only));
    LLMSVC_RETURN_IF_ERROR(io.text("options.json_schema", o.json_schema, Bounds{0, kMaxConstraintBytes}));
    LLMSVC_RETURN_IF_ERROR(io.text("options.grammar", o.grammar, Bounds{0, kMaxConstraintBytes}));
    if (io.version() < kVersionLevels) return Status::Ok();
    LLMSVC_RETURN_IF_ERROR(io.i32("options.level_percent", o.level_percent));
    if (io.version() < kVersionAdapters) return Status::Ok();
    LLMSVC_RETURN_IF_ERROR(io.text("options.adapter", o.adapter, Bounds{0, 64}));
    if (io.version() < kVersionPromptKeep) return Status::Ok();
    return io.f32("options.prompt_keep", o.prompt_keep);
  }
  bool operator==(const Call&) const = default;
};

// Asks the server to cancel the call whose CALL used stream `call` (no reply of its own).
struct Cancel {
  static constexpr MsgType kType = MsgType::cancel;
  static constexpr bool kExtensible = false;
  uint32_t call = 0;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    return io.u32_in("call", m.call, 1, kMaxU32);
  }
  bool operator==(const Cancel&) const = default;
};

// One streamed piece of a call's output (llmsvc_token_fn): valid UTF-8, never a split code point.
// Version 4: the ids of the tokens behind it (when the CALL asked for them), and their
// log-probabilities (when it asked for those too: as many as ids, each finite and <= 0).
struct Piece {
  static constexpr MsgType kType = MsgType::piece;
  static constexpr bool kExtensible = false;
  int32_t token = 0;
  std::string text;
  std::vector<int32_t> ids;
  std::vector<float> logprobs;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.i32("token", m.token));
    LLMSVC_RETURN_IF_ERROR(io.text("text", m.text, Bounds{0, kMaxPieceBytes}));
    if (io.version() < kVersionModelInfo) return Status::Ok();
    LLMSVC_RETURN_IF_ERROR(io.records("ids", m.ids, kMaxPieceIds, 4, [&](auto& id) { return io.i32("ids", id); }));
    LLMSVC_RETURN_IF_ERROR(io.records("logprobs", m.logprobs, kMaxPieceIds, 4, [&](auto& lp) {
      LLMSVC_RETURN_IF_ERROR(io.f32("logprobs", lp));
      return lp <= 0.0f ? Status::Ok() : io.fail("logprobs", "a log-probability above 0");
    }));
    if (!m.logprobs.empty() && m.logprobs.size() != m.ids.size())
      return io.fail("logprobs", "not one per id");
    return Status::Ok();
  }
  bool operator==(const Piece&) const = default;
};

// llmsvc_call_result without struct_size and finish_reason: LLMSVC_CALL_STATS_FIELDS, the
// engine's CallStats without its token ids.
struct CallStats {
  LLMSVC_CALL_STATS_FIELDS(LLMSVC_STATS_MEMBER)
  bool operator==(const CallStats&) const = default;
};

// The end of a call (RESULT): its status, and the stats the C API writes to `out`.
struct CallResult {
  static constexpr MsgType kType = MsgType::call_result;
  static constexpr bool kExtensible = false;
  uint32_t status = 0;      // llmsvc_status
  std::string message;      // llmsvc_last_error() text when status is not LLMSVC_OK
  int32_t finish_reason = 0;  // llmsvc_finish_reason
  CallStats stats;

  Status to_status() const { return status_from_wire(status, message); }
  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.status("status", m.status, true));
    LLMSVC_RETURN_IF_ERROR(io.text("message", m.message, kMessageBounds));
    LLMSVC_RETURN_IF_ERROR(io.enum8("finish_reason", m.finish_reason, kMaxFinishReason));
#define LLMSVC_WIRE_FIGURE(type, name, since, ...) \
  LLMSVC_RETURN_IF_ERROR(figure(io, since, "stats." #name, m.stats.name));
    LLMSVC_CALL_STATS_FIELDS(LLMSVC_WIRE_FIGURE)
#undef LLMSVC_WIRE_FIGURE
    return Status::Ok();
  }
  bool operator==(const CallResult&) const = default;
};

// llmsvc_stats without struct_size: the service's open handles, then LLMSVC_ENGINE_STATS_FIELDS.
struct StatsReply {
  static constexpr MsgType kType = MsgType::stats_reply;
  static constexpr bool kExtensible = false;
  int32_t open_contexts = 0;
  LLMSVC_ENGINE_STATS_FIELDS(LLMSVC_STATS_MEMBER)

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.count("open_contexts", m.open_contexts));
#define LLMSVC_WIRE_FIGURE(type, name, since, ...) LLMSVC_RETURN_IF_ERROR(figure(io, since, #name, m.name));
    LLMSVC_ENGINE_STATS_FIELDS(LLMSVC_WIRE_FIGURE)
#undef LLMSVC_WIRE_FIGURE
    return Status::Ok();
  }
  bool operator==(const StatsReply&) const = default;
};

// A special token in MODEL_INFO_REPLY: its id (-1: none) and text.
template <class IO, class T>
Status special_token(IO& io, const char* id_field, const char* text_field, T& t) {
  LLMSVC_RETURN_IF_ERROR(io.i32(id_field, t.id));
  if (t.id < -1) return io.fail(id_field, "is below -1");
  return io.text(text_field, t.text, Bounds{0, kMaxInfoNameBytes});
}

// The service's model and readiness (llmsvc_model_info), the answer to MODEL_INFO.
struct ModelInfoReply {
  static constexpr MsgType kType = MsgType::model_info_reply;
  static constexpr bool kExtensible = false;
  llmsvc::ModelInfo info;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    auto& i = m.info;
    const Bounds name{0, kMaxInfoNameBytes};
    LLMSVC_RETURN_IF_ERROR(io.boolean("ready", i.ready));
    LLMSVC_RETURN_IF_ERROR(io.text("architecture", i.architecture, name));
    LLMSVC_RETURN_IF_ERROR(io.text("name", i.name, name));
    LLMSVC_RETURN_IF_ERROR(io.u64("n_params", i.n_params));
    LLMSVC_RETURN_IF_ERROR(io.count("n_ctx_train", i.n_ctx_train));
    LLMSVC_RETURN_IF_ERROR(io.count("n_ctx", i.n_ctx));
    LLMSVC_RETURN_IF_ERROR(io.count("n_vocab", i.n_vocab));
    LLMSVC_RETURN_IF_ERROR(io.count("n_layer", i.n_layer));
    LLMSVC_RETURN_IF_ERROR(io.count("n_embd", i.n_embd));
    LLMSVC_RETURN_IF_ERROR(io.count("n_head", i.n_head));
    LLMSVC_RETURN_IF_ERROR(io.count("n_head_kv", i.n_head_kv));
    LLMSVC_RETURN_IF_ERROR(io.u64("weight_bytes", i.weight_bytes));
    LLMSVC_RETURN_IF_ERROR(io.records("weight_types", i.weight_types, kMaxWeightTypes, 4 + 1 + 4 + 8, [&](auto& w) {
      LLMSVC_RETURN_IF_ERROR(io.text("weight_types.type", w.type, Bounds{1, 32}));
      LLMSVC_RETURN_IF_ERROR(io.count("weight_types.tensors", w.tensors));
      return io.u64("weight_types.bytes", w.bytes);
    }));
    LLMSVC_RETURN_IF_ERROR(io.boolean("has_chat_template", i.has_chat_template));
    LLMSVC_RETURN_IF_ERROR(special_token(io, "bos.id", "bos.text", i.bos));
    LLMSVC_RETURN_IF_ERROR(special_token(io, "eos.id", "eos.text", i.eos));
    LLMSVC_RETURN_IF_ERROR(special_token(io, "eot.id", "eot.text", i.eot));
    LLMSVC_RETURN_IF_ERROR(io.text_list("devices", i.devices, kMaxInfoDevices, Bounds{1, 64}));
    if (io.version() < kVersionAdapters) return Status::Ok();
    return io.text_list("adapters", i.adapters, llmsvc::kMaxAdapters, Bounds{1, 64});
  }
  bool operator==(const ModelInfoReply&) const = default;
};

// A conversation's messages as records: role (an llmsvc_role) and content.
template <class IO, class V>
Status chat_messages(IO& io, const char* field, V& list, size_t max) {
  return io.records(field, list, max, 1 + 4, [&](auto& m) {
    int32_t role = static_cast<int32_t>(m.role);
    LLMSVC_RETURN_IF_ERROR(io.enum8("messages.role", role, static_cast<int32_t>(llmsvc::kMaxMessageRole)));
    if constexpr (!std::is_const_v<std::remove_reference_t<decltype(m)>>) m.role = static_cast<llmsvc::MessageRole>(role);
    return io.text("messages.content", m.content, kAnyText);
  });
}

// Version 6: each message's tool calls (a JSON array, "" for none), a list after the messages.
template <class IO, class V>
Status chat_message_calls(IO& io, V& list, size_t max) {
  std::vector<std::string> calls;
  for (const auto& msg : list) calls.push_back(msg.tool_calls);
  LLMSVC_RETURN_IF_ERROR(io.text_list("tool_calls", calls, max, kAnyText));
  if constexpr (!std::is_const_v<V>) {
    if (calls.size() != list.size()) return io.fail("tool_calls", "not one entry per message");
    for (size_t i = 0; i < calls.size(); ++i) list[i].tool_calls = std::move(calls[i]);
  }
  return Status::Ok();
}

// llmsvc_count_tokens: count `text`'s tokens as a prompt (CountParams), and send back the ids
// [ids_offset, ids_offset + max_ids) of them (max_ids 0: the count alone).
struct CountTokens {
  static constexpr MsgType kType = MsgType::count_tokens;
  static constexpr bool kExtensible = false;
  std::string text;
  llmsvc::CountParams params;
  uint32_t ids_offset = 0;
  uint32_t max_ids = 0;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.text("text", m.text, kAnyText));
    LLMSVC_RETURN_IF_ERROR(io.boolean("chat", m.params.chat));
    LLMSVC_RETURN_IF_ERROR(io.boolean("first_turn", m.params.first_turn));
    LLMSVC_RETURN_IF_ERROR(io.text("system_prompt", m.params.system_prompt, kAnyText));
    LLMSVC_RETURN_IF_ERROR(io.u32("ids_offset", m.ids_offset));
    LLMSVC_RETURN_IF_ERROR(io.u32_in("max_ids", m.max_ids, 0, static_cast<uint32_t>(kMaxCountIds)));
    if (io.version() < kVersionMessages) return Status::Ok();
    return chat_messages(io, "messages", m.params.messages, kMaxAppendMessages);  // version 5: a message list
  }
  bool operator==(const CountTokens&) const = default;
};

// The answer to COUNT_TOKENS: the whole count, and the ids asked for (fewer past the end).
struct CountTokensReply {
  static constexpr MsgType kType = MsgType::count_tokens_reply;
  static constexpr bool kExtensible = false;
  int32_t count = 0;
  std::vector<int32_t> ids;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.count("count", m.count));
    return io.records("ids", m.ids, kMaxCountIds, 4, [&](auto& id) { return io.i32("ids", id); });
  }
  bool operator==(const CountTokensReply&) const = default;
};

// CONTEXT_APPEND (version 5): messages appended to the conversation of the context `id`
// (Engine::append_messages); ACK.
struct ContextAppend {
  static constexpr MsgType kType = MsgType::context_append;
  static constexpr bool kExtensible = false;
  std::string id;
  std::vector<llmsvc::ChatMessage> messages;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.text("id", m.id, kIdBounds));
    LLMSVC_RETURN_IF_ERROR(chat_messages(io, "messages", m.messages, kMaxAppendMessages));
    if (io.version() < kVersionFork) return Status::Ok();
    return chat_message_calls(io, m.messages, kMaxAppendMessages);  // version 6
  }
  bool operator==(const ContextAppend&) const = default;
};

// CONTEXT_TRUNCATE (version 5): the conversation rewound to its first n_messages; ACK.
struct ContextTruncate {
  static constexpr MsgType kType = MsgType::context_truncate;
  static constexpr bool kExtensible = false;
  std::string id;
  uint32_t n_messages = 0;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.text("id", m.id, kIdBounds));
    return io.u32("n_messages", m.n_messages);
  }
  bool operator==(const ContextTruncate&) const = default;
};

// CONTEXT_MESSAGES (version 5): the conversation's messages from index `first`, at most
// `max` of them; answered by CONTEXT_MESSAGES_REPLY.
struct ContextMessages {
  static constexpr MsgType kType = MsgType::context_messages;
  static constexpr bool kExtensible = false;
  std::string id;
  uint32_t first = 0;
  uint32_t max = 0;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.text("id", m.id, kIdBounds));
    LLMSVC_RETURN_IF_ERROR(io.u32("first", m.first));
    return io.u32_in("max", m.max, 1, static_cast<uint32_t>(kMaxMessagesPage));
  }
  bool operator==(const ContextMessages&) const = default;
};

// The messages asked for, as many as fit the client's frame limit (at least one); `more`: the
// conversation goes on past them.
struct ContextMessagesReply {
  static constexpr MsgType kType = MsgType::context_messages_reply;
  static constexpr bool kExtensible = false;
  bool more = false;
  std::vector<llmsvc::ChatMessage> messages;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.boolean("more", m.more));
    LLMSVC_RETURN_IF_ERROR(chat_messages(io, "messages", m.messages, kMaxMessagesPage));
    if (io.version() < kVersionFork) return Status::Ok();
    return chat_message_calls(io, m.messages, kMaxMessagesPage);
  }
  bool operator==(const ContextMessagesReply&) const = default;
};

// CONTEXT_FORK (version 6): a new context forked from `parent`, named `id` (absent: the server
// generates one); answered by CONTEXT_OPENED, as CONTEXT_NEW is.
struct ContextFork {
  static constexpr MsgType kType = MsgType::context_fork;
  static constexpr bool kExtensible = false;
  std::string parent;
  std::optional<std::string> id;

  template <class IO, class M>
  static Status fields(IO& io, M& m) {
    LLMSVC_RETURN_IF_ERROR(io.text("parent", m.parent, kIdBounds));
    return io.opt_text("id", m.id, kIdBounds);
  }
  bool operator==(const ContextFork&) const = default;
};

// Every message type, in the order of the type table (version 2 and 3 added none; version 4
// MODEL_INFO, COUNT_TOKENS and their replies; version 5 the conversation's messages; version 6
// CONTEXT_FORK).
using Message = std::variant<Hello, Welcome, Ping, Pong, Error, Ack, ContextNew, ContextOpen, ContextClose,
                             ContextDelete, ContextList, ContextInfo, ContextAppend, ContextTruncate, ContextMessages,
                             ContextFork, Call, Cancel, Stats, ModelInfoRequest, CountTokens, ContextOpened, ContextListReply,
                             ContextInfoReply, ContextMessagesReply, Piece, CallResult, StatsReply, ModelInfoReply,
                             CountTokensReply>;

// Appends m's payload (no frame header), as protocol `version` lays it out, to `out`; on
// failure `out` may hold a partial payload.
template <class M>
Status encode_payload(const M& m, std::vector<uint8_t>& out, uint16_t version = kMaxVersion) {
  Encoder e(out, type_info(M::kType).name, version);
  LLMSVC_RETURN_IF_ERROR(M::fields(e, m));
  return e.finish(M::kExtensible);
}

// The message from a payload laid out as protocol `version` has it (fields it lacks: 0).
template <class M>
Result<M> decode_payload(std::span<const uint8_t> payload, uint16_t version = kMaxVersion) {
  Decoder d(payload, type_info(M::kType).name, version);
  M m;
  LLMSVC_RETURN_IF_ERROR(M::fields(d, m));
  LLMSVC_RETURN_IF_ERROR(d.finish(M::kExtensible));
  return m;
}

MsgType type_of(const Message& m);
Status encode_payload(const Message& m, std::vector<uint8_t>& out, uint16_t version = kMaxVersion);
// The message of type `type` from its payload (as protocol `version` lays it out);
// Code::invalid_argument (or invalid_utf8) naming the field otherwise.
Result<Message> decode_message(MsgType type, std::span<const uint8_t> payload, uint16_t version = kMaxVersion);

}  // namespace llmsvc::protocol
