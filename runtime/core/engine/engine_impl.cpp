// SPDX-License-Identifier: Apache-2.0
// EngineImpl: contexts, calls, streaming and stop conditions over Forward.
#include "runtime/core/engine/engine_impl.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include <cerrno>
#include <ctime>
#include <unistd.h>

#include "base/file_io.h"
#include "hal/devices/device_registry.h"
#include "policy/context_compression.h"
#include "policy/kv_swap.h"
#include "policy/layer_loader.h"
#include "policy/switch_planner.h"
#include "runtime/core/persist/chunk_table.h"
#include "runtime/core/engine/stop_matcher.h"
#include "runtime/core/persist/context_meta.h"
#include "runtime/core/persist/state_cleanup.h"
#include "runtime/core/persist/state_root.h"
#include "runtime/core/sampler/sampler.h"
#include "runtime/core/tokenizer/tokenizer.h"

namespace llmsvc {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

constexpr int kDefaultMaxCtx = 4096;

// Clears a context's busy flag and unpins its KV when a call ends, however it ends.
struct BusyGuard {
  std::mutex& mu;
  ContextState& ctx;
  policy::KvChunkStore& store;
  ~BusyGuard() {
    store.unpin(ctx.kv);
    std::lock_guard<std::mutex> lock(mu);
    ctx.busy = false;
  }
};

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const EngineOptions& o) {
  int threads = o.n_threads > 0 ? o.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int chunk = o.chunk_tokens > 0 ? o.chunk_tokens : 16;
  if (chunk > 4096) return Status(Code::invalid_argument, "engine: chunk_tokens must be at most 4096");
  auto root = persist::resolve_state_root(o.state_dir);
  if (!root.ok()) return root.status();
  // The root's owner and mode first (refused if another user could write there); from here
  // on every state file is reached beneath it, never through a link.
  auto opened = persist::open_state_root(*root);
  if (!opened.ok()) return opened.status();
  persist::StateDir state(*root, opened->dir);
  LLMSVC_RETURN_IF_ERROR(state.dir()->make_dirs(persist::layout::kContexts));
  const persist::CleanupCounts cleaned = persist::remove_interrupted(*state.dir());
  if (cleaned.total() > 0)
    std::fprintf(stderr, "llmsvc: state: removed %zu leftovers of interrupted writes (%zu temporary files, %zu "
                 "unfinished context directories)\n", cleaned.total(), cleaned.temp_files, cleaned.unfinished);
  auto device = hal::open_device(o.device, hal::DeviceOptions{threads});
  if (!device.ok()) return device.status();
  auto model = Model::load(o.model_path, **device);
  if (!model.ok()) return model.status();
  const int trained = (*model)->config().n_ctx_train;
  int n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min(trained, kDefaultMaxCtx);
  if (n_ctx < 16) return Status(Code::invalid_argument, "engine: n_ctx must be at least 16");
  std::unique_ptr<policy::SwapIo> swap_io;
  if (o.kv_swap) {
    auto io = policy::SwapIo::create();
    if (io.ok()) swap_io = std::move(io).value();
    else std::fprintf(stderr, "llmsvc: warning: KV swap is off: %s\n", io.status().message().c_str());
  }
  return std::unique_ptr<Engine>(std::make_unique<EngineImpl>(std::move(device).value(), std::move(model).value(), o, n_ctx,
                                                              std::move(state), std::move(swap_io)));
}

namespace {

policy::EvictionOrder eviction_order(EngineOptions::Eviction e) {
  switch (e) {
    case EngineOptions::Eviction::lru: return policy::EvictionOrder::lru;
    case EngineOptions::Eviction::whole_context: return policy::EvictionOrder::whole_sequence;
    case EngineOptions::Eviction::lctru: break;
  }
  return policy::EvictionOrder::lctru;
}

// A scope's share of the budget in bytes; 0 (none) without a budget or a share.
uint64_t share_bytes(double share, uint64_t budget) {
  return share > 0 && budget > 0 ? static_cast<uint64_t>(std::min(1.0, share) * static_cast<double>(budget)) : 0;
}

}  // namespace

EngineImpl::EngineImpl(std::unique_ptr<hal::Device> device, std::unique_ptr<Model> model, const EngineOptions& o,
                       int n_ctx, persist::StateDir state, std::unique_ptr<policy::SwapIo> swap_io)
    : device_(std::move(device)),
      model_(std::move(model)),
      n_ctx_(n_ctx),
      store_(policy::KvGeometry{model_->config().n_layer, model_->config().n_head_kv, model_->config().head_dim,
                                o.chunk_tokens > 0 ? o.chunk_tokens : 16},
             o.kv_budget_bytes, eviction_order(o.eviction)),
      state_(std::move(state)),
      recompute_on_model_change_(o.recompute_on_model_change),
      kv_ratio_(o.kv_ratio),
      kv_share_bytes_(share_bytes(o.kv_share, o.kv_budget_bytes)),
      aot_swap_out_(o.aot_swap_out),
      pipeline_(o.swap_recompute_pipeline),
      swap_io_(std::move(swap_io)),
      disk_quotas_(o.swap_bytes, o.swap_bytes_by_scope, [this](const std::string& id) { return stored_swap_bytes(id); },
                   [this](std::string_view scope) {
                     std::vector<std::string> ids;
                     if (auto names = state_.list(scope); names.ok())
                       for (std::string& n : *names) ids.push_back(std::string(scope) + "/" + n);
                     return ids;
                   }),
      id_rng_(std::random_device{}()),
      forward_(*model_, *device_, 256) {
  stats_.weight_bytes = model_->weight_bytes();
  if (!o.switch_profile.empty()) {
    auto cost = policy::load_switch_cost(o.switch_profile);
    if (cost.ok()) switch_cost_ = *cost;
    else warn("ignoring the switch-cost profile: " + cost.status().message());
  } else if (auto text = root().read_file(persist::layout::kSwitchProfile, 1 << 16); text.ok()) {
    auto cost = policy::switch_cost_from_json(*text);
    if (cost.ok()) switch_cost_ = *cost;
    else warn("ignoring the switch-cost profile " + std::string(persist::layout::kSwitchProfile) + ": " +
              cost.status().message());
  } else if (text.status().code() != Code::not_found) {
    warn("ignoring the switch-cost profile: " + text.status().message());
  }
  for (const auto& [scope, share] : o.kv_share_by_scope)
    kv_share_bytes_by_scope_[scope] = share_bytes(share, o.kv_budget_bytes);
  if (auto ids = state_.list(); ids.ok()) stats_.known_contexts = static_cast<int32_t>(ids->size());
}

EngineImpl::~EngineImpl() { flush_swap(); }

void EngineImpl::flush_swap() {
  if (swap_io_) swap_io_->flush();
}

void EngineImpl::warn(const std::string& msg) const { std::fprintf(stderr, "llmsvc: warning: %s\n", msg.c_str()); }

void EngineImpl::open_swap(ContextState& ctx) {
  if (!swap_io_) return;
  auto store = policy::SwapStore::open(*swap_io_, root(), persist::layout::chunks_dir(ctx.id));
  if (!store.ok()) {
    warn("context '" + ctx.id + "': its chunks will not be swapped: " + store.status().message());
    return;
  }
  ctx.swap = std::move(store).value();
  if (auto quota = disk_quotas_.attach(ctx.id)) {
    if (Status q = ctx.swap->set_quota(std::move(quota)); !q.ok())
      warn("context '" + ctx.id + "': its swap files are not counted: " + q.message());
  }
  if (aot_swap_out_) return;
  // Runs under the KV store's lock while the context is outside any call (its tokens and
  // evaluated count are not changing).
  ctx.kv.set_write_back([this, c = &ctx](int chunk) {
    const Status s = policy::store_chunk_now(c->kv, *c->swap, model_->content_hash(), c->tokens, c->n_evaluated, chunk);
    if (s.ok()) {
      swap_out_chunks_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    if (s.code() == Code::quota_exceeded) return false;  // the app's swap files are full: dropped
    swap_out_failures_.fetch_add(1, std::memory_order_relaxed);
    if (!swap_failing_.exchange(true)) warn("context '" + c->id + "': chunk not written back: " + s.message());
    return false;
  });
}

Result<std::string> EngineImpl::create_context(const ContextOptions& o) {
  // A system prompt the context cannot hold would fail every call later: refused now
  // (tokenized before the engine's lock: a long prompt takes a while).
  if (!o.raw && !o.system_prompt.empty()) {
    const ChatTemplate& chat = model_->chat_template();
    auto [before, after] = chat.user_turn_parts(o.system_prompt, true);
    const size_t opening = model_->tokenizer().encode(chat.system_prefix(o.system_prompt) + before + after, true, true).size();
    if (opening >= static_cast<size_t>(n_ctx_))
      return Status(Code::context_overflow, "the system prompt takes " + std::to_string(opening) +
                                                " tokens with its template, and a context holds " + std::to_string(n_ctx_));
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::string id = o.id;
  if (id.empty() || id.back() == '/') {  // "" or "<scope>/": a fresh id (in that scope)
    const std::string scope = id;
    if (!scope.empty() && !persist::valid_context_id(std::string_view(scope).substr(0, scope.size() - 1)))
      return Status(Code::invalid_argument, "bad context scope '" + scope + "'");
    static constexpr char kHex[] = "0123456789abcdef";
    do {
      id = scope + "ctx-";
      uint64_t r = id_rng_();
      for (int i = 0; i < 16; ++i, r >>= 4) id += kHex[r & 15];
    } while (contexts_.count(id) || state_.has(id));
  } else if (!persist::valid_context_key(id)) {
    return Status(Code::invalid_argument, "context id must be 1..64 characters of [A-Za-z0-9._-], not '.' or '..'");
  } else if (contexts_.count(id) || state_.has(id)) {
    return Status(Code::exists, "context '" + id + "' already exists");
  }
  // Files first, context.json last: the context exists once its metadata does. A directory
  // without it is the remains of a creation that crashed, and is cleared.
  const fileio::SafeDir& root = this->root();
  const std::string dir = persist::layout::context_dir(id);
  LLMSVC_RETURN_IF_ERROR(root.remove_tree(dir));
  LLMSVC_RETURN_IF_ERROR(root.make_dirs(persist::layout::chunks_dir(id)));
  auto log = persist::HistoryLog::create(root, persist::layout::history(id));
  persist::ContextMeta meta;
  meta.id = id;
  meta.model_hash = model_->content_hash();
  meta.vocab_hash = model_->vocab_hash();
  meta.model_name = std::string(model_->file().get_string("general.name").value_or(""));
  meta.raw = o.raw;
  meta.system_prompt = o.system_prompt;
  meta.chunk_tokens = store_.geometry().chunk_tokens;
  meta.created_unix = static_cast<int64_t>(::time(nullptr));
  Status s = log.ok() ? persist::write_context_meta(root, persist::layout::meta(id), meta) : log.status();
  if (s.ok()) s = root.sync(fileio::parent_directory(dir));  // contexts/ or its scope
  if (!s.ok()) {
    (void)root.remove_tree(dir);
    return s;
  }
  auto ctx = std::make_unique<ContextState>(id, store_);
  assign_share_locked(*ctx);
  ctx->raw = o.raw;
  ctx->system_prompt = o.system_prompt;
  ctx->log = std::move(log).value();
  open_swap(*ctx);
  contexts_.emplace(id, std::move(ctx));
  stats_.known_contexts++;
  return id;
}

void EngineImpl::assign_share_locked(ContextState& ctx) {
  const size_t slash = ctx.id.find('/');
  if (slash == std::string::npos) return;
  const std::string_view scope = std::string_view(ctx.id).substr(0, slash);
  auto own = kv_share_bytes_by_scope_.find(scope);
  const uint64_t bytes = own != kv_share_bytes_by_scope_.end() ? own->second : kv_share_bytes_;
  if (bytes == 0) return;
  auto& share = shares_[std::string(scope)];
  if (!share) share = store_.make_share(bytes);
  (void)ctx.kv.set_share(share);  // a new context holds no memory yet
}

Result<ContextState*> EngineImpl::load_locked(std::string_view id) {
  if (auto it = contexts_.find(id); it != contexts_.end()) return it->second.get();
  if (!state_.has(id)) return Status(Code::not_found, "no context '" + std::string(id) + "'");
  auto meta = persist::read_context_meta(root(), persist::layout::meta(id));
  if (!meta.ok()) return meta.status();
  if (meta->id != id) return Status(Code::io, persist::layout::meta(id) + ": names context '" + meta->id + "'");
  if (meta->model_hash != model_->content_hash()) {
    const bool can_recompute = recompute_on_model_change_ && meta->vocab_hash == model_->vocab_hash();
    if (!can_recompute)
      return Status(Code::model_mismatch, "context '" + std::string(id) + "' was made with another model ('" +
                                              meta->model_name + "'); its state cannot be used with this one");
  }
  persist::HistoryLog::Contents hist;
  auto log = persist::HistoryLog::open(root(), persist::layout::history(id), model_->config().n_vocab, &hist);
  if (!log.ok()) return log.status();
  if (hist.tokens.size() > static_cast<size_t>(n_ctx_))
    return Status(Code::context_overflow, "context '" + std::string(id) + "' holds " + std::to_string(hist.tokens.size()) +
                                              " tokens, more than this engine's " + std::to_string(n_ctx_));
  auto ctx = std::make_unique<ContextState>(std::string(id), store_);
  assign_share_locked(*ctx);
  ctx->raw = meta->raw;
  ctx->system_prompt = meta->system_prompt;
  ctx->tokens = std::move(hist.tokens);
  ctx->turns = ctx->persisted_turns = hist.turns;
  ctx->n_persisted = ctx->tokens.size();
  ctx->log = std::move(log).value();
  open_swap(*ctx);
  // The next call loads the chunks whose files are good and recomputes the rest.
  restore_chunks(*ctx);
  ContextState* raw = ctx.get();
  contexts_.emplace(std::string(id), std::move(ctx));
  return raw;
}

Status EngineImpl::open_context(std::string_view id) {
  std::lock_guard<std::mutex> lock(mu_);
  return load_locked(id).status();
}

void EngineImpl::release_context(std::string_view id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = contexts_.find(id);
  if (it == contexts_.end() || it->second->busy) return;
  // Its queued swap writes end first: their callbacks reach its chunks, and its files should
  // describe it for the next open.
  flush_swap();
  const uint64_t files = it->second->swap ? it->second->swap->counted_bytes() : 0;
  const std::string key = it->first;
  contexts_.erase(it);
  if (files > 0) disk_quotas_.detach(key, files);
}

uint64_t EngineImpl::stored_swap_bytes(const std::string& id) const {
  const fileio::SafeDir& root = this->root();
  const std::string dir = persist::layout::chunks_dir(id);
  auto names = root.list(dir);
  if (!names.ok()) return 0;
  uint64_t bytes = 0;
  for (const std::string& n : *names)
    if (auto st = root.stat(dir + "/" + n); st.ok() && S_ISREG(st->st_mode)) bytes += static_cast<uint64_t>(st->st_size);
  return bytes;
}

Status EngineImpl::delete_context(std::string_view id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!persist::valid_context_key(id) || (!contexts_.count(id) && !state_.has(id)))
    return Status(Code::not_found, "no context '" + std::string(id) + "'");
  auto it = contexts_.find(id);
  if (it != contexts_.end() && it->second->busy)
    return Status(Code::busy, "context '" + std::string(id) + "' is inside a call");
  // Hold its history lock while removing, so no other process is using it.
  std::unique_ptr<persist::HistoryLog> held;
  if (it == contexts_.end()) {
    auto log = persist::HistoryLog::open(root(), persist::layout::history(id), model_->config().n_vocab, nullptr);
    if (!log.ok() && log.status().code() == Code::busy) return log.status();
    if (log.ok()) held = std::move(log).value();
  }
  // context.json first: from then on the context no longer exists, even if removing the
  // rest is interrupted.
  if (Status u = root().unlink(persist::layout::meta(id)); !u.ok() && u.code() != Code::not_found)
    return Status(Code::io, "cannot delete context '" + std::string(id) + "': " + u.message());
  // Its queued swap writes end first: their callbacks reach its chunks, and a write landing
  // after the removal would leave a file behind.
  flush_swap();
  if (it != contexts_.end()) contexts_.erase(it);
  disk_quotas_.forget(std::string(id));
  held.reset();
  stats_.known_contexts = std::max(0, stats_.known_contexts - 1);
  return root().remove_tree(persist::layout::context_dir(id));
}

Result<std::vector<std::string>> EngineImpl::list_contexts() const { return state_.list(); }

Result<std::vector<std::string>> EngineImpl::list_scope(std::string_view scope) const { return state_.list(scope); }

Result<ContextInfo> EngineImpl::context_info(std::string_view id) const {
  ContextInfo info;
  info.id = std::string(id);
  const int C = store_.geometry().chunk_tokens;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = contexts_.find(id); it != contexts_.end()) {
      const ContextState& c = *it->second;
      info.loaded = true;
      info.raw = c.raw;
      info.system_prompt = c.system_prompt;
      // What storage holds: a call in flight may be appending to the tokens.
      info.tokens = static_cast<int32_t>(c.n_persisted.load());
      info.turns = c.persisted_turns.load();
      const policy::KvSequence::Counts n = c.kv.counts();
      info.chunks_resident = n.resident();
      info.chunks_f16 = n.f16;
      info.chunks_q8 = n.q8;
      info.chunks_q4 = n.q4;
      info.chunks_q3 = n.q3;
      info.chunks_q2 = n.q2;
      info.chunks_swapped = n.swapped;
      // A call in flight may already hold chunks for tokens not yet on storage.
      info.chunks_total = std::max((info.tokens + C - 1) / C, info.chunks_resident + info.chunks_swapped);
      // Chunks never computed (tokens appended unevaluated) count as dropped: they are
      // computed from their tokens when needed.
      info.chunks_dropped = info.chunks_total - info.chunks_resident - info.chunks_swapped;
      info.kv_resident_bytes = n.resident_bytes;
      return info;
    }
  }
  if (!state_.has(id)) return Status(Code::not_found, "no context '" + std::string(id) + "'");
  auto meta = persist::read_context_meta(root(), persist::layout::meta(id));
  if (!meta.ok()) return meta.status();
  auto hist = persist::HistoryLog::peek(root(), persist::layout::history(id), model_->config().n_vocab);
  if (!hist.ok()) return hist.status();
  info.raw = meta->raw;
  info.system_prompt = meta->system_prompt;
  info.tokens = static_cast<int32_t>(hist->tokens.size());
  info.turns = hist->turns;
  info.chunks_total = (info.tokens + C - 1) / C;
  // Swapped: the chunks its table lists that have a file (a reopen loads them unless the
  // file turns out bad); the rest is recomputed.
  auto table = persist::read_chunk_table(root(), persist::layout::chunk_table(id));
  auto files = policy::list_chunk_files(root(), persist::layout::chunks_dir(id));
  if (table.ok() && files.ok() && table->model_hash == model_->content_hash() && table->chunk_tokens == C) {
    const int listed = std::min(static_cast<int>(table->chunks.size()), info.chunks_total);
    info.chunks_swapped = static_cast<int32_t>(
        std::count_if(files->begin(), files->end(), [listed](uint32_t c) { return c < static_cast<uint32_t>(listed); }));
  }
  info.chunks_dropped = info.chunks_total - info.chunks_swapped;
  return info;
}

EngineStats EngineImpl::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s = stats_;
  s.kv_bytes = store_.used_bytes();
  s.kv_peak_bytes = store_.peak_bytes();
  s.kv_evictions = store_.evictions();
  s.swap_out_chunks = swap_out_chunks_.load();
  s.swap_out_bytes = swap_out_bytes_.load();
  s.swap_out_failures = swap_out_failures_.load();
  s.swap_out_deferred = swap_out_deferred_.load();
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
  // One micro-batch per turn at the compute lock, so a long prompt lets other calls' tokens
  // through between its micro-batches. They are the micro-batches one eval of the whole
  // prompt would make, so the results are the same bits.
  const int total = static_cast<int>(ctx.tokens.size());
  while (ctx.n_evaluated < total) {
    const int n = std::min(forward_.max_batch(), total - ctx.n_evaluated);
    std::lock_guard<FairMutex> lock(compute_mu_);
    LLMSVC_RETURN_IF_ERROR(forward_.eval(
        ctx.kv, std::span<const int32_t>(ctx.tokens).subspan(static_cast<size_t>(ctx.n_evaluated), static_cast<size_t>(n)),
        ctx.n_evaluated, false, logits));
    ctx.n_evaluated += n;
  }
  return Status::Ok();
}

Status EngineImpl::switch_in(ContextState& ctx, CallStats& st) {
  const int C = store_.geometry().chunk_tokens;
  std::vector<policy::MissingChunk> missing;
  for (int c = 0; c < ctx.kv.n_chunks() && c * C < ctx.n_evaluated; ++c) {
    if (ctx.kv.state(c) == policy::ChunkState::resident) continue;
    const bool has_file = ctx.swap != nullptr && ctx.kv.state(c) == policy::ChunkState::swapped;
    missing.push_back({c, std::min(C, ctx.n_evaluated - c * C), has_file, store_.geometry().chunk_bytes(ctx.kv.format(c))});
  }
  if (missing.empty()) return Status::Ok();
  // The cost-model split (some swapped chunks recomputed while the rest load, layer by
  // layer), or, without a profile, what the states say.
  const policy::SwitchPlan plan = switch_cost_ && pipeline_ ? policy::plan_switch_in(missing, model_->config().n_layer, ctx.n_evaluated, *switch_cost_)
                                               : policy::plan_by_state(missing);

  std::vector<int> brought;  // back in memory: released again if switch-in fails
  std::set<int> file_good;   // claimed for loading, their files not found bad
  auto fail = [&](Status s) {
    for (int b : brought) {
      // A chunk whose file is still good goes back to swapped, not dropped.
      if (file_good.count(b)) ctx.kv.mark_loaded(b);
      ctx.kv.release(b);
    }
    return s;
  };
  auto bring = [&](int c, hal::KvFormat f) -> Status {
    LLMSVC_RETURN_IF_ERROR(ctx.kv.make_resident(c, f));
    if (std::find(brought.begin(), brought.end(), c) == brought.end()) brought.push_back(c);
    return Status::Ok();
  };
  auto failed_load = [&](int c, const Status& why) {
    // Never fatal: the tokens are the source of truth.
    warn("context '" + ctx.id + "': recomputing a chunk: " + why.message());
    st.chunk_load_failures++;
    file_good.erase(c);
  };
  std::vector<int> recompute = plan.recompute;
  // Loads: each chunk in the format its file holds. Whole files in batches, before the
  // recompute pass, unless the plan overlaps them with it (then full chunks layer by layer).
  std::vector<int> whole, layered;
  for (int c : plan.load) {
    const bool was_swapped = ctx.kv.state(c) == policy::ChunkState::swapped;
    if (Status s = bring(c, ctx.kv.format(c)); !s.ok()) return fail(s);
    if (was_swapped) file_good.insert(c);
    const bool full = (c + 1) * C <= ctx.n_evaluated;
    (!plan.overlap || !full ? whole : layered).push_back(c);
  }
  const uint64_t model_hash = model_->content_hash();
  if (!whole.empty()) {
    std::vector<Status> loaded = policy::load_chunks(ctx.kv, *ctx.swap, model_hash, ctx.tokens, ctx.n_evaluated, whole);
    for (size_t i = 0; i < whole.size(); ++i) {
      if (loaded[i].ok()) {
        st.chunks_loaded++;
        continue;
      }
      failed_load(whole[i], loaded[i]);
      recompute.push_back(whole[i]);
    }
  }
  std::unique_ptr<policy::LayerLoader> loader;
  if (!layered.empty()) {
    loader = std::make_unique<policy::LayerLoader>(ctx.kv, *ctx.swap, model_hash, ctx.tokens, ctx.n_evaluated, layered);
    for (size_t i = 0; i < loader->header_failed().size(); ++i) {
      failed_load(loader->header_failed()[i], loader->header_status()[i]);
      recompute.push_back(loader->header_failed()[i]);
    }
  }
  // Recomputes: f16 chunks at their positions, one pass; loads (if any) overlap it.
  auto run_recompute = [&](std::vector<int> chunks, policy::LayerLoader* overlap) -> Status {
    std::sort(chunks.begin(), chunks.end());
    std::vector<int32_t> toks, pos;
    for (int c : chunks) {
      LLMSVC_RETURN_IF_ERROR(bring(c, hal::KvFormat::f16));
      for (int p = c * C; p < std::min((c + 1) * C, ctx.n_evaluated); ++p) {
        toks.push_back(ctx.tokens[p]);
        pos.push_back(p);
      }
    }
    if (toks.empty()) return Status::Ok();
    std::lock_guard<FairMutex> lock(compute_mu_);
    Forward::LayerHook hook;
    if (overlap) hook = [overlap](int layer) { return overlap->before_layer(layer); };
    LLMSVC_RETURN_IF_ERROR(forward_.recompute(ctx.kv, toks, pos, ctx.n_evaluated, hook));
    st.chunks_recomputed += static_cast<int32_t>(chunks.size());
    st.tokens_recomputed += static_cast<int32_t>(toks.size());
    return Status::Ok();
  };
  Status s = run_recompute(recompute, loader.get());
  if (loader) {
    loader->finish();
    st.chunks_loaded += loader->loaded();
  }
  if (!s.ok()) return fail(s);
  if (loader && !loader->late_failed().empty()) {
    // A layer frame failed mid-pass: that chunk, and every chunk this pass recomputed after
    // it (it attended to the chunk's wrong layers), are recomputed again.
    const int first = loader->late_failed().front();
    std::vector<int> again = loader->late_failed();
    for (size_t i = 0; i < again.size(); ++i) failed_load(again[i], loader->late_status()[i]);
    for (int c : recompute)
      if (c > first) again.push_back(c);
    for (int c : loader->late_failed()) ctx.kv.release(c);  // its memory is in the file's format
    if (Status s2 = run_recompute(again, nullptr); !s2.ok()) return fail(s2);
  }
  return Status::Ok();
}

void EngineImpl::swap_out(ContextState& ctx, CallStats& st) {
  if (!ctx.swap) return;
  const auto t0 = Clock::now();
  // Without ahead-of-time swap-out, chunks are written only when evicted; the table still
  // follows every call.
  auto queued = !aot_swap_out_ ? Result<policy::SwapOutQueued>(policy::SwapOutQueued{}) : policy::store_changed_chunks(
      ctx.kv, *ctx.swap, model_->content_hash(), ctx.tokens, ctx.n_evaluated,
      [this, id = ctx.id](int c, uint64_t bytes, const Status& s) {
        if (s.ok()) {
          swap_out_chunks_.fetch_add(1, std::memory_order_relaxed);
          swap_out_bytes_.fetch_add(bytes, std::memory_order_relaxed);
          swap_failing_.store(false, std::memory_order_relaxed);
          return;
        }
        // The chunk keeps no current file (it is recomputed if evicted); nothing is lost.
        swap_out_failures_.fetch_add(1, std::memory_order_relaxed);
        if (!swap_failing_.exchange(true))
          warn("context '" + id + "': chunk " + std::to_string(c) + " not swapped out: " + s.message());
      });
  if (queued.ok()) {
    st.chunks_swapped_out = queued->chunks;
    swap_out_deferred_.fetch_add(static_cast<uint64_t>(queued->deferred), std::memory_order_relaxed);
  }
  else warn("context '" + ctx.id + "': swap-out: " + queued.status().message());

  // The chunk table, after the chunk files queued above.
  persist::ChunkTable table;
  table.chunk_tokens = store_.geometry().chunk_tokens;
  table.model_hash = model_->content_hash();
  table.n_evaluated = ctx.n_evaluated;
  const int n = std::min(ctx.kv.n_chunks(), (ctx.n_evaluated + table.chunk_tokens - 1) / table.chunk_tokens);
  for (int c = 0; c < n; ++c) {
    persist::ChunkTable::Entry e;
    e.format = static_cast<uint8_t>(ctx.kv.format(c));
    e.mass.assign(ctx.kv.token_mass(c).begin(), ctx.kv.token_mass(c).end());
    e.seen.assign(ctx.kv.token_seen(c).begin(), ctx.kv.token_seen(c).end());
    table.chunks.push_back(std::move(e));
  }
  table.n_evaluated = std::min(table.n_evaluated, n * table.chunk_tokens);
  auto bytes = persist::encode_chunk_table(table);
  if (bytes.ok()) {
    policy::SwapPath path(state_.dir(), persist::layout::chunk_table(ctx.id));
    swap_io_->write_async(std::move(path), std::move(bytes).value(), [this, id = ctx.id](Status s) {
      if (!s.ok() && !swap_failing_.exchange(true)) warn("context '" + id + "': chunk table not written: " + s.message());
    });
  } else {
    warn("context '" + ctx.id + "': chunk table: " + bytes.status().message());
  }
  st.swap_out_ms = ms_since(t0);
}

void EngineImpl::restore_chunks(ContextState& ctx) {
  auto table = persist::read_chunk_table(root(), persist::layout::chunk_table(ctx.id));
  if (!table.ok()) {
    if (table.status().code() != Code::not_found)
      warn("context '" + ctx.id + "': recomputing its KV: " + table.status().message());
    return;
  }
  // A table from another model (reopened with recompute_on_model_change), another chunk size
  // or ahead of the history (it cannot be: it is written after it) is ignored.
  if (table->model_hash != model_->content_hash() || table->chunk_tokens != store_.geometry().chunk_tokens ||
      table->n_evaluated > static_cast<int32_t>(ctx.tokens.size()))
    return;
  std::set<uint32_t> files;
  if (ctx.swap) {
    auto listed = ctx.swap->list();
    if (listed.ok()) files.insert(listed->begin(), listed->end());
  }
  std::vector<policy::KvSequence::RestoredChunk> chunks(table->chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c) {
    persist::ChunkTable::Entry& e = table->chunks[c];
    chunks[c].format = static_cast<hal::KvFormat>(e.format);
    chunks[c].on_disk = files.count(static_cast<uint32_t>(c)) > 0;
    chunks[c].mass = std::move(e.mass);
    chunks[c].seen = std::move(e.seen);
  }
  if (Status s = ctx.kv.restore(chunks); !s.ok()) {
    warn("context '" + ctx.id + "': recomputing its KV: " + s.message());
    return;
  }
  ctx.n_evaluated = table->n_evaluated;
}

Status EngineImpl::compress(ContextState& ctx) { return policy::compress_context(ctx.kv, ctx.n_evaluated, kv_ratio_); }

Status EngineImpl::call(std::string_view id, std::string_view prompt, const CallParams& params, const PieceFn& on_piece,
                        CallStats* out) {
  const auto t0 = Clock::now();
  ContextState* ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto loaded = load_locked(id);
    if (!loaded.ok()) return loaded.status();
    ctx = *loaded;
    if (ctx->busy) return Status(Code::busy, "context '" + std::string(id) + "' is inside another call");
    ctx->busy = true;
  }
  store_.pin(ctx->kv);  // its chunks are the working set: never evicted during the call
  BusyGuard guard{mu_, *ctx, store_};
  CallStats st;
  std::vector<int32_t> ids = prompt_tokens(*ctx, prompt);
  if (ctx->tokens.size() + ids.size() + 1 > static_cast<size_t>(n_ctx_)) {
    return Status(Code::context_overflow, "prompt of " + std::to_string(ids.size()) + " tokens does not fit: the context holds " +
                                              std::to_string(ctx->tokens.size()) + " of at most " + std::to_string(n_ctx_) + " tokens");
  }
  if (params.max_context_tokens > 0 && ctx->tokens.size() + ids.size() + 1 > static_cast<size_t>(params.max_context_tokens)) {
    return Status(Code::quota_exceeded, "prompt of " + std::to_string(ids.size()) + " tokens does not fit the quota: the context holds " +
                                            std::to_string(ctx->tokens.size()) + " of at most " +
                                            std::to_string(params.max_context_tokens) + " tokens");
  }
  st.prompt_ids = ids;
  st.prompt_tokens = static_cast<int32_t>(ids.size());
  Status s = generate(*ctx, ids, params, on_piece, st);
  // Compression failing (out of budget for the new form) leaves chunks as they were: the
  // call's answer stands.
  (void)compress(*ctx);
  if (Status p = persist(*ctx); !p.ok()) {
    s = p;
    st.generated_ids.clear();
    st.generated_tokens = 0;
  } else {
    swap_out(*ctx, st);  // ahead of time: evicting these chunks later costs nothing
  }
  st.context_tokens = static_cast<int32_t>(ctx->tokens.size());
  st.ttft_ms = st.generated_tokens > 0 ? st.ttft_ms : ms_since(t0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.calls++;
    stats_.prompt_tokens += st.prompt_tokens;
    stats_.generated_tokens += st.generated_tokens;
    stats_.chunks_loaded += static_cast<uint64_t>(st.chunks_loaded);
    stats_.chunks_recomputed += static_cast<uint64_t>(st.chunks_recomputed);
    stats_.chunk_load_failures += static_cast<uint64_t>(st.chunk_load_failures);
    stats_.tokens_recomputed += static_cast<uint64_t>(st.tokens_recomputed);
    stats_.switch_in_ms += st.switch_in_ms;
  }
  if (out) *out = std::move(st);
  return s;
}

Status EngineImpl::persist(ContextState& ctx) {
  if (ctx.tokens.size() < ctx.n_persisted) return Status(Code::internal, "engine: history shrank below what is persisted");
  if (ctx.tokens.size() == ctx.n_persisted && ctx.turns == ctx.persisted_turns) return Status::Ok();
  const std::span<const int32_t> fresh = std::span<const int32_t>(ctx.tokens).subspan(ctx.n_persisted);
  Status s = ctx.log->append(fresh, ctx.turns);
  if (!s.ok()) {
    // Not durable, so not acknowledged: the context goes back to what storage holds.
    ctx.tokens.resize(ctx.n_persisted);
    ctx.turns = ctx.persisted_turns;
    ctx.n_evaluated = std::min(ctx.n_evaluated, static_cast<int>(ctx.n_persisted));
    ctx.kv.truncate(ctx.n_evaluated);
    return Status(s.code(), "the turn could not be saved, so it was not kept: " + s.message());
  }
  ctx.n_persisted = ctx.tokens.size();
  ctx.persisted_turns = ctx.turns;
  return Status::Ok();
}

Status EngineImpl::generate(ContextState& ctx, const std::vector<int32_t>& prompt, const CallParams& params,
                            const PieceFn& on_piece, CallStats& st) {
  const auto t0 = Clock::now();
  const Tokenizer& tok = model_->tokenizer();
  const size_t old_size = ctx.tokens.size();
  const int old_evaluated = ctx.n_evaluated;
  ctx.tokens.insert(ctx.tokens.end(), prompt.begin(), prompt.end());

  // Switch-in: bring the context's KV back into memory, then room for the new tokens.
  Status s = switch_in(ctx, st);
  if (s.ok()) s = ctx.kv.reserve(static_cast<int>(ctx.tokens.size()));
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
    if (ctx.tokens.size() + 1 > static_cast<size_t>(n_ctx_) ||
        (params.max_context_tokens > 0 && ctx.tokens.size() + 1 > static_cast<size_t>(params.max_context_tokens))) {
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
