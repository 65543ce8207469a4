// SPDX-License-Identifier: Apache-2.0
// The C option/result structs: struct_size checks, defaults, copying.
#include "runtime/api/options.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "runtime/core/model/default_model.h"
#include "runtime/api/struct_copy.h"
#include "runtime/api/validate.h"

namespace llmsvc::api {
namespace {

Status bad(std::string message) { return {Code::invalid_argument, std::move(message)}; }

static_assert(static_cast<int>(FinishReason::eos) == LLMSVC_FINISH_EOS);
static_assert(static_cast<int>(FinishReason::length) == LLMSVC_FINISH_LENGTH);
static_assert(static_cast<int>(FinishReason::stop) == LLMSVC_FINISH_STOP);
static_assert(static_cast<int>(FinishReason::cancelled) == LLMSVC_FINISH_CANCELLED);
static_assert(static_cast<int>(FinishReason::context_full) == LLMSVC_FINISH_CONTEXT_FULL);

}  // namespace

void init(llmsvc_bind_options* o) {
  *o = llmsvc_bind_options{};
  o->struct_size = sizeof(llmsvc_bind_options);
}

void init(llmsvc_context_options* o) {
  *o = llmsvc_context_options{};
  o->struct_size = sizeof(llmsvc_context_options);
}

void init(llmsvc_call_options* o) {
  *o = llmsvc_call_options{};
  o->struct_size = sizeof(llmsvc_call_options);
  o->seed = 0;
  o->temperature = 0.0f;
  o->top_k = 0;
  o->top_p = 1.0f;
  o->min_p = 0.0f;
  o->repeat_penalty = 1.0f;
  o->repeat_last_n = 64;
  o->max_tokens = 256;
  o->stop = nullptr;
  o->n_stop = 0;
  o->slo_ttft_ratio = 0.0f;
  o->slo_tpot_ratio = 0.0f;
  o->level_percent = 0;  // the service chooses
}

void init(llmsvc_call_result* r) {
  *r = llmsvc_call_result{};
  r->struct_size = sizeof(llmsvc_call_result);
}

void init(llmsvc_stats* s) {
  *s = llmsvc_stats{};
  s->struct_size = sizeof(llmsvc_stats);
}

void init(llmsvc_context_info* i) {
  *i = llmsvc_context_info{};
  i->struct_size = sizeof(llmsvc_context_info);
}

Result<BindConfig> read_bind_options(const llmsvc_bind_options* options) {
  auto in = copy_in(options, kBindOptionsV1, "llmsvc_bind_options");
  if (!in.ok()) return in.status();
  const llmsvc_bind_options& o = *in;
  BindConfig config;

  const char* target = o.target;
  if (target == nullptr || *target == '\0') target = std::getenv("LLMSVC_TARGET");
  if (target != nullptr && *target != '\0') {
    LLMSVC_RETURN_IF_ERROR(check_cstr(target, "target"));
    std::string_view t(target);
    if (t == "embedded") {
      config.target = TargetKind::embedded;
    } else if (t.starts_with("unix:") && t.size() > 5) {
      config.target = TargetKind::unix_socket;
      config.socket_path = std::string(t.substr(5));
    } else {
      return bad("unknown target '" + std::string(t) + "' (expected \"embedded\" or \"unix:PATH\")");
    }
  }

  if (o.n_threads < 0) return bad("n_threads is negative");
  if (o.n_ctx < 0) return bad("n_ctx is negative");
  if (o.chunk_tokens < 0) return bad("chunk_tokens is negative");
  config.engine.n_threads = o.n_threads;
  config.engine.n_ctx = o.n_ctx;
  config.engine.chunk_tokens = o.chunk_tokens == 0 ? 16 : o.chunk_tokens;
  if (o.state_dir != nullptr) {
    LLMSVC_RETURN_IF_ERROR(check_cstr(o.state_dir, "state_dir"));
    if (o.state_dir[0] == '\0') return bad("state_dir is empty");
    config.engine.state_dir = o.state_dir;
  }
  if (o.device != nullptr) {
    LLMSVC_RETURN_IF_ERROR(check_cstr(o.device, "device"));
    config.engine.device = o.device;
  }
  if (o.adapters != nullptr) {
    LLMSVC_RETURN_IF_ERROR(check_cstr(o.adapters, "adapters"));
    auto list = parse_adapter_list(o.adapters);
    if (!list.ok()) return list.status();
    config.engine.adapters = std::move(list).value();
  }
  config.engine.recompute_on_model_change = o.recompute_on_model_change != 0;
  config.engine.kv_budget_bytes = o.kv_budget_bytes;
  if (!std::isfinite(o.kv_ratio) || o.kv_ratio > 1.0f) return bad("kv_ratio must be at most 1 (negative: no compression)");
  config.engine.kv_ratio = o.kv_ratio == 0.0f ? 0.5 : o.kv_ratio < 0.0f ? 0.0 : o.kv_ratio;

  if (config.target == TargetKind::embedded) {
    std::string_view model;
    if (o.model_path != nullptr) {
      LLMSVC_RETURN_IF_ERROR(check_cstr(o.model_path, "model_path"));
      model = o.model_path;
    }
    auto path = resolve_model_path(model);
    if (!path.ok()) return path.status();
    config.engine.model_path = std::move(path).value();
  }
  return config;
}

Result<ContextOptions> read_context_options(const llmsvc_context_options* options) {
  auto in = copy_in(options, kContextOptionsV1, "llmsvc_context_options");
  if (!in.ok()) return in.status();
  ContextOptions out;
  if (in->id != nullptr) {
    LLMSVC_RETURN_IF_ERROR(check_id(in->id));
    out.id = in->id;
  }
  if (in->system_prompt != nullptr) {
    LLMSVC_RETURN_IF_ERROR(check_cstr(in->system_prompt, "system_prompt"));
    out.system_prompt = in->system_prompt;
  }
  out.raw = in->raw != 0;
  if (in->tools_json != nullptr) {
    LLMSVC_RETURN_IF_ERROR(check_cstr(in->tools_json, "tools_json"));
    out.tools = in->tools_json;
  }
  if (in->adapter != nullptr) {
    LLMSVC_RETURN_IF_ERROR(check_cstr(in->adapter, "adapter"));
    out.adapter = in->adapter;
    if (!out.adapter.empty()) LLMSVC_RETURN_IF_ERROR(check_adapter_name(out.adapter, "adapter"));
  }
  return out;
}

Result<CallParams> read_call_options(const llmsvc_call_options* options) {
  auto in = copy_in(options, kCallOptionsV1, "llmsvc_call_options");
  if (!in.ok()) return in.status();
  const llmsvc_call_options& o = *in;
  // The C struct's own rules (pointers, sizes, UTF-8) here; the values' rules where their
  // type lives (check_call_params).
  if (o.n_stop > 0 && o.stop == nullptr) return bad("stop is NULL but n_stop is " + std::to_string(o.n_stop));
  if (o.n_stop > kMaxStopStrings) return bad("more than 16 stop strings");

  CallParams p;
  p.sampling.seed = o.seed;
  p.sampling.temperature = o.temperature;
  p.sampling.top_k = o.top_k;
  p.sampling.top_p = o.top_p;
  p.sampling.min_p = o.min_p;
  p.sampling.repeat_penalty = o.repeat_penalty;
  p.sampling.repeat_last_n = o.repeat_last_n;
  p.max_tokens = o.max_tokens;
  p.slo_ttft_ratio = o.slo_ttft_ratio;
  p.slo_tpot_ratio = o.slo_tpot_ratio;
  for (size_t i = 0; i < o.n_stop; ++i) {
    LLMSVC_RETURN_IF_ERROR(check_cstr(o.stop[i], "stop[" + std::to_string(i) + "]"));
    p.stop.emplace_back(o.stop[i]);
  }
  if (o.on_tokens != nullptr) {
    // The C callback behind the engine's: a piece as llmsvc_piece, valid during the call only.
    p.on_tokens = [fn = o.on_tokens, user = o.on_tokens_user](const TokenPiece& t) {
      const llmsvc_piece piece{sizeof(llmsvc_piece), t.text.data(),    t.text.size(), t.ids.data(), t.ids.size(),
                               t.logprobs.empty() ? nullptr : t.logprobs.data()};
      return fn(&piece, user) == 0;
    };
  }
  p.logprobs = o.logprobs != 0;
  if (o.json_schema) {
    LLMSVC_RETURN_IF_ERROR(check_cstr(o.json_schema, "json_schema"));
    p.json_schema = o.json_schema;
  }
  if (o.grammar) {
    LLMSVC_RETURN_IF_ERROR(check_cstr(o.grammar, "grammar"));
    p.grammar = o.grammar;
  }
  p.level_percent = o.level_percent;
  p.prompt_keep = o.prompt_keep;
  if (o.adapter != nullptr) {
    LLMSVC_RETURN_IF_ERROR(check_cstr(o.adapter, "adapter"));
    p.adapter = o.adapter;
  }
  LLMSVC_RETURN_IF_ERROR(check_call_params(p));
  return p;  // (the SLO ratios are carried; the engine does not choose levels by them yet)
}

Status check_result_size(size_t struct_size, size_t v1_size, const char* what) {
  if (struct_size >= v1_size) return Status::Ok();
  return bad(std::string(what) + ".struct_size is " + std::to_string(struct_size) + ", at least " +
             std::to_string(v1_size) + " expected (call " + what + "_init)");
}

namespace {

// The figures of a statistics table (runtime/core/engine/stats_fields.h) that its C struct has.
// The table's `c` column must say which those are, with the table's type: a line and the public
// header cannot drift apart unseen. Templates, so that a field the C struct lacks is never named.
#define LLMSVC_C_FIGURE(type, name, since, c, ...)                                                     \
  static_assert(requires { out.name; } == (InCStruct::c == InCStruct::yes),                            \
                #name ": the table's c column and include/llmsvc/llmsvc.h disagree");                  \
  if constexpr (InCStruct::c == InCStruct::yes) {                                                      \
    static_assert(std::is_same_v<decltype(out.name), type>, #name ": not the C field's type");         \
    out.name = in.name;                                                                                \
  }
template <class Out>
void copy_figures(const CallStats& in, Out& out) {
  LLMSVC_CALL_STATS_FIELDS(LLMSVC_C_FIGURE)
}
template <class Out>
void copy_figures(const EngineStats& in, Out& out) {
  LLMSVC_ENGINE_STATS_FIELDS(LLMSVC_C_FIGURE)
}
template <class Out>
void copy_figures(const ContextInfo& in, Out& out) {
  LLMSVC_CONTEXT_INFO_FIELDS(LLMSVC_C_FIGURE)
}
#undef LLMSVC_C_FIGURE

}  // namespace

void write_call_result(const CallStats& stats, llmsvc_call_result* out) {
  llmsvc_call_result r;
  init(&r);
  r.finish_reason = static_cast<int32_t>(stats.finish);
  copy_figures(stats, r);
  copy_out(r, out);
}

void write_stats(const EngineStats& engine, int32_t open_contexts, llmsvc_stats* out) {
  llmsvc_stats s;
  init(&s);
  s.open_contexts = open_contexts;
  copy_figures(engine, s);
  copy_out(s, out);
}

void write_context_info(const ContextInfo& info, llmsvc_context_info* out) {
  llmsvc_context_info r;
  init(&r);
  std::snprintf(r.id, sizeof r.id, "%s", info.id.c_str());
  r.raw = info.raw ? 1 : 0;
  copy_figures(info, r);
  copy_out(r, out);
}

}  // namespace llmsvc::api
