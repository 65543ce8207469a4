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

template <class W, class C, class Op>
void info_fields(W& w, C& c, Op op) {
  op(w.id, c.id);
  op(w.raw, c.raw);
  op(w.tokens, c.tokens);
  op(w.turns, c.turns);
  op(w.chunks_total, c.chunks_total);
  op(w.chunks_resident, c.chunks_resident);
  op(w.chunks_swapped, c.chunks_swapped);
  op(w.chunks_dropped, c.chunks_dropped);
  op(w.kv_resident_bytes, c.kv_resident_bytes);
  op(w.chunks_f16, c.chunks_f16);
  op(w.chunks_q8, c.chunks_q8);
  op(w.chunks_q4, c.chunks_q4);
  op(w.chunks_q2, c.chunks_q2);
  op(w.chunks_q3, c.chunks_q3);
}

template <class W, class C, class Op>
void stats_fields(W& w, C& c, Op op) {
  op(w.known_contexts, c.known_contexts);
  op(w.calls, c.calls);
  op(w.prompt_tokens, c.prompt_tokens);
  op(w.generated_tokens, c.generated_tokens);
  op(w.kv_bytes, c.kv_bytes);
  op(w.weight_bytes, c.weight_bytes);
  op(w.kv_peak_bytes, c.kv_peak_bytes);
  op(w.kv_evictions, c.kv_evictions);
  op(w.chunks_loaded, c.chunks_loaded);
  op(w.chunks_recomputed, c.chunks_recomputed);
  op(w.chunk_load_failures, c.chunk_load_failures);
  op(w.tokens_recomputed, c.tokens_recomputed);
  op(w.switch_in_ms, c.switch_in_ms);
  op(w.swap_out_chunks, c.swap_out_chunks);
  op(w.swap_out_bytes, c.swap_out_bytes);
  op(w.swap_out_failures, c.swap_out_failures);
  op(w.swap_out_deferred, c.swap_out_deferred);
}

template <class W, class C, class Op>
void call_stats_fields(W& w, C& c, Op op) {
  op(w.prompt_tokens, c.prompt_tokens);
  op(w.generated_tokens, c.generated_tokens);
  op(w.context_tokens, c.context_tokens);
  op(w.switch_in_ms, c.switch_in_ms);
  op(w.ttft_ms, c.ttft_ms);
  op(w.prefill_ms, c.prefill_ms);
  op(w.decode_ms, c.decode_ms);
  op(w.tpot_ms, c.tpot_ms);
  op(w.chunks_loaded, c.chunks_loaded);
  op(w.chunks_recomputed, c.chunks_recomputed);
  op(w.chunk_load_failures, c.chunk_load_failures);
  op(w.tokens_recomputed, c.tokens_recomputed);
  op(w.chunks_swapped_out, c.chunks_swapped_out);
  op(w.swap_out_ms, c.swap_out_ms);
}

}  // namespace

CallOptions to_wire(const CallParams& params) {
  CallOptions o;
  sampling_fields(o, params, kToWire);
  return o;
}

CallParams from_wire(const CallOptions& options) {
  CallParams p;
  sampling_fields(options, p, kFromWire);
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
