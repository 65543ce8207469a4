// SPDX-License-Identifier: Apache-2.0
// The engine's figures through the wire: every field the embedded transport hands the C API
// (CallStats, EngineStats, ContextInfo) comes back from a RESULT, STATS_REPLY or
// CONTEXT_INFO_REPLY encoded and decoded at the newest version; on a version-1 connection the
// figures version 2 added read 0 and the rest still arrive. The tests spelled out field by
// field check the tables too; the last one covers every line of them, a new one included.
#include <gtest/gtest.h>

#include "runtime/protocol/engine_types.h"

namespace llmsvc::protocol {
namespace {

template <class M>
M through_wire(const M& m, uint16_t version) {
  std::vector<uint8_t> bytes;
  Status s = encode_payload(m, bytes, version);
  EXPECT_TRUE(s.ok()) << s.message();
  auto back = decode_payload<M>(bytes, version);
  EXPECT_TRUE(back.ok()) << back.status().message();
  return back.ok() ? *back : M{};
}

// Distinct non-zero values, so a field mapped to another's slot shows.
llmsvc::CallStats sample_call_stats() {
  llmsvc::CallStats c;
  c.prompt_tokens = 11;
  c.generated_tokens = 12;
  c.context_tokens = 13;
  c.finish = FinishReason::stop;
  c.switch_in_ms = 1.5;
  c.ttft_ms = 2.5;
  c.prefill_ms = 3.5;
  c.decode_ms = 4.5;
  c.tpot_ms = 5.5;
  c.chunks_loaded = 14;
  c.chunks_recomputed = 15;
  c.chunk_load_failures = 16;
  c.tokens_recomputed = 17;
  c.chunks_swapped_out = 18;
  c.swap_out_ms = 6.5;
  return c;
}

// A call's parameters cross whole, both ways: sampling, limits, stops and the SLO ratios.
TEST(ProtocolEngineTypes, CallParamsCrossWhole) {
  llmsvc::CallParams c;
  c.sampling.seed = 7;
  c.sampling.temperature = 0.5f;
  c.sampling.top_k = 9;
  c.sampling.top_p = 0.8f;
  c.sampling.min_p = 0.1f;
  c.sampling.repeat_penalty = 1.2f;
  c.sampling.repeat_last_n = 33;
  c.max_tokens = 44;
  c.stop = {"end", "\n\n"};
  c.slo_ttft_ratio = 0.3f;
  c.slo_tpot_ratio = 0.6f;
  c.level_percent = 30;
  c.adapter = "summarize";
  c.prompt_keep = 0.5f;
  Call call;
  call.handle = 1;
  call.options = to_wire(c);
  const llmsvc::CallParams back = from_wire(through_wire(call, kMaxVersion).options);
  EXPECT_EQ(back.level_percent, 30);
  EXPECT_EQ(back.adapter, "summarize");
  EXPECT_EQ(back.prompt_keep, 0.5f);
  // Version 8 has no share to keep: the client refuses to send one (unix_transport), the daemon hears 0.
  EXPECT_EQ(from_wire(through_wire(call, 8).options).prompt_keep, 0.0f);
  EXPECT_EQ(from_wire(through_wire(call, 8).options).adapter, "summarize");
  // Version 7 has no adapter: the client refuses to send one (unix_transport), the daemon hears none.
  EXPECT_EQ(from_wire(through_wire(call, 7).options).adapter, "");
  EXPECT_EQ(from_wire(through_wire(call, 7).options).level_percent, 30);
  // Version 6 has no level: the daemon hears 0, its own choice (the client refuses to send one).
  EXPECT_EQ(from_wire(through_wire(call, 6).options).level_percent, 0);
  EXPECT_EQ(from_wire(through_wire(call, 6).options).max_tokens, 44);
  EXPECT_EQ(back.sampling.seed, 7u);
  EXPECT_EQ(back.sampling.temperature, 0.5f);
  EXPECT_EQ(back.sampling.top_k, 9);
  EXPECT_EQ(back.sampling.top_p, 0.8f);
  EXPECT_EQ(back.sampling.min_p, 0.1f);
  EXPECT_EQ(back.sampling.repeat_penalty, 1.2f);
  EXPECT_EQ(back.sampling.repeat_last_n, 33);
  EXPECT_EQ(back.max_tokens, 44);
  EXPECT_EQ(back.stop, c.stop);
  EXPECT_EQ(back.slo_ttft_ratio, 0.3f);
  EXPECT_EQ(back.slo_tpot_ratio, 0.6f);
}

TEST(ProtocolEngineTypes, CallStatsArriveWhole) {
  const llmsvc::CallStats in = sample_call_stats();
  llmsvc::CallStats out;
  from_wire(through_wire(to_wire(Status::Ok(), in), kMaxVersion), &out);
  EXPECT_EQ(out.prompt_tokens, 11);
  EXPECT_EQ(out.generated_tokens, 12);
  EXPECT_EQ(out.context_tokens, 13);
  EXPECT_EQ(out.finish, FinishReason::stop);
  EXPECT_EQ(out.switch_in_ms, 1.5);
  EXPECT_EQ(out.ttft_ms, 2.5);
  EXPECT_EQ(out.prefill_ms, 3.5);
  EXPECT_EQ(out.decode_ms, 4.5);
  EXPECT_EQ(out.tpot_ms, 5.5);
  EXPECT_EQ(out.chunks_loaded, 14);
  EXPECT_EQ(out.chunks_recomputed, 15);
  EXPECT_EQ(out.chunk_load_failures, 16);
  EXPECT_EQ(out.tokens_recomputed, 17);
  EXPECT_EQ(out.chunks_swapped_out, 18);
  EXPECT_EQ(out.swap_out_ms, 6.5);

  llmsvc::CallStats old;
  from_wire(through_wire(to_wire(Status(Code::cancelled, "cancelled"), in), 1), &old);
  EXPECT_EQ(old.context_tokens, 13);
  EXPECT_EQ(old.tpot_ms, 5.5);
  EXPECT_EQ(old.chunks_loaded, 0);
  EXPECT_EQ(old.chunks_recomputed, 0);
  EXPECT_EQ(old.chunk_load_failures, 0);
  EXPECT_EQ(old.tokens_recomputed, 0);
  EXPECT_EQ(old.chunks_swapped_out, 0);
  EXPECT_EQ(old.swap_out_ms, 0.0);

  // The level (version 7) arrives at 7 and reads 0 at 6.
  llmsvc::CallStats leveled = in;
  leveled.level_percent = 40;
  llmsvc::CallStats at7, at6;
  from_wire(through_wire(to_wire(Status::Ok(), leveled), 7), &at7);
  from_wire(through_wire(to_wire(Status::Ok(), leveled), 6), &at6);
  EXPECT_EQ(at7.level_percent, 40);
  EXPECT_EQ(at6.level_percent, 0);
  EXPECT_EQ(at6.chunks_loaded, 14);
}

TEST(ProtocolEngineTypes, EngineStatsArriveWhole) {
  EngineStats in;
  in.known_contexts = 3;
  in.calls = 21;
  in.prompt_tokens = 22;
  in.generated_tokens = 23;
  in.kv_bytes = 24;
  in.weight_bytes = 25;
  in.kv_peak_bytes = 26;
  in.kv_evictions = 27;
  in.chunks_loaded = 28;
  in.chunks_recomputed = 29;
  in.chunk_load_failures = 30;
  in.tokens_recomputed = 31;
  in.switch_in_ms = 7.25;
  in.swap_out_chunks = 32;
  in.swap_out_bytes = 33;
  in.swap_out_failures = 34;
  in.swap_out_deferred = 35;
  const StatsReply wire = through_wire(to_wire(in, 2), kMaxVersion);
  EXPECT_EQ(wire.open_contexts, 2);
  const EngineStats out = from_wire(wire);
  EXPECT_EQ(out.known_contexts, 3);
  EXPECT_EQ(out.calls, 21u);
  EXPECT_EQ(out.prompt_tokens, 22u);
  EXPECT_EQ(out.generated_tokens, 23u);
  EXPECT_EQ(out.kv_bytes, 24u);
  EXPECT_EQ(out.weight_bytes, 25u);
  EXPECT_EQ(out.kv_peak_bytes, 26u);
  EXPECT_EQ(out.kv_evictions, 27u);
  EXPECT_EQ(out.chunks_loaded, 28u);
  EXPECT_EQ(out.chunks_recomputed, 29u);
  EXPECT_EQ(out.chunk_load_failures, 30u);
  EXPECT_EQ(out.tokens_recomputed, 31u);
  EXPECT_EQ(out.switch_in_ms, 7.25);
  EXPECT_EQ(out.swap_out_chunks, 32u);
  EXPECT_EQ(out.swap_out_bytes, 33u);
  EXPECT_EQ(out.swap_out_failures, 34u);
  EXPECT_EQ(out.swap_out_deferred, 35u);

  const EngineStats old = from_wire(through_wire(to_wire(in, 2), 1));
  EXPECT_EQ(old.weight_bytes, 25u);
  EXPECT_EQ(old.kv_peak_bytes + old.kv_evictions + old.chunks_loaded + old.chunks_recomputed +
                old.chunk_load_failures + old.tokens_recomputed + old.swap_out_chunks + old.swap_out_bytes +
                old.swap_out_failures + old.swap_out_deferred,
            0u);
  EXPECT_EQ(old.switch_in_ms, 0.0);
}

TEST(ProtocolEngineTypes, ContextInfoArrivesWhole) {
  llmsvc::ContextInfo in;
  in.id = "notes";
  in.raw = true;
  in.tokens = 41;
  in.turns = 42;
  in.chunks_total = 43;
  in.chunks_resident = 44;
  in.chunks_swapped = 45;
  in.chunks_dropped = 46;
  in.kv_resident_bytes = 47;
  in.chunks_f16 = 48;
  in.chunks_q8 = 49;
  in.chunks_q4 = 50;
  in.chunks_q2 = 51;
  in.chunks_q3 = 52;
  const llmsvc::ContextInfo out = from_wire(through_wire(to_wire(in), kMaxVersion));
  EXPECT_EQ(out.id, "notes");
  EXPECT_TRUE(out.raw);
  EXPECT_EQ(out.tokens, 41);
  EXPECT_EQ(out.turns, 42);
  EXPECT_EQ(out.chunks_total, 43);
  EXPECT_EQ(out.chunks_resident, 44);
  EXPECT_EQ(out.chunks_swapped, 45);
  EXPECT_EQ(out.chunks_dropped, 46);
  EXPECT_EQ(out.kv_resident_bytes, 47u);
  EXPECT_EQ(out.chunks_f16, 48);
  EXPECT_EQ(out.chunks_q8, 49);
  EXPECT_EQ(out.chunks_q4, 50);
  EXPECT_EQ(out.chunks_q2, 51);
  EXPECT_EQ(out.chunks_q3, 52);

  const llmsvc::ContextInfo v2 = from_wire(through_wire(to_wire(in), 2));
  EXPECT_EQ(v2.chunks_q2, 51);
  EXPECT_EQ(v2.chunks_q3, 0);

  const llmsvc::ContextInfo old = from_wire(through_wire(to_wire(in), 1));
  EXPECT_EQ(old.kv_resident_bytes, 47u);
  EXPECT_EQ(old.chunks_f16 + old.chunks_q8 + old.chunks_q4 + old.chunks_q3 + old.chunks_q2, 0);
}

// Every line of the statistics tables (stats_fields.h), a new one included: distinct values
// cross at each version from the one that added it, and read 0 before.
TEST(ProtocolEngineTypes, EveryTableFigureCrossesFromItsVersion) {
#define LLMSVC_FILL(type, name, ...) in.name = static_cast<type>(++n);
#define LLMSVC_CHECK(type, name, since, ...) EXPECT_EQ(out.name, v >= since ? in.name : type{}) << #name << " v" << v;
  for (uint16_t v = kMinVersion; v <= kMaxVersion; ++v) {
    int n = 0;
    {
      llmsvc::CallStats in, out;
      LLMSVC_CALL_STATS_FIELDS(LLMSVC_FILL)
      from_wire(through_wire(to_wire(Status::Ok(), in), v), &out);
      LLMSVC_CALL_STATS_FIELDS(LLMSVC_CHECK)
    }
    {
      EngineStats in;
      LLMSVC_ENGINE_STATS_FIELDS(LLMSVC_FILL)
      const EngineStats out = from_wire(through_wire(to_wire(in, 1), v));
      LLMSVC_ENGINE_STATS_FIELDS(LLMSVC_CHECK)
    }
    {
      llmsvc::ContextInfo in;
      in.id = "x";
      LLMSVC_CONTEXT_INFO_FIELDS(LLMSVC_FILL)
      const llmsvc::ContextInfo out = from_wire(through_wire(to_wire(in), v));
      LLMSVC_CONTEXT_INFO_FIELDS(LLMSVC_CHECK)
    }
  }
#undef LLMSVC_CHECK
#undef LLMSVC_FILL
}

}  // namespace
}  // namespace llmsvc::protocol
