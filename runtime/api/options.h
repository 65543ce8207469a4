// SPDX-License-Identifier: Apache-2.0
// The C option/result structs: struct_size checks, defaults, and copying to and from the
// core's types. Each reader validates every field and leaves nothing pointing into the
// caller's memory.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"
#include "llmsvc/llmsvc.h"
#include "runtime/core/engine/engine.h"

namespace llmsvc::api {

// Bytes of the first published version of each struct (through its last v1 field).
// These never change: later versions only add fields after them.
#define LLMSVC_SIZE_THROUGH(type, field) (offsetof(type, field) + sizeof(type::field))
inline constexpr size_t kBindOptionsV1 = LLMSVC_SIZE_THROUGH(llmsvc_bind_options, kv_ratio);
inline constexpr size_t kContextOptionsV1 = LLMSVC_SIZE_THROUGH(llmsvc_context_options, raw);
inline constexpr size_t kCallOptionsV1 = LLMSVC_SIZE_THROUGH(llmsvc_call_options, slo_tpot_ratio);
inline constexpr size_t kCallResultV1 = LLMSVC_SIZE_THROUGH(llmsvc_call_result, tpot_ms);
inline constexpr size_t kStatsV1 = LLMSVC_SIZE_THROUGH(llmsvc_stats, weight_bytes);
inline constexpr size_t kContextInfoV1 = LLMSVC_SIZE_THROUGH(llmsvc_context_info, kv_resident_bytes);
#undef LLMSVC_SIZE_THROUGH

enum class TargetKind { embedded, unix_socket };

struct BindConfig {
  TargetKind target = TargetKind::embedded;
  std::string socket_path;  // unix_socket only
  EngineOptions engine;     // model_path resolved (default model when NULL)
};

void init(llmsvc_bind_options* o);
void init(llmsvc_context_options* o);
void init(llmsvc_call_options* o);
void init(llmsvc_call_result* r);
void init(llmsvc_stats* s);
void init(llmsvc_context_info* i);
void init(llmsvc_model_info* i);       // info_options.cpp
void init(llmsvc_count_options* o);

// NULL options mean defaults. The target falls back to $LLMSVC_TARGET, the model to
// the default model (model_not_found with the fetch hint when it is missing).
Result<BindConfig> read_bind_options(const llmsvc_bind_options* options);
Result<ContextOptions> read_context_options(const llmsvc_context_options* options);
Result<CallParams> read_call_options(const llmsvc_call_options* options);

// Call options held elsewhere under the C fields' names, with `stop` as strings (the CLI's
// arguments), as the C struct: `o->stop` points into `stops`, whose
// entries point into `a.stop`; both must outlive `o`. Unchecked but for NUL bytes in a stop.
template <class Args>
Status fill_call_options(const Args& a, llmsvc_call_options* o, std::vector<const char*>& stops) {
  init(o);
  o->seed = a.seed;
  o->temperature = a.temperature;
  o->top_k = a.top_k;
  o->top_p = a.top_p;
  o->min_p = a.min_p;
  o->repeat_penalty = a.repeat_penalty;
  o->repeat_last_n = a.repeat_last_n;
  o->max_tokens = a.max_tokens;
  if constexpr (requires { a.slo_ttft_ratio; }) {
    o->slo_ttft_ratio = a.slo_ttft_ratio;
    o->slo_tpot_ratio = a.slo_tpot_ratio;
  }
  if constexpr (requires { a.json_schema; }) {
    o->json_schema = a.json_schema.empty() ? nullptr : a.json_schema.c_str();
    o->grammar = a.grammar.empty() ? nullptr : a.grammar.c_str();
  }
  if constexpr (requires { a.level_percent; }) o->level_percent = a.level_percent;
  if constexpr (requires { a.prompt_keep; }) o->prompt_keep = a.prompt_keep;
  if constexpr (requires { a.adapter; }) o->adapter = a.adapter.empty() ? nullptr : a.adapter.c_str();
  stops.clear();
  for (const std::string& s : a.stop) {
    if (s.find('\0') != std::string::npos) return Status(Code::invalid_argument, "a stop string holds a NUL byte");
    stops.push_back(s.c_str());
  }
  o->stop = stops.data();
  o->n_stop = stops.size();
  return Status::Ok();
}

// Results: the caller's struct_size must cover v1; fields past it are left untouched.
Status check_result_size(size_t struct_size, size_t v1_size, const char* what);
void write_call_result(const CallStats& stats, llmsvc_call_result* out);
void write_stats(const EngineStats& engine, int32_t open_contexts, llmsvc_stats* out);
void write_context_info(const ContextInfo& info, llmsvc_context_info* out);

}  // namespace llmsvc::api
