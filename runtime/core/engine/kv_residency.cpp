// SPDX-License-Identifier: Apache-2.0
// KvResidency: the chunk store, swap files and the switch-in / swap-out moves.
#include "runtime/core/engine/kv_residency.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "base/clock.h"
#include "policy/compression/context_compression.h"
#include "policy/planning/switch_planner.h"
#include "policy/swap/kv_swap.h"
#include "policy/swap/layer_loader.h"
#include "runtime/core/persist/chunk_table.h"

namespace llmsvc {
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

KvResidency::KvResidency(const Model& model, const EngineOptions& o, const persist::StateDir& state,
                         std::unique_ptr<policy::SwapIo> swap_io, hal::MemoryPool* kv_memory, Recompute recompute,
                         Warn warn)
    : model_(model),
      state_(state),
      store_(policy::KvGeometry{model.config().n_layer, model.config().n_head_kv, model.config().head_dim,
                                o.chunk_tokens > 0 ? o.chunk_tokens : 16},
             o.kv_budget_bytes, eviction_order(o.eviction), kv_memory),
      kv_ratio_(o.kv_ratio),
      kv_share_bytes_(share_bytes(o.kv_share, o.kv_budget_bytes)),
      aot_swap_out_(o.aot_swap_out),
      swap_chunks_(o.kv_swap),
      pipeline_(o.swap_recompute_pipeline),
      recompute_(std::move(recompute)),
      warn_(std::move(warn)),
      swap_io_(std::move(swap_io)),
      disk_quotas_(o.swap_bytes, o.swap_bytes_by_scope, [this](const std::string& id) { return stored_swap_bytes(id); },
                   [this](std::string_view scope) {
                     std::vector<std::string> ids;
                     if (auto names = state_.list(scope); names.ok())
                       for (std::string& n : *names) ids.push_back(std::string(scope) + "/" + n);
                     return ids;
                   }) {
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
}

KvResidency::~KvResidency() { flush(); }

void KvResidency::flush() {
  if (swap_io_) swap_io_->flush();
}

void KvResidency::attach(ContextState& ctx, bool from_storage) {
  assign_share(ctx);
  open_swap(ctx);
  if (from_storage) restore_chunks(ctx);  // the next call loads the good files and recomputes the rest
}

void KvResidency::released(const std::string& id, uint64_t files) {
  if (files > 0) disk_quotas_.detach(id, files);  // dormant: counted until it loads again
}

void KvResidency::deleted(const std::string& id) { disk_quotas_.forget(id); }

void KvResidency::add_figures(EngineStats& s) const {
  s.kv_bytes = store_.used_bytes();
  s.kv_peak_bytes = store_.peak_bytes();
  s.kv_evictions = store_.evictions();
  s.swap_out_chunks = swap_out_chunks_.load();
  s.swap_out_bytes = swap_out_bytes_.load();
  s.swap_out_failures = swap_out_failures_.load();
  s.swap_out_deferred = swap_out_deferred_.load();
}

void KvResidency::assign_share(ContextState& ctx) {
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

void KvResidency::open_swap(ContextState& ctx) {
  if (!swap_io_ || !swap_chunks_) return;
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
    const Status s = policy::store_chunk_now(c->kv, *c->swap, model_.content_hash(), c->tokens, c->n_evaluated, chunk);
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

uint64_t KvResidency::stored_swap_bytes(const std::string& id) const {
  const fileio::SafeDir& root = this->root();
  const std::string dir = persist::layout::chunks_dir(id);
  auto names = root.list(dir);
  if (!names.ok()) return 0;
  uint64_t bytes = 0;
  for (const std::string& n : *names)
    if (auto st = root.stat(dir + "/" + n); st.ok() && S_ISREG(st->st_mode)) bytes += static_cast<uint64_t>(st->st_size);
  return bytes;
}

Status KvResidency::switch_in(ContextState& ctx, CallStats& st) {
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
  const policy::SwitchPlan plan = switch_cost_ && pipeline_ ? policy::plan_switch_in(missing, model_.config().n_layer, ctx.n_evaluated, *switch_cost_)
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
  const uint64_t model_hash = model_.content_hash();
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
    Forward::LayerHook hook;
    if (overlap) hook = [overlap](int layer) { return overlap->before_layer(layer); };
    LLMSVC_RETURN_IF_ERROR(recompute_(ctx, toks, pos, ctx.n_evaluated, hook));
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

void KvResidency::swap_out(ContextState& ctx, CallStats& st) {
  if (!swap_io_) return;
  const auto t0 = SteadyClock::now();
  // Without ahead-of-time swap-out, chunks are written only when evicted; without swap (no
  // swap space for the context, or KV where the host cannot read it) never. The table still
  // follows every call: a restart then knows what was evaluated and recomputes it at switch-in.
  auto queued = !aot_swap_out_ || !ctx.swap ? Result<policy::SwapOutQueued>(policy::SwapOutQueued{}) : policy::store_changed_chunks(
      ctx.kv, *ctx.swap, model_.content_hash(), ctx.tokens, ctx.n_evaluated,
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
  table.model_hash = model_.content_hash();
  table.n_evaluated = ctx.n_evaluated;
  const int n = std::min(ctx.kv.n_chunks(), (ctx.n_evaluated + table.chunk_tokens - 1) / table.chunk_tokens);
  for (int c = 0; c < n; ++c) {
    persist::ChunkTable::Entry e;
    e.format = static_cast<uint8_t>(ctx.kv.format(c));
    e.level = static_cast<uint8_t>(ctx.kv.level(c));
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

void KvResidency::restore_chunks(ContextState& ctx) {
  auto table = persist::read_chunk_table(root(), persist::layout::chunk_table(ctx.id));
  if (!table.ok()) {
    if (table.status().code() != Code::not_found)
      warn("context '" + ctx.id + "': recomputing its KV: " + table.status().message());
    return;
  }
  // A table from another model (reopened with recompute_on_model_change), another chunk size
  // or ahead of the history (it cannot be: it is written after it) is ignored.
  if (table->model_hash != model_.content_hash() || table->chunk_tokens != store_.geometry().chunk_tokens ||
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
    chunks[c].level = e.level;
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

Status KvResidency::compress(ContextState& ctx) { return policy::compress_context(ctx.kv, ctx.n_evaluated, kv_ratio_); }

}  // namespace llmsvc
