// SPDX-License-Identifier: Apache-2.0
// Conversions between the protocol's messages and the engine's types.
#include "runtime/protocol/engine_types.h"

namespace llmsvc::protocol {
namespace {

constexpr auto kToWire = [](auto& wire, const auto& core) { wire = core; };
constexpr auto kFromWire = [](const auto& wire, auto& core) { core = wire; };

template <class W, class C, class Op>
void sampling_fields(W& w, C& c, Op op) {
  op(w.seed, c.sampling.seed);
  op(w.temperature, c.sampling.temperature);
  op(w.top_k, c.sampling.top_k);
  op(w.top_p, c.sampling.top_p);
  op(w.min_p, c.sampling.min_p);
  op(w.repeat_penalty, c.sampling.repeat_penalty);
  op(w.repeat_last_n, c.sampling.repeat_last_n);
  op(w.max_tokens, c.max_tokens);
  op(w.stop, c.stop);
  op(w.slo_ttft_ratio, c.slo_ttft_ratio);
  op(w.slo_tpot_ratio, c.slo_tpot_ratio);
}

// The figures of a statistics table (runtime/core/engine/stats_fields.h), name for name.
#define LLMSVC_FIGURE_PAIR(type, name, ...) op(w.name, c.name);

template <class W, class C, class Op>
void info_fields(W& w, C& c, Op op) {
  op(w.id, c.id);
  op(w.raw, c.raw);
  LLMSVC_CONTEXT_INFO_FIELDS(LLMSVC_FIGURE_PAIR)
}

template <class W, class C, class Op>
void stats_fields(W& w, C& c, Op op) {
  LLMSVC_ENGINE_STATS_FIELDS(LLMSVC_FIGURE_PAIR)
}

template <class W, class C, class Op>
void call_stats_fields(W& w, C& c, Op op) {
  LLMSVC_CALL_STATS_FIELDS(LLMSVC_FIGURE_PAIR)
}

#undef LLMSVC_FIGURE_PAIR

}  // namespace

CallOptions to_wire(const CallParams& params) {
  CallOptions o;
  sampling_fields(o, params, kToWire);
  o.token_ids = static_cast<bool>(params.on_tokens);
  o.logprobs = o.token_ids && params.logprobs;
  o.reply_only = params.reply_only;
  o.json_schema = params.json_schema;
  o.grammar = params.grammar;
  o.level_percent = params.level_percent;
  o.adapter = params.adapter;
  o.prompt_keep = params.prompt_keep;
  return o;
}

CallParams from_wire(const CallOptions& options) {
  CallParams p;
  sampling_fields(options, p, kFromWire);
  p.logprobs = options.logprobs;  // (token_ids: the daemon's on_tokens sends the ids)
  p.reply_only = options.reply_only;
  p.json_schema = options.json_schema;
  p.grammar = options.grammar;
  p.level_percent = options.level_percent;
  p.adapter = options.adapter;
  p.prompt_keep = options.prompt_keep;
  return p;
}

ContextInfoReply to_wire(const llmsvc::ContextInfo& info) {
  ContextInfoReply r;
  info_fields(r, info, kToWire);
  return r;
}

llmsvc::ContextInfo from_wire(const ContextInfoReply& reply) {
  llmsvc::ContextInfo info;
  info_fields(reply, info, kFromWire);
  return info;
}

StatsReply to_wire(const EngineStats& stats, int32_t open_contexts) {
  StatsReply r;
  stats_fields(r, stats, kToWire);
  r.open_contexts = open_contexts;
  return r;
}

EngineStats from_wire(const StatsReply& reply) {
  EngineStats s;
  stats_fields(reply, s, kFromWire);
  return s;
}

Error error_message(const Status& status) {
  Error e;
  e.status = code_to_wire(status.ok() ? Code::internal : status.code());
  e.message = status.message().substr(0, kMaxMessageBytes);
  if (status.message().size() > kMaxMessageBytes) {
    while (!e.message.empty() && (static_cast<unsigned char>(e.message.back()) & 0xC0) == 0x80) e.message.pop_back();
    if (!e.message.empty() && (static_cast<unsigned char>(e.message.back()) & 0xC0) == 0xC0) e.message.pop_back();
  }
  return e;
}

CallResult to_wire(const Status& status, const llmsvc::CallStats& stats) {
  CallResult r;
  r.status = code_to_wire(status.code());
  if (!status.ok()) r.message = error_message(status).message;
  r.finish_reason = static_cast<int32_t>(stats.finish);
  call_stats_fields(r.stats, stats, kToWire);
  return r;
}

void from_wire(const CallResult& result, llmsvc::CallStats* stats) {
  call_stats_fields(result.stats, *stats, kFromWire);
  stats->finish = static_cast<FinishReason>(result.finish_reason);
}

}  // namespace llmsvc::protocol
