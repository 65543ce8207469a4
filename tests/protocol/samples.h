// SPDX-License-Identifier: Apache-2.0
// Sample messages of every type (several shapes of the ones with optional and repeated
// fields), each with the stream it travels on and its sender. The protocol tests round-trip
// them and fuzz/make_protocol_seeds writes them as the fuzzer's seed corpus. New samples go
// at the end: a sample's index names its seed files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/protocol/frame.h"
#include "runtime/protocol/messages.h"

namespace llmsvc::test {

struct Sample {
  protocol::Role sender;
  uint32_t stream;
  protocol::Message message;
};

inline std::vector<Sample> protocol_samples() {
  using namespace llmsvc::protocol;
  const Role C = Role::client, S = Role::server;
  std::vector<Sample> v;
  v.push_back({C, 0, Hello{1, 1, kDefaultMaxPayload, "llmsvc-cli 1.0"}});
  v.push_back({C, 0, Hello{1, 3, kMinMaxPayload, ""}});
  v.push_back({S, 0, Welcome{1, kDefaultMaxPayload, 262144, 4096, 4, 30000, "llmsvcd 1.0.0", "SmolLM2-135M-Instruct"}});
  v.push_back({C, 0, Ping{0x0123456789abcdefull}});
  v.push_back({S, 0, Pong{0x0123456789abcdefull}});
  v.push_back({S, 0, Ping{7}});
  v.push_back({C, 0, Pong{7}});
  v.push_back({S, 0, Error{static_cast<uint32_t>(Code::unsupported), "no common protocol version"}});
  v.push_back({S, 5, Error{static_cast<uint32_t>(Code::not_found), "context 'notes' not found"}});
  v.push_back({S, 6, Ack{}});
  v.push_back({C, 1, ContextNew{}});
  v.push_back({C, 2, ContextNew{"notes", "You are terse. Réponds en français 🙂", true}});
  v.push_back({C, 3, ContextNew{std::nullopt, "", false}});
  v.push_back({C, 4, ContextOpen{{"notes"}}});
  v.push_back({C, 5, ContextClose{1}});
  v.push_back({C, 6, ContextDelete{{"a.b-c_D"}}});
  v.push_back({C, 7, ContextList{}});
  v.push_back({C, 8, ContextInfo{{std::string(64, 'x')}}});
  v.push_back({S, 2, ContextOpened{1, "notes"}});
  v.push_back({S, 7, ContextListReply{true, {"a", "notes", std::string(64, 'z')}}});
  v.push_back({S, 7, ContextListReply{false, {}}});
  v.push_back({S, 8, ContextInfoReply{std::string(64, 'x'), true, 1234, 3, 78, 70, 5, 3, 9u << 20}});
  v.push_back({C, 9, Call{1, "Hello!", CallOptions{}}});
  CallOptions o;
  o.seed = 42;
  o.temperature = 0.7f;
  o.top_k = 40;
  o.top_p = 0.95f;
  o.min_p = 0.05f;
  o.repeat_penalty = 1.1f;
  o.repeat_last_n = -1;
  o.max_tokens = 0;
  o.stop = {"\n\n", "User:", std::string(256, 's')};
  o.slo_ttft_ratio = 0.5f;
  o.slo_tpot_ratio = 0.25f;
  const std::string prompt = std::string("Résumé: 日本語 🙂 ") + '\0' + " (a NUL byte)" + std::string(1000, '.');
  v.push_back({C, 11, Call{3, prompt, o}});
  v.push_back({C, 0, Cancel{11}});
  v.push_back({S, 11, Piece{9906, "Hello", {}, {}}});
  v.push_back({S, 11, Piece{-1, "", {}, {}}});
  v.push_back({S, 11, Piece{123, "\xE6\x97\xA5", {}, {}}});
  v.push_back({S, 11, CallResult{0, "", 1, CallStats{12, 34, 46, 0.5, 12.25, 10.0, 80.75, 2.375}}});
  v.push_back({S, 12, CallResult{10, "cancelled", 4, CallStats{3, 1, 4, 0, 1, 1, 0, 0}}});
  v.push_back({C, 13, Stats{}});
  v.push_back({S, 13, StatsReply{2, 5, 100, 2000, 3000, 1u << 20, 90u << 20}});
  // Version 2's figures, every one non-zero.
  ContextInfoReply info{"notes", false, 700, 4, 44, 30, 10, 4, 5u << 20};
  info.chunks_f16 = 2;
  info.chunks_q8 = 7;
  info.chunks_q4 = 20;
  info.chunks_q2 = 1;
  info.chunks_q3 = 3;  // version 3
  info.chunks_shared = 4;  // version 6
  v.push_back({S, 14, info});
  CallStats cs{40, 16, 756, 31.5, 60.25, 20.5, 150.0, 10.0};
  cs.chunks_loaded = 12;
  cs.chunks_recomputed = 3;
  cs.chunk_load_failures = 1;
  cs.tokens_recomputed = 48;
  cs.chunks_swapped_out = 5;
  cs.swap_out_ms = 2.75;
  v.push_back({S, 15, CallResult{0, "", 2, cs}});
  StatsReply st{1, 3, 9, 400, 144, 3u << 20, 90u << 20};
  st.kv_peak_bytes = 6u << 20;
  st.kv_evictions = 77;
  st.chunks_loaded = 50;
  st.chunks_recomputed = 8;
  st.chunk_load_failures = 2;
  st.tokens_recomputed = 128;
  st.switch_in_ms = 93.5;
  st.swap_out_chunks = 120;
  st.swap_out_bytes = 40u << 20;
  st.swap_out_failures = 1;
  st.swap_out_deferred = 6;
  v.push_back({S, 16, st});
  // Version 4: model information, token counting, token ids in pieces.
  v.push_back({C, 17, ModelInfoRequest{}});
  llmsvc::ModelInfo mi;
  mi.ready = true;
  mi.architecture = "llama";
  mi.name = "SmolLM2 135M Instruct";
  mi.n_params = 134515008;
  mi.n_ctx_train = 8192;
  mi.n_ctx = 8192;
  mi.n_vocab = 49152;
  mi.n_layer = 30;
  mi.n_embd = 576;
  mi.n_head = 9;
  mi.n_head_kv = 3;
  mi.weight_bytes = 92u << 20;
  mi.weight_types = {{"Q4_1", 210, 80u << 20}, {"Q8_0", 1, 12u << 20}, {"F32", 61, 140000}};
  mi.has_chat_template = true;
  mi.bos = {1, "<|im_start|>"};
  mi.eos = {2, "<|im_end|>"};
  mi.devices = {"cpu", "opencl:0"};
  v.push_back({S, 17, ModelInfoReply{mi}});
  v.push_back({S, 18, ModelInfoReply{}});
  v.push_back({C, 19, CountTokens{"Count me: 日本 🙂", {true, true, "You are terse.", {}}, 0, 64}});
  v.push_back({C, 20, CountTokens{"", {}, 16384, 0}});
  v.push_back({S, 19, CountTokensReply{12, {1, 9690, 198, 2683, 359, 253, 4, 7, 8, 9, 10, 2}}});
  v.push_back({S, 20, CountTokensReply{0, {}}});
  CallOptions ids = o;
  ids.token_ids = true;
  ids.logprobs = true;
  v.push_back({C, 21, Call{4, "Hi", ids}});
  v.push_back({S, 21, Piece{116, "\xE6\x97\xA5", {23274, 115, 116}, {-1.5f, -3.0517578125e-05f, -0.0f}}});
  v.push_back({S, 21, Piece{-1, "", {2}, {}}});
  // Version 5: a context's conversation.
  using llmsvc::ChatMessage;
  using llmsvc::MessageRole;
  v.push_back({C, 22, ContextAppend{"notes", {ChatMessage{MessageRole::user, "Caf\xC3\xA9? 🙂"},
                                              ChatMessage{MessageRole::assistant, ""},
                                              ChatMessage{MessageRole::user, std::string("a NUL ") + '\0'}}}});
  v.push_back({C, 23, ContextAppend{"notes", {}}});
  v.push_back({C, 24, ContextTruncate{"notes", 2}});
  v.push_back({C, 25, ContextMessages{"notes", 3, 64}});
  v.push_back({S, 25, ContextMessagesReply{true, {ChatMessage{MessageRole::assistant, "Oui."}}}});
  v.push_back({S, 26, ContextMessagesReply{false, {}}});
  CallOptions reply = ids;
  reply.reply_only = true;
  v.push_back({C, 27, Call{4, "", reply}});
  CallOptions structured;
  structured.json_schema = R"({"type": "object", "properties": {"name": {"type": "string"}}})";
  v.push_back({C, 28, Call{4, "Who?", structured}});
  structured.json_schema.clear();
  structured.grammar = R"(root ::= ("yes" | "no") ".")";
  v.push_back({C, 29, Call{4, "Is it?", structured}});
  CallStats constrained = cs;
  constrained.constrain_ms = 1.5;
  v.push_back({S, 28, CallResult{0, "", 1, constrained}});
  CountTokens count{"", {true, true, "Be brief.", {}}, 0, 16};
  count.params.messages = {{MessageRole::user, "Hi"}, {MessageRole::assistant, "Hello!"}, {MessageRole::user, "Bye"}};
  v.push_back({C, 30, count});
  // Version 6: forks.
  v.push_back({C, 31, ContextFork{"notes", std::nullopt}});
  v.push_back({C, 32, ContextFork{"notes", std::string(64, 'f')}});
  v.push_back({S, 31, ContextOpened{7, "notes-b"}});
  v.push_back({C, 33, ContextNew{std::string("agent"), std::nullopt, false,
                                 R"([{"type": "function", "function": {"name": "get_weather"}}])"}});
  ChatMessage called{MessageRole::assistant, "Let me look."};
  called.tool_calls = R"([{"id":"call_0","type":"function","function":{"name":"get_weather","arguments":{}}}])";
  v.push_back({S, 33, ContextMessagesReply{false, {called, ChatMessage{MessageRole::tool, "{\"t\": 21}"}}}});
  v.push_back({C, 35, ContextAppend{"agent", {ChatMessage{MessageRole::user, "Weather?"}, called}}});
  CallStats tooled = cs;
  tooled.tool_calls = 2;
  tooled.tool_call_errors = 1;
  v.push_back({S, 34, CallResult{0, "", 1, tooled}});
  // Version 7: a call's elastic level, asked for and reported.
  CallOptions level = o;
  level.level_percent = 20;
  v.push_back({C, 36, Call{4, "Briefly?", level}});
  CallStats leveled = tooled;
  leveled.level_percent = 20;
  v.push_back({S, 36, CallResult{0, "", 2, leveled}});
  // Version 8: LoRA adapters, a context's and a call's, and those a daemon offers.
  ContextNew adapted;
  adapted.id = "adapted";
  adapted.adapter = "summarize";
  v.push_back({C, 37, adapted});
  CallOptions with_adapter = level;
  with_adapter.adapter = "rewrite.v2";
  v.push_back({C, 38, Call{5, "Shorter?", with_adapter}});
  ModelInfo offering = mi;
  offering.adapters = {"summarize", "rewrite.v2"};
  v.push_back({S, 39, ModelInfoReply{offering}});
  // Version 9: prompt compression, a call's share to keep and the share kept.
  CallOptions keeping = with_adapter;
  keeping.prompt_keep = 0.625f;
  v.push_back({C, 40, Call{6, "Keep the gist of this, please.", keeping}});
  CallStats kept = leveled;
  kept.prompt_kept = 0.75;
  v.push_back({S, 40, CallResult{0, "", 2, kept}});
  return v;
}

}  // namespace llmsvc::test
