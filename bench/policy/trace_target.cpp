// SPDX-License-Identifier: Apache-2.0
// The two trace targets: llmsvc::Engine in process, and llmsvcd through llmsvc.h.
#include "bench/policy/trace_target.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "base/clock.h"
#include "base/file_io.h"
#include "llmsvc/llmsvc.h"
#include "tests/service/daemon_process.h"

namespace llmsvc::bench {
namespace {

// The figures the engine's CallStats and llmsvc.h's llmsvc_call_result both carry (same names).
template <class Figures>
void copy_figures(const Figures& f, TargetCall* out) {
  out->switch_in_ms = f.switch_in_ms;
  out->prefill_ms = f.prefill_ms;
  out->decode_ms = f.decode_ms;
  out->chunks_loaded = f.chunks_loaded;
  out->chunks_recomputed = f.chunks_recomputed;
  out->prompt_tokens = f.prompt_tokens;
  out->generated_tokens = f.generated_tokens;
  out->context_tokens = f.context_tokens;
}

class EngineTarget final : public TraceTarget {
 public:
  explicit EngineTarget(std::unique_ptr<Engine> e) : e_(std::move(e)) {}

  Status start_context(const std::string& id, const std::string& text) override {
    ContextOptions co;
    co.id = id;
    co.raw = true;
    if (auto made = e_->create_context(co); !made.ok()) return made.status();
    CallParams p;
    p.max_tokens = 0;
    return e_->call(id, text, p, [](std::string_view, int32_t) { return true; }, nullptr);
  }
  Status delete_context(const std::string& id) override { return e_->delete_context(id); }
  Status call(const std::string& id, const std::string& prompt, int max_tokens, TargetCall* out) override {
    CallParams p;
    p.max_tokens = max_tokens;  // sampling defaults: greedy
    CallStats st;
    const auto t0 = SteadyClock::now();
    Status s = e_->call(id, prompt, p, [](std::string_view, int32_t) { return true; }, &st);
    out->wall_ms = ms_since(t0);
    copy_figures(st, out);
    out->tokens_recomputed = st.tokens_recomputed;
    out->load_failures = st.chunk_load_failures;
    out->swapped_out = st.chunks_swapped_out;
    return s;
  }
  void settle() override { e_->flush_swap(); }
  TargetFigures figures() override {
    const EngineStats s = e_->stats();
    return {s.kv_peak_bytes, s.swap_out_bytes, static_cast<int64_t>(s.kv_evictions),
            static_cast<int64_t>(s.swap_out_deferred)};
  }

 private:
  std::unique_ptr<Engine> e_;
};

Status api_status(llmsvc_status st, const std::string& what) {
  if (st == LLMSVC_OK) return Status::Ok();
  return Status(Code::internal, what + ": " + llmsvc_status_name(st) + ": " + llmsvc_last_error());
}

// An app of llmsvcd: one connection, a handle open on each of its contexts for the whole run
// (as an app keeps its contexts), the daemon SIGTERMed at the end.
class DaemonTarget final : public TraceTarget {
 public:
  DaemonTarget(std::unique_ptr<test::DaemonProcess> d, llmsvc_service* svc) : daemon_(std::move(d)), svc_(svc) {}
  ~DaemonTarget() override {
    for (auto& [id, ctx] : open_) llmsvc_context_close(ctx);
    llmsvc_unbind(svc_);
    (void)daemon_->kill_and_wait(SIGTERM);
  }

  Status start_context(const std::string& id, const std::string& text) override {
    llmsvc_context_options o;
    llmsvc_context_options_init(&o);
    o.id = id.c_str();
    o.raw = 1;
    llmsvc_context* ctx = nullptr;
    LLMSVC_RETURN_IF_ERROR(api_status(llmsvc_context_new(svc_, &o, &ctx), "create " + id));
    open_[id] = ctx;
    llmsvc_call_options co;
    llmsvc_call_options_init(&co);
    co.max_tokens = 0;
    return api_status(llmsvc_call(ctx, text.data(), text.size(), &co, nullptr, nullptr, nullptr), "prefill " + id);
  }
  Status delete_context(const std::string& id) override {
    if (auto it = open_.find(id); it != open_.end()) {
      llmsvc_context_close(it->second);
      open_.erase(it);
    }
    return api_status(llmsvc_context_delete(svc_, id.c_str()), "delete " + id);
  }
  Status call(const std::string& id, const std::string& prompt, int max_tokens, TargetCall* out) override {
    auto it = open_.find(id);
    if (it == open_.end()) return Status(Code::not_found, "no open context " + id);
    llmsvc_call_options co;
    llmsvc_call_options_init(&co);
    co.max_tokens = max_tokens;
    co.temperature = 0;
    llmsvc_call_result r;
    llmsvc_call_result_init(&r);
    const auto t0 = SteadyClock::now();
    const llmsvc_status st = llmsvc_call(it->second, prompt.data(), prompt.size(), &co, nullptr, nullptr, &r);
    out->wall_ms = ms_since(t0);
    copy_figures(r, out);
    return api_status(st, "call " + id);
  }
  // llmsvc.h has no flush: wait until the daemon's swap-out figure has stood still for 0.5 s.
  void settle() override {
    uint64_t last = figures().swap_out_bytes;
    for (auto still_since = SteadyClock::now(); ms_since(still_since) < 500;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const uint64_t now = figures().swap_out_bytes;
      if (now != last) still_since = SteadyClock::now();
      last = now;
    }
  }
  TargetFigures figures() override {
    llmsvc_stats s;
    llmsvc_stats_init(&s);
    if (llmsvc_get_stats(svc_, &s) != LLMSVC_OK) return {};
    return {s.kv_peak_bytes, s.swap_out_bytes, -1, -1};
  }

 private:
  std::unique_ptr<test::DaemonProcess> daemon_;
  llmsvc_service* svc_;
  std::map<std::string, llmsvc_context*> open_;
};

}  // namespace

std::unique_ptr<TraceTarget> engine_target(std::unique_ptr<Engine> engine) {
  return std::make_unique<EngineTarget>(std::move(engine));
}

Result<std::unique_ptr<TraceTarget>> daemon_target(const DaemonTargetOptions& o) {
  LLMSVC_RETURN_IF_ERROR(fileio::make_dirs(o.dir + "/state"));
  const std::string config = o.dir + "/llmsvcd.toml";
  std::string devices;
  for (size_t at = 0; at <= o.device.size() && !o.device.empty();) {
    const size_t comma = std::min(o.device.find(',', at), o.device.size());
    devices += (devices.empty() ? "devices = [\"" : "\", \"") + o.device.substr(at, comma - at);
    at = comma + 1;
  }
  if (!devices.empty()) devices += "\"]\n";
  LLMSVC_RETURN_IF_ERROR(fileio::write_atomic(
      config, devices + "kv_budget_bytes = " + std::to_string(o.kv_budget_bytes) + "\nkv_ratio = " + std::to_string(o.kv_ratio) +
                  "\nn_ctx = " + std::to_string(o.n_ctx) +
                  // One app: no KV share (the default caps an app at half the budget), as in process.
                  "\n[quotas]\nkv_share = 0.0\n"));
  auto d = std::make_unique<test::DaemonProcess>(o.dir, std::vector<std::string>{"--config", config});
  if (!o.switch_profile.empty()) {
    std::error_code ec;
    std::filesystem::copy_file(o.switch_profile, d->state_dir() + "/switch-profile.json",
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return Status(Code::io, "copying " + o.switch_profile + ": " + ec.message());
  }
  d->set_model(o.model);
  d->set_threads(o.threads);
  if (!d->start()) return Status(Code::unavailable, "llmsvcd did not start; see " + d->log_path());
  llmsvc_bind_options bo;
  llmsvc_bind_options_init(&bo);
  const std::string target = d->target();
  bo.target = target.c_str();
  llmsvc_service* svc = nullptr;
  LLMSVC_RETURN_IF_ERROR(api_status(llmsvc_bind(&bo, &svc), "bind " + target));
  return std::unique_ptr<TraceTarget>(std::make_unique<DaemonTarget>(std::move(d), svc));
}

}  // namespace llmsvc::bench
