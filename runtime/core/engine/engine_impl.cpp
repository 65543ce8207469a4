// EngineImpl: contexts, calls, streaming and stop conditions over Forward.
#include "runtime/core/engine/engine_impl.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "hal/cpu/cpu_device.h"
#include "runtime/core/engine/stop_matcher.h"
#include "runtime/core/sampler/sampler.h"
#include "runtime/core/tokenizer/tokenizer.h"

namespace llmsvc {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

constexpr int kDefaultMaxCtx = 4096;

bool valid_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
}

// Clears a context's busy flag when a call ends, however it ends.
struct BusyGuard {
  std::mutex& mu;
  ContextState& ctx;
  ~BusyGuard() {
    std::lock_guard<std::mutex> lock(mu);
    ctx.busy = false;
  }
};

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const EngineOptions& o) {
  int threads = o.n_threads > 0 ? o.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto device = hal::cpu::make_cpu_device(threads);
  auto model = Model::load(o.model_path, *device);
  if (!model.ok()) return model.status();
  const int trained = (*model)->config().n_ctx_train;
  int n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min(trained, kDefaultMaxCtx);
  if (n_ctx < 16) return Status(Code::invalid_argument, "engine: n_ctx must be at least 16");
  const int chunk = o.chunk_tokens > 0 ? o.chunk_tokens : 16;
  if (chunk > 4096) return Status(Code::invalid_argument, "engine: chunk_tokens must be at most 4096");
  return std::unique_ptr<Engine>(std::make_unique<EngineImpl>(std::move(device), std::move(model).value(), n_ctx, chunk));
}

EngineImpl::EngineImpl(std::unique_ptr<hal::Device> device, std::unique_ptr<Model> model, int n_ctx, int chunk_tokens)
    : device_(std::move(device)),
      model_(std::move(model)),
      n_ctx_(n_ctx),
      store_(policy::KvGeometry{model_->config().n_layer, model_->config().kv_dim(), chunk_tokens}, 0),
      id_rng_(std::random_device{}()),
      forward_(*model_, *device_, 256) {
  stats_.weight_bytes = model_->weight_bytes();
}

Result<std::string> EngineImpl::create_context(const ContextOptions& o) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string id = o.id;
  if (id.empty()) {
    static constexpr char kHex[] = "0123456789abcdef";
    do {
      id = "ctx-";
      uint64_t r = id_rng_();
      for (int i = 0; i < 16; ++i, r >>= 4) id += kHex[r & 15];
    } while (contexts_.count(id));
  } else if (!valid_id(id)) {
    return Status(Code::invalid_argument, "context id must be 1..64 characters of [A-Za-z0-9._-]");
  } else if (contexts_.count(id)) {
    return Status(Code::exists, "context '" + id + "' already exists");
  }
  auto ctx = std::make_unique<ContextState>(id, store_);
  ctx->raw = o.raw;
  ctx->system_prompt = o.system_prompt;
  contexts_.emplace(id, std::move(ctx));
  stats_.known_contexts = static_cast<int32_t>(contexts_.size());
  return id;
}

Status EngineImpl::check_context(std::string_view id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!contexts_.count(id)) return Status(Code::not_found, "no context '" + std::string(id) + "'");
  return Status::Ok();
}

Status EngineImpl::delete_context(std::string_view id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = contexts_.find(id);
  if (it == contexts_.end()) return Status(Code::not_found, "no context '" + std::string(id) + "'");
  if (it->second->busy) return Status(Code::busy, "context '" + std::string(id) + "' is inside a call");
  contexts_.erase(it);
  stats_.known_contexts = static_cast<int32_t>(contexts_.size());
  return Status::Ok();
}

EngineStats EngineImpl::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s = stats_;
  s.kv_bytes = store_.used_bytes();
  return s;
}

std::vector<int32_t> EngineImpl::prompt_tokens(const ContextState& ctx, std::string_view prompt) const {
  const Tokenizer& tok = model_->tokenizer();
  const bool at_start = ctx.tokens.empty();
  if (ctx.raw) return tok.encode(prompt, at_start, /*parse_special=*/true);
  const ChatTemplate& chat = model_->chat_template();
  const std::string& sys = ctx.system_prompt;
  const bool first = ctx.turns == 0;
  auto [before, after] = chat.user_turn_parts(sys, first);
  if (first) before = chat.system_prefix(sys) + before;
  const std::string user = chat.user_content(prompt);
  // The user's text must never become special tokens. When it holds no special-token text,
  // the whole turn is tokenized at once (exactly as llama.cpp tokenizes a rendered
  // template); otherwise the template parts and the user text are tokenized apart.
  if (tok.encode(user, false, true) == tok.encode(user, false, false)) {
    return tok.encode(before + user + after, at_start, /*parse_special=*/true);
  }
  std::vector<int32_t> out = tok.encode(before, at_start, /*parse_special=*/true);
  std::vector<int32_t> mid = tok.encode(user, false, /*parse_special=*/false);
  std::vector<int32_t> tail = tok.encode(after, false, /*parse_special=*/true);
  out.insert(out.end(), mid.begin(), mid.end());
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

Status EngineImpl::eval_pending(ContextState& ctx, std::vector<float>& logits) {
  if (ctx.tokens.empty()) return Status(Code::invalid_argument, "the context is empty and the prompt adds no tokens");
  // Everything evaluated already (an empty prompt after a prefill-only call): recompute the
  // last position to get its logits; its K/V are rewritten in place with the same values.
  if (ctx.n_evaluated == static_cast<int>(ctx.tokens.size())) ctx.n_evaluated--;
  const int n = static_cast<int>(ctx.tokens.size()) - ctx.n_evaluated;
  std::lock_guard<std::mutex> lock(compute_mu_);
  Status s = forward_.eval(ctx.kv, std::span<const int32_t>(ctx.tokens).subspan(ctx.n_evaluated), ctx.n_evaluated,
                           false, logits);
  if (s.ok()) ctx.n_evaluated += n;
  return s;
}

Status EngineImpl::call(std::string_view id, std::string_view prompt, const CallParams& params, const PieceFn& on_piece,
                        CallStats* out) {
  const auto t0 = Clock::now();
  ContextState* ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = contexts_.find(id);
    if (it == contexts_.end()) return Status(Code::not_found, "no context '" + std::string(id) + "'");
    if (it->second->busy) return Status(Code::busy, "context '" + std::string(id) + "' is inside another call");
    ctx = it->second.get();
    ctx->busy = true;
  }
  BusyGuard guard{mu_, *ctx};
  CallStats st;
  std::vector<int32_t> ids = prompt_tokens(*ctx, prompt);
  if (ctx->tokens.size() + ids.size() + 1 > static_cast<size_t>(n_ctx_)) {
    return Status(Code::context_overflow, "prompt of " + std::to_string(ids.size()) + " tokens does not fit: the context holds " +
                                              std::to_string(ctx->tokens.size()) + " of at most " + std::to_string(n_ctx_) + " tokens");
  }
  st.prompt_ids = ids;
  st.prompt_tokens = static_cast<int32_t>(ids.size());
  Status s = generate(*ctx, ids, params, on_piece, st);
  st.context_tokens = static_cast<int32_t>(ctx->tokens.size());
  st.ttft_ms = st.generated_tokens > 0 ? st.ttft_ms : ms_since(t0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.calls++;
    stats_.prompt_tokens += st.prompt_tokens;
    stats_.generated_tokens += st.generated_tokens;
  }
  if (out) *out = std::move(st);
  return s;
}

Status EngineImpl::generate(ContextState& ctx, const std::vector<int32_t>& prompt, const CallParams& params,
                            const PieceFn& on_piece, CallStats& st) {
  const auto t0 = Clock::now();
  const Tokenizer& tok = model_->tokenizer();
  const size_t old_size = ctx.tokens.size();
  const int old_evaluated = ctx.n_evaluated;
  ctx.tokens.insert(ctx.tokens.end(), prompt.begin(), prompt.end());

  // Switch-in: make the context's KV ready (all resident for now: reserve the chunks).
  Status s = ctx.kv.reserve(static_cast<int>(ctx.tokens.size()));
  st.switch_in_ms = ms_since(t0);
  std::vector<float> logits;
  const auto t_prefill = Clock::now();
  if (s.ok()) s = eval_pending(ctx, logits);
  st.prefill_ms = ms_since(t_prefill);
  if (!s.ok()) {
    // A failed prompt leaves the context exactly as it was.
    ctx.tokens.resize(old_size);
    ctx.n_evaluated = std::min(old_evaluated, static_cast<int>(old_size));
    ctx.kv.truncate(ctx.n_evaluated);
    return s;
  }
  if (!ctx.raw) ctx.turns++;

  Sampler sampler(params.sampling);
  Utf8Streamer utf8;
  StopMatcher stops(params.stop);
  bool cancelled = false;
  auto emit = [&](const std::string& text, int32_t token) {
    if (text.empty() || cancelled) return;
    if (on_piece && !on_piece(text, token)) cancelled = true;
  };
  Clock::time_point t_first{};
  FinishReason finish = FinishReason::none;
  while (st.generated_tokens < params.max_tokens) {
    if (params.cancel && params.cancel->load(std::memory_order_relaxed)) cancelled = true;
    if (cancelled) break;
    const int32_t t = sampler.sample(logits, ctx.tokens);  // it looks back repeat_last_n itself
    if (st.generated_tokens == 0) {
      t_first = Clock::now();
      st.ttft_ms = std::chrono::duration<double, std::milli>(t_first - t0).count();
    }
    ctx.tokens.push_back(t);
    st.generated_ids.push_back(t);
    st.generated_tokens++;
    if (tok.is_end_of_generation(t)) {
      finish = FinishReason::eos;
      break;
    }
    emit(stops.push(utf8.push(tok.token_to_piece(t))), t);
    if (stops.matched()) {
      finish = FinishReason::stop;
      break;
    }
    if (st.generated_tokens >= params.max_tokens) {
      finish = FinishReason::length;
      break;
    }
    if (ctx.tokens.size() + 1 > static_cast<size_t>(n_ctx_)) {
      finish = FinishReason::context_full;
      break;
    }
    if (cancelled) break;
    s = eval_pending(ctx, logits);
    if (!s.ok()) break;  // the tokens so far stay; the caller learns why generation stopped
  }
  if (!stops.matched()) emit(stops.push(utf8.flush()), -1);
  emit(stops.flush(), -1);
  if (cancelled) finish = FinishReason::cancelled;
  if (params.max_tokens == 0) finish = FinishReason::length;

  // Close the assistant turn in the history (evaluated with the next prompt).
  if (!ctx.raw) {
    std::vector<int32_t> end = tok.encode(model_->chat_template().assistant_end(), false, true);
    size_t skip = (finish == FinishReason::eos && !end.empty() && !st.generated_ids.empty() &&
                   st.generated_ids.back() == end.front()) ? 1 : 0;
    if (finish == FinishReason::eos && skip == 0 && !st.generated_ids.empty()) {
      ctx.tokens.pop_back();  // another end-of-generation token: replace it by the template's
    }
    ctx.tokens.insert(ctx.tokens.end(), end.begin() + static_cast<std::ptrdiff_t>(skip), end.end());
  }
  st.finish = finish;
  if (st.generated_tokens > 0) {
    st.decode_ms = ms_since(t_first);
    st.tpot_ms = st.generated_tokens > 1 ? st.decode_ms / (st.generated_tokens - 1) : 0.0;
  }
  if (!s.ok()) return s;
  if (cancelled) return Status(Code::cancelled, "call cancelled");
  return Status::Ok();
}

}  // namespace llmsvc
