// SPDX-License-Identifier: Apache-2.0
// EngineImpl: contexts, calls, streaming and stop conditions over Forward.
#include "runtime/core/engine/engine_impl.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>
#include <unordered_set>

#include <cerrno>
#include <ctime>
#include <unistd.h>

#include "base/clock.h"
#include "base/file_io.h"
#include "runtime/core/chat/tool_calls.h"
#include "runtime/core/chat/tool_spec.h"
#include "hal/devices/device_registry.h"
#include "runtime/core/persist/chunk_table.h"
#include "runtime/core/engine/prompt_compression.h"
#include "runtime/core/engine/stop_matcher.h"
#include "runtime/core/engine/model_info.h"
#include "runtime/core/engine/token_trail.h"
#include "runtime/core/persist/context_meta.h"
#include "runtime/core/persist/state_cleanup.h"
#include "runtime/core/persist/state_root.h"
#include "runtime/core/sampler/sampler.h"
#include "runtime/core/tokenizer/tokenizer.h"

namespace llmsvc {

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
  hal::DeviceOptions dev_options;
  dev_options.n_threads = threads;
  dev_options.cache_dir = *root + "/cache/opencl";
  // A GPU's KV arena holds the whole budget (with room for fragmentation).
  if (o.kv_budget_bytes) dev_options.kv_bytes = o.kv_budget_bytes + o.kv_budget_bytes / 8;
  auto devices = hal::open_devices(o.device, dev_options);
  if (!devices.ok()) return devices.status();
  auto model = Model::load(o.model_path, *devices->front());
  if (!model.ok()) return model.status();
  std::vector<hal::Device*> order;
  for (const auto& d : *devices) order.push_back(d.get());
  auto rule = hal::parse_placement(o.placement, (*model)->config().n_layer, static_cast<int>(order.size()));
  if (!rule.ok()) return rule.status();
  auto forward = Forward::create(**model, order, *rule, Forward::batch_for(order));
  if (!forward.ok()) return forward.status();
  auto adapters = AdapterSet::load(o.adapters, **model, *devices->front());
  if (!adapters.ok()) return adapters.status();
  // The graph takes the adapters' side branches (an elastic model's recovery adapters it has).
  if (!adapters->empty()) LLMSVC_RETURN_IF_ERROR((*forward)->set_adapters(adapters->choices()));
  // KV chunks kept in a GPU's own memory: the budget is at most what its arena holds; swap
  // and compression copy chunks through the device's transfer queue as the CPU's are read in
  // place. Key mass comes from the prompt kernels and from the one-launch decode kernel as
  // integer shares, so tracking it costs a decode step one small launch.
  EngineOptions eo = o;
  if (eo.kv_ratio <= 0) (*forward)->set_mass_tracking(false);  // only compression reads it
  if (hal::MemoryPool* kv = &(*forward)->kv_memory(); !kv->host_visible()) {
    const uint64_t room = kv->capacity() - kv->capacity() / 16;
    if (eo.kv_budget_bytes == 0 || eo.kv_budget_bytes > room) eo.kv_budget_bytes = room;
    std::fprintf(stderr, "llmsvc: KV cache in %s (%llu MiB); swap %s\n", kv->space().c_str(),
                 static_cast<unsigned long long>(eo.kv_budget_bytes >> 20), eo.kv_swap ? "on" : "off");
  }
  // The whole trained length by default: the chunk store pages the KV under the budget, and
  // nothing else sized by n_ctx is allocated before a context reaches that length.
  const int n_ctx = o.n_ctx > 0 ? o.n_ctx : (*model)->config().n_ctx_train;
  if (n_ctx < 16) return Status(Code::invalid_argument, "engine: n_ctx must be at least 16");
  // The swap writer also writes each context's chunk table, which a restart needs to recompute
  // the KV (and not prefill the history as a new prompt) where swap is off.
  std::unique_ptr<policy::SwapIo> swap_io;
  auto io = policy::SwapIo::create();
  if (io.ok()) swap_io = std::move(io).value();
  else std::fprintf(stderr, "llmsvc: warning: KV swap is off: %s\n", io.status().message().c_str());
  return std::unique_ptr<Engine>(std::make_unique<EngineImpl>(std::move(devices).value(), std::move(model).value(),
                                                              std::move(forward).value(), std::move(adapters).value(), eo,
                                                              n_ctx, std::move(state), std::move(swap_io)));
}


EngineImpl::EngineImpl(std::vector<std::unique_ptr<hal::Device>> devices, std::unique_ptr<Model> model,
                       std::unique_ptr<Forward> forward, AdapterSet adapters, const EngineOptions& o, int n_ctx,
                       persist::StateDir state, std::unique_ptr<policy::SwapIo> swap_io)
    : devices_(std::move(devices)),
      model_(std::move(model)),
      forward_(std::move(forward)),
      adapters_(std::move(adapters)),
      n_ctx_(n_ctx),
      state_(std::move(state)),
      recompute_on_model_change_(o.recompute_on_model_change),
      kv_(*model_, o, state_, std::move(swap_io), &forward_->kv_memory(),
          [this](ContextState& ctx, std::span<const int32_t> tokens, std::span<const int32_t> positions,
                 int n_valid, const Forward::LayerHook& hook) {
            // With the context's own adapter (a chunk does not record a call's adapter).
            auto adapter = adapters_.find(ctx.adapter);
            if (!adapter.ok()) return adapter.status();
            std::lock_guard<FairMutex> lock(compute_mu_);
            // At the call's level: the chunks record it (KvSequence::level), and a call at a
            // larger level recomputes what smaller ones computed.
            LLMSVC_RETURN_IF_ERROR(enter_level(ctx.call_level));
            LLMSVC_RETURN_IF_ERROR(forward_->set_adapter(*adapter));
            LLMSVC_RETURN_IF_ERROR(forward_->recompute(ctx.kv, tokens, positions, n_valid, hook));
            for (size_t i = 0, j = 0; i < positions.size(); i = j) {  // runs of consecutive positions
              for (j = i + 1; j < positions.size() && positions[j] == positions[j - 1] + 1;) ++j;
              ctx.kv.note_level(positions[i], static_cast<int>(j - i), level_percent(ctx.call_level));
            }
            return Status::Ok();
          },
          [this](const std::string& msg) { warn(msg); }),
      levels_(*model_, state_.dir().get(), o.level_profile, [this](const std::string& msg) { warn(msg); }),
      weights_(*model_, *devices_.front()),
      id_rng_(std::random_device{}()) {
  stats_.weight_bytes = model_->weight_bytes();
  if (auto ids = state_.list(); ids.ok()) stats_.known_contexts = static_cast<int32_t>(ids->size());
}

EngineImpl::~EngineImpl() { flush_swap(); }

void EngineImpl::flush_swap() { kv_.flush(); }

void EngineImpl::warn(const std::string& msg) const { std::fprintf(stderr, "llmsvc: warning: %s\n", msg.c_str()); }

Result<std::shared_ptr<const ChatTemplate>> EngineImpl::tools_template(const std::string& tools) {
  {
    std::lock_guard<std::mutex> lock(tools_mu_);
    if (auto it = tool_templates_.find(tools); it != tool_templates_.end()) return it->second;
  }
  auto made = model_->chat_template().with_tools(tools);  // renders probes: outside the lock
  if (!made.ok()) return made.status();
  auto shared = std::make_shared<const ChatTemplate>(std::move(made).value());
  std::lock_guard<std::mutex> lock(tools_mu_);
  if (tool_templates_.size() < kMaxToolTemplates) tool_templates_.emplace(tools, shared);
  return shared;
}

Result<std::string> EngineImpl::create_context(const ContextOptions& options) {
  ContextOptions o = options;
  if (auto a = adapters_.find(o.adapter); !a.ok()) return a.status();
  std::shared_ptr<const ChatTemplate> tool_chat;
  if (!o.tools.empty()) {
    if (o.raw) return Status(Code::invalid_argument, "tools: a raw context has no conversation to call them from");
    auto tools = chat::normalize_tools(o.tools);
    if (!tools.ok()) return tools.status();
    o.tools = std::move(tools).value();
    if (!o.tools.empty()) {
      auto t = tools_template(o.tools);
      if (!t.ok()) return t.status();
      tool_chat = std::move(t).value();
    }
  }
  const ChatTemplate& chat = tool_chat ? *tool_chat : model_->chat_template();
  // A system prompt the context cannot hold would fail every call later: refused now
  // (tokenized before the engine's lock: a long prompt takes a while).
  // A chat context needs a template that renders its turns (a model file's template the
  // interpreter cannot run, or one that refuses this system prompt, is refused here).
  if (!o.raw) LLMSVC_RETURN_IF_ERROR(chat.usable(o.system_prompt));
  if (!o.raw && (!o.system_prompt.empty() || tool_chat)) {
    auto [before, after] = chat.user_turn_parts(o.system_prompt, true);
    const size_t opening = model_->tokenizer().encode(chat.system_prefix(o.system_prompt) + before + after, true, true).size();
    if (opening >= static_cast<size_t>(n_ctx_))
      return Status(Code::context_overflow, "the system prompt and tools take " + std::to_string(opening) +
                                                " tokens with their template, and a context holds " + std::to_string(n_ctx_));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto made = new_context_locked(o, std::move(tool_chat));
  if (!made.ok()) return made.status();
  return (*made)->id;
}

Result<ContextState*> EngineImpl::new_context_locked(const ContextOptions& o,
                                                     std::shared_ptr<const ChatTemplate> chat) {
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
  meta.tools = o.tools;
  meta.adapter = o.adapter;
  meta.chunk_tokens = kv_.store().geometry().chunk_tokens;
  meta.created_unix = static_cast<int64_t>(::time(nullptr));
  Status s = log.ok() ? persist::write_context_meta(root, persist::layout::meta(id), meta) : log.status();
  if (s.ok()) s = root.sync(fileio::parent_directory(dir));  // contexts/ or its scope
  if (!s.ok()) {
    (void)root.remove_tree(dir);
    return s;
  }
  auto ctx = std::make_unique<ContextState>(id, kv_.store());
  ctx->raw = o.raw;
  ctx->system_prompt = o.system_prompt;
  ctx->tools = o.tools;
  ctx->adapter = o.adapter;
  ctx->chat = std::move(chat);
  ctx->log = std::move(log).value();
  ctx->keeps_messages = !o.raw && ctx->log->keeps_messages();
  kv_.attach(*ctx, /*from_storage=*/false);
  ContextState* made = ctx.get();
  contexts_.emplace(id, std::move(ctx));
  stats_.known_contexts++;
  return made;
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
  std::shared_ptr<const ChatTemplate> tool_chat;
  if (!meta->tools.empty()) {  // the file is untrusted: checked as an app's tools are
    auto tools = chat::normalize_tools(meta->tools);
    if (!tools.ok() || *tools != meta->tools)
      return Status(Code::io, persist::layout::meta(id) + ": bad 'tools'" +
                                  (tools.ok() ? std::string() : ": " + tools.status().message()));
    auto t = tools_template(meta->tools);
    if (!t.ok()) return t.status();
    tool_chat = std::move(t).value();
  }
  auto ctx = std::make_unique<ContextState>(std::string(id), kv_.store());
  ctx->raw = meta->raw;
  ctx->system_prompt = meta->system_prompt;
  ctx->tools = meta->tools;
  ctx->adapter = meta->adapter;  // checked by parse_context_meta; whether it is offered, by each call
  ctx->chat = std::move(tool_chat);
  ctx->tokens = std::move(hist.tokens);
  ctx->turns = ctx->persisted_turns = hist.turns;
  ctx->n_persisted = ctx->tokens.size();
  ctx->keeps_messages = !meta->raw && hist.keeps_messages;
  ctx->messages = std::move(hist.messages);
  ctx->n_persisted_messages = ctx->messages.size();
  ctx->log = std::move(log).value();
  kv_.attach(*ctx, /*from_storage=*/true);
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
  contexts_.erase(it);  // (its swap store and write-back end with it, before the count moves)
  kv_.released(key, files);
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
  kv_.deleted(std::string(id));
  held.reset();
  stats_.known_contexts = std::max(0, stats_.known_contexts - 1);
  return root().remove_tree(persist::layout::context_dir(id));
}

Result<std::string> EngineImpl::fork_context(std::string_view parent_id, std::string_view child_id) {
  auto entered = enter(parent_id);
  if (!entered.ok()) return entered.status();
  ContextState* parent = *entered;
  kv_.store().pin(parent->kv);  // its chunks stay in memory while the child takes them
  BusyGuard guard{mu_, *parent, kv_.store()};
  if (!parent->raw) LLMSVC_RETURN_IF_ERROR(check_keeps_messages(*parent));
  ContextOptions o;
  o.id = std::string(child_id);
  o.raw = parent->raw;
  o.system_prompt = parent->system_prompt;
  o.tools = parent->tools;
  o.adapter = parent->adapter;
  std::lock_guard<std::mutex> lock(mu_);
  auto made = new_context_locked(o, parent->chat);
  if (!made.ok()) return made.status();
  ContextState& child = **made;
  // The history as one record: the child is its parent's conversation so far.
  child.tokens = parent->tokens;
  child.turns = parent->turns;
  child.messages = parent->messages;
  if (Status s = child.log->append(child.tokens, child.turns, child.messages); !s.ok()) {
    const std::string id = child.id;
    contexts_.erase(id);
    kv_.deleted(id);
    stats_.known_contexts = std::max(0, stats_.known_contexts - 1);
    (void)root().remove_tree(persist::layout::context_dir(id));
    return Status(s.code(), "the fork could not be saved: " + s.message());
  }
  child.n_persisted = child.tokens.size();
  child.persisted_turns = child.turns;
  child.n_persisted_messages = child.messages.size();
  // The parent's full chunks are shared (the ones in memory; the others are recomputed at the
  // child's first call); its partial last chunk is computed again by the child.
  const int C = kv_.store().geometry().chunk_tokens;
  const int n_share = std::min(parent->kv.n_chunks(), parent->n_evaluated / C);
  if (Status s = child.kv.share_prefix(parent->kv, n_share); !s.ok()) return s;
  child.n_evaluated = n_share * C;
  return child.id;
}

Result<std::vector<std::string>> EngineImpl::list_contexts() const { return state_.list(); }

Result<std::vector<std::string>> EngineImpl::list_scope(std::string_view scope) const { return state_.list(scope); }

Result<ContextInfo> EngineImpl::context_info(std::string_view id) const {
  ContextInfo info;
  info.id = std::string(id);
  const int C = kv_.store().geometry().chunk_tokens;
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
      info.chunks_shared = n.shared;
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
  s.weight_bytes -= std::min(s.weight_bytes, weights_.released_bytes());
  kv_.add_figures(s);
  return s;
}


uint64_t EngineImpl::kv_resident_bytes_in(std::string_view scope) const {
  const std::string prefix = std::string(scope) + "/";
  std::unordered_set<const void*> seen;
  uint64_t sum = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, c] : contexts_)
    if (std::string_view(id).starts_with(prefix)) sum += c->kv.resident_bytes_once(seen);
  return sum;
}

ModelInfo EngineImpl::model_info() const {
  ModelInfo info = describe_model(*model_);
  info.ready = true;
  info.n_ctx = n_ctx_;
  // A device's kind and index ("cpu", "cpu:1", "opencl"), not its description: the C API joins
  // them with commas, which a description ("cpu (AVX3_DL, 2 threads)") may hold.
  for (std::string name : device_names()) {
    if (info.devices.size() == kMaxInfoDevices) break;
    info.devices.push_back(name.substr(0, name.find(" (")));
  }
  info.adapters = adapters_.names();
  return info;
}

Result<int> EngineImpl::call_adapter(const ContextState& ctx, const CallParams& params) const {
  auto index = adapters_.find(params.adapter.empty() ? ctx.adapter : params.adapter);
  if (!index.ok() && params.adapter.empty())
    return Status(index.status().code(), "context '" + ctx.id + "': " + index.status().message());
  return index;
}

Status EngineImpl::eval_pending(ContextState& ctx, EvalVariant variant, std::vector<float>& logits) {
  if (ctx.tokens.empty()) return Status(Code::invalid_argument, "the context is empty and the prompt adds no tokens");
  // One micro-batch per turn at the compute lock, so a long prompt lets other calls' tokens
  // through between its micro-batches. They are the micro-batches one eval of the whole
  // prompt would make, so the results are the same bits.
  const int total = static_cast<int>(ctx.tokens.size());
  while (ctx.n_evaluated < total) {
    const int n = std::min(forward_->max_batch(), total - ctx.n_evaluated);
    std::lock_guard<FairMutex> lock(compute_mu_);
    // The call's level and adapter, under the same turn: another call may have set its own since.
    LLMSVC_RETURN_IF_ERROR(enter_level(variant.level));
    LLMSVC_RETURN_IF_ERROR(forward_->set_adapter(variant.adapter));
    LLMSVC_RETURN_IF_ERROR(forward_->eval(
        ctx.kv, std::span<const int32_t>(ctx.tokens).subspan(static_cast<size_t>(ctx.n_evaluated), static_cast<size_t>(n)),
        ctx.n_evaluated, false, logits));
    ctx.kv.note_level(ctx.n_evaluated, n, level_percent(variant.level));
    ctx.n_evaluated += n;
  }
  return Status::Ok();
}

Result<ContextState*> EngineImpl::enter(std::string_view id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto loaded = load_locked(id);
  if (!loaded.ok()) return loaded.status();
  ContextState* ctx = *loaded;
  if (ctx->busy) return Status(Code::busy, "context '" + std::string(id) + "' is inside another call");
  ctx->busy = true;
  return ctx;
}

Status EngineImpl::call(std::string_view id, std::string_view prompt, const CallParams& params, const PieceFn& on_piece,
                        CallStats* out) {
  const auto t0 = SteadyClock::now();
  auto entered = enter(id);
  if (!entered.ok()) return entered.status();
  ContextState* ctx = *entered;
  kv_.store().pin(ctx->kv);  // its chunks are the working set: never evicted during the call
  BusyGuard guard{mu_, *ctx, kv_.store()};
  CallStats st;
  if (!ctx->raw) LLMSVC_RETURN_IF_ERROR(chat_of(*ctx).usable(ctx->system_prompt));
  // A conversation takes user and assistant messages in turn: a prompt after a user message
  // whose reply was never generated would open a second user turn inside the first.
  const MessageRole next = next_role(*ctx);
  if (params.reply_only) {
    if (!prompt.empty()) return Status(Code::invalid_argument, "a reply to the conversation takes no prompt");
    LLMSVC_RETURN_IF_ERROR(check_keeps_messages(*ctx));
    if (next == MessageRole::tool)
      return Status(Code::invalid_argument, "the last reply called tools: append their results (tool messages) first");
    if (next != MessageRole::assistant)
      return Status(Code::invalid_argument, "the conversation does not end with a user message: there is nothing to reply to");
  } else if (ctx->keeps_messages && next == MessageRole::tool) {
    return Status(Code::invalid_argument, "the last reply called tools: append their results (tool messages), then "
                                          "generate the reply, or truncate the conversation");
  } else if (ctx->keeps_messages && next != MessageRole::user) {
    return Status(Code::invalid_argument, "the conversation ends with a user message or tool results without its reply: "
                                          "generate the reply first, or truncate the conversation");
  }
  std::vector<int32_t> ids = params.reply_only ? std::vector<int32_t>{} : prompt_tokens(*ctx, prompt);
  // The elastic level and the prompt's compression, and a schema or grammar that does not
  // compile, fail the call before the context changes.
  policy::PromptShape shape{static_cast<int>(ids.size()), 0, static_cast<int>(ctx->tokens.size()), context_levels(*ctx)};
  std::optional<PromptWords> words;
  const bool may_compress = params.prompt_keep > 0 || (params.level_percent == 0 && params.slo_ttft_ratio > 0);
  if (may_compress && !prompt.empty()) {
    words.emplace(model_->tokenizer(), prompt);
    shape.droppable = words->droppable_tokens();
  }
  auto level = call_level(params, shape);
  if (!level.ok()) return level.status();
  std::string kept_prompt;  // the compressed prompt, which `prompt` then views
  if (words && level->keep < 1 && shape.droppable > 0) {
    kept_prompt = words->without(shape.tokens - shape.kept(level->keep));
    prompt = kept_prompt;
    ids = prompt_tokens(*ctx, prompt);
  }
  st.prompt_kept = shape.tokens > 0 ? static_cast<double>(ids.size()) / shape.tokens : 1.0;
  if (ctx->tokens.size() + ids.size() + 1 > static_cast<size_t>(n_ctx_)) {
    return Status(Code::context_overflow, "prompt of " + std::to_string(ids.size()) + " tokens does not fit: the context holds " +
                                              std::to_string(ctx->tokens.size()) + " of at most " + std::to_string(n_ctx_) + " tokens");
  }
  if (params.max_context_tokens > 0 && ctx->tokens.size() + ids.size() + 1 > static_cast<size_t>(params.max_context_tokens)) {
    return Status(Code::quota_exceeded, "prompt of " + std::to_string(ids.size()) + " tokens does not fit the quota: the context holds " +
                                            std::to_string(ctx->tokens.size()) + " of at most " +
                                            std::to_string(params.max_context_tokens) + " tokens");
  }
  auto adapter = call_adapter(*ctx, params);
  if (!adapter.ok()) return adapter.status();
  LLMSVC_RETURN_IF_ERROR(forward_->check_level_adapter(level->index, *adapter));
  auto constraint = make_constraint(params);
  if (!constraint.ok()) return constraint.status();
  st.level_percent = level->percent;
  st.slo_missed = level->slo_missed ? 1 : 0;
  st.prompt_ids = ids;
  st.prompt_tokens = static_cast<int32_t>(ids.size());
  const size_t old_size = ctx->tokens.size();
  // KV that smaller levels computed is what this level lacks: recomputed at switch-in, where
  // the SLO leaves room (else reused as it is). Nothing is recomputed at the same level or below.
  if (level->recompute)
    for (int c = 0; c < ctx->kv.n_chunks(); ++c)
      if (ctx->kv.level(c) < level->percent && ctx->kv.state(c) != policy::ChunkState::dropped) ctx->kv.drop(c);
  std::string reply;
  Status s = generate(*ctx, ids, params, EvalVariant{level->index, *adapter}, constraint->get(), on_piece, st, &reply);
  recycle_constraint(params, std::move(constraint).value());
  if (ctx->keeps_messages && ctx->tokens.size() > old_size) {  // the prompt went in: its turn and the reply
    std::lock_guard<std::mutex> lock(ctx->messages_mu);
    if (!params.reply_only)
      ctx->messages.push_back({static_cast<uint32_t>(MessageRole::user), static_cast<uint32_t>(old_size + ids.size()),
                               chat_of(*ctx).user_content(prompt)});  // as append keeps it
    if (!ctx->tools.empty()) {
      const chat::ParsedReply parsed = chat::parse_tool_calls(chat_of(*ctx).tool_format, reply);
      st.tool_calls = static_cast<int32_t>(parsed.calls.size());
      st.tool_call_errors = parsed.parse_failed ? 1 : 0;
    }
    ctx->messages.push_back({static_cast<uint32_t>(MessageRole::assistant), static_cast<uint32_t>(ctx->tokens.size()),
                             std::move(reply)});
  }
  // Compression failing (out of budget for the new form) leaves chunks as they were: the
  // call's answer stands. A chunk shared with a fork narrows for every holder: with the
  // compute turn held, no holder's evaluation is reading it.
  {
    std::unique_lock<FairMutex> turn(compute_mu_, std::defer_lock);
    if (ctx->kv.counts().shared > 0) turn.lock();
    (void)kv_.compress(*ctx);
  }
  if (Status p = persist(*ctx); !p.ok()) {
    s = p;
    st.generated_ids.clear();
    st.generated_tokens = 0;
  } else {
    kv_.swap_out(*ctx, st);  // ahead of time: evicting these chunks later costs nothing
  }
  st.context_tokens = static_cast<int32_t>(ctx->tokens.size());
  st.ttft_ms = st.generated_tokens > 0 ? st.ttft_ms : ms_since(t0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.calls++;
    add_call_figures(stats_, st);
  }
  if (out) *out = std::move(st);
  return s;
}

Status EngineImpl::persist(ContextState& ctx) {
  if (ctx.tokens.size() < ctx.n_persisted) return Status(Code::internal, "engine: history shrank below what is persisted");
  if (ctx.tokens.size() == ctx.n_persisted && ctx.turns == ctx.persisted_turns &&
      ctx.messages.size() == ctx.n_persisted_messages)
    return Status::Ok();
  const std::span<const int32_t> fresh = std::span<const int32_t>(ctx.tokens).subspan(ctx.n_persisted);
  Status s = ctx.log->append(fresh, ctx.turns,
                             std::span<const persist::LoggedMessage>(ctx.messages).subspan(ctx.n_persisted_messages));
  if (!s.ok()) {
    // Not durable, so not acknowledged: the context goes back to what storage holds.
    {
      std::lock_guard<std::mutex> lock(ctx.messages_mu);
      ctx.messages.resize(ctx.n_persisted_messages);
    }
    ctx.tokens.resize(ctx.n_persisted);
    ctx.turns = ctx.persisted_turns;
    ctx.n_evaluated = std::min(ctx.n_evaluated, static_cast<int>(ctx.n_persisted));
    ctx.n_evaluated = ctx.kv.truncate(ctx.n_evaluated);
    return Status(s.code(), "the turn could not be saved, so it was not kept: " + s.message());
  }
  ctx.n_persisted = ctx.tokens.size();
  ctx.persisted_turns = ctx.turns;
  ctx.n_persisted_messages = ctx.messages.size();
  return Status::Ok();
}

Status EngineImpl::generate(ContextState& ctx, const std::vector<int32_t>& prompt, const CallParams& params,
                            EvalVariant variant, constrain::Constraint* constraint, const PieceFn& on_piece, CallStats& st,
                            std::string* reply) {
  const auto t0 = SteadyClock::now();
  const Tokenizer& tok = model_->tokenizer();
  const size_t old_size = ctx.tokens.size();
  const int old_evaluated = ctx.n_evaluated;
  ctx.tokens.insert(ctx.tokens.end(), prompt.begin(), prompt.end());

  // Everything evaluated already (an empty prompt after a prefill-only call): the last
  // position is evaluated again for its logits. Its chunk is kept only where it can take the
  // row again (truncate: resident f16, not shared with a fork), else computed again whole.
  if (!ctx.tokens.empty() && ctx.n_evaluated == static_cast<int>(ctx.tokens.size()))
    ctx.n_evaluated = ctx.kv.truncate(ctx.n_evaluated - 1);
  // Switch-in: bring the context's KV back into memory (what it recomputes, at the call's
  // level), then room for the new tokens.
  ctx.call_level = variant.level;
  Status s = kv_.switch_in(ctx, st);
  if (s.ok()) s = ctx.kv.reserve(static_cast<int>(ctx.tokens.size()));
  st.switch_in_ms = ms_since(t0);
  std::vector<float> logits;
  const auto t_prefill = SteadyClock::now();
  if (s.ok()) s = eval_pending(ctx, variant, logits);
  st.prefill_ms = ms_since(t_prefill);
  if (!s.ok()) {
    // A failed prompt leaves the context exactly as it was.
    ctx.tokens.resize(old_size);
    ctx.n_evaluated = std::min(old_evaluated, static_cast<int>(old_size));
    ctx.n_evaluated = ctx.kv.truncate(ctx.n_evaluated);
    return s;
  }
  if (!ctx.raw && !params.reply_only) ctx.turns++;

  Sampler sampler(params.sampling);
  Utf8Streamer utf8;
  StopMatcher stops(constraint ? std::vector<std::string>{} : params.stop);  // a constrained reply ends itself
  SteadyClock::duration constrain_time{};
  bool cancelled = false;
  TokenTrail trail(params.on_tokens && params.logprobs);  // the ids behind the next piece
  std::vector<float> model_logits;  // before the sampler's penalty, for log-probabilities
  auto emit = [&](const std::string& text, int32_t token) {
    if (text.empty() || cancelled) return;
    reply->append(text);  // what the app received is the reply the conversation keeps
    if (on_piece && !on_piece(text, token)) cancelled = true;
    if (!cancelled && params.on_tokens && !params.on_tokens(trail.take(text, token))) cancelled = true;
  };
  SteadyClock::time_point t_first{};
  FinishReason finish = FinishReason::none;
  while (st.generated_tokens < params.max_tokens) {
    if (params.cancel && params.cancel->load(std::memory_order_relaxed)) cancelled = true;
    if (cancelled) break;
    if (trail.wants_logprobs()) model_logits.assign(logits.begin(), logits.end());
    if (constraint) {
      // The tokens left: the call's and the context's; near the end only those after which
      // the text can still be completed in time are allowed.
      size_t room = static_cast<size_t>(n_ctx_) - ctx.tokens.size();
      if (params.max_context_tokens > 0)
        room = std::min(room, static_cast<size_t>(std::max<int64_t>(0, params.max_context_tokens - static_cast<int64_t>(ctx.tokens.size()))));
      const auto tc = SteadyClock::now();
      constraint->set_budget(static_cast<int>(std::min<size_t>(room, static_cast<size_t>(params.max_tokens - st.generated_tokens))));
      constraint->apply(logits);
      constrain_time += SteadyClock::now() - tc;
    }
    const int32_t t = sampler.sample(logits, ctx.tokens);  // it looks back repeat_last_n itself
    if (constraint) {
      const auto tc = SteadyClock::now();
      s = constraint->accept(t);
      constrain_time += SteadyClock::now() - tc;
      if (!s.ok()) {
        s = Status(Code::internal, "structured output: the sampler chose token " + std::to_string(t) +
                                       ", which the constraint does not allow: " + s.message());
        break;
      }
    }
    trail.add(t, trail.wants_logprobs() ? token_logprob(model_logits, t) : 0.0f);
    if (st.generated_tokens == 0) {
      t_first = SteadyClock::now();
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
    s = eval_pending(ctx, variant, logits);
    if (!s.ok()) break;  // the tokens so far stay; the caller learns why generation stopped
  }
  if (!stops.matched()) emit(stops.push(utf8.flush()), -1);
  emit(stops.flush(), -1);
  // The tokens whose text never streamed (the end of turn, a stop string's) end the stream of
  // ids, so that its pieces hold every generated token.
  if (!cancelled && params.on_tokens && !trail.empty() && !params.on_tokens(trail.take("", -1))) cancelled = true;
  if (cancelled) finish = FinishReason::cancelled;
  if (params.max_tokens == 0) finish = FinishReason::length;

  // Close the assistant turn in the history (evaluated with the next prompt).
  if (!ctx.raw) {
    std::vector<int32_t> end = tok.encode(chat_of(ctx).assistant_end(), false, true);
    size_t skip = (finish == FinishReason::eos && !end.empty() && !st.generated_ids.empty() &&
                   st.generated_ids.back() == end.front()) ? 1 : 0;
    if (finish == FinishReason::eos && skip == 0 && !st.generated_ids.empty()) {
      ctx.tokens.pop_back();  // another end-of-generation token: replace it by the template's
    }
    ctx.tokens.insert(ctx.tokens.end(), end.begin() + static_cast<std::ptrdiff_t>(skip), end.end());
  }
  st.finish = finish;
  st.constrain_ms = std::chrono::duration<double, std::milli>(constrain_time).count();
  if (st.generated_tokens > 0) {
    st.decode_ms = ms_since(t_first);
    st.tpot_ms = st.generated_tokens > 1 ? st.decode_ms / (st.generated_tokens - 1) : 0.0;
  }
  if (!s.ok()) return s;
  if (cancelled) return Status(Code::cancelled, "call cancelled");
  return Status::Ok();
}

}  // namespace llmsvc
