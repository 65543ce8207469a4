// SPDX-License-Identifier: Apache-2.0
// Engine: one loaded model serving many contexts: create/open/delete contexts and run calls.
//
// Thread-safe. Calls on different contexts may be issued concurrently, each holding its
// context busy. The model computes one evaluation at a time; concurrent calls take turns in
// order of arrival, one decoded token or one prompt micro-batch per turn.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "runtime/core/engine/call_types.h"
#include "runtime/core/engine/info_types.h"

namespace llmsvc {

class Tokenizer;

struct EngineOptions {
  std::string model_path;   // GGUF file
  // The devices that run the model (hal/devices/device_registry.h: "cpu", ...), comma-separated
  // in order of preference ("cpu,cpu:1"); "": the default. One that is not here:
  // Code::unsupported, listing those that are. The weights load on the first.
  std::string device;
  // How ops are placed across several devices (hal/placement.h): "" (by capability and cost),
  // "layers:N", "ops:KIND[+KIND...]".
  std::string placement;
  int n_threads = 0;        // 0: all online CPUs
  // Tokens per context; 0: the model's trained length. Memory does not grow with it: the KV
  // cache is paged in chunks under kv_budget_bytes, and attention's scratch follows the
  // length a context has reached. Past the trained length the model was never trained.
  int n_ctx = 0;
  int chunk_tokens = 16;    // KV chunk size
  uint64_t kv_budget_bytes = 0;  // all contexts' resident KV; 0: no limit
  // Tolerance-aware compression after each call: the context's full chunks get 8/4/2 bits
  // so that their average is kv_ratio * 8 bits (LLMS's global ratio); <= 0 keeps them f16.
  double kv_ratio = 0.5;
  // A per-app quota: contexts whose ids have the same scope ("uid-1000/..." as llmsvcd names
  // them) hold at most this fraction of kv_budget_bytes resident together. Past it their own
  // chunks are evicted first; a call whose own context needs more fails with
  // Code::quota_exceeded. 0, or no budget: no share.
  double kv_share = 0;
  // The same, for particular scopes ("uid-1000"), in place of kv_share (0: none for it).
  std::map<std::string, double, std::less<>> kv_share_by_scope;
  // A per-app quota on storage: the chunk swap files of a scope's contexts take at most this
  // many bytes together. A chunk that would pass it is not written (dropped, and recomputed
  // when next needed, instead of swapped); the app's calls never fail for it. 0: no limit.
  uint64_t swap_bytes = 0;
  // The same, for particular scopes, in place of swap_bytes (0: none for it).
  std::map<std::string, uint64_t, std::less<>> swap_bytes_by_scope;
  // Ahead-of-time swap-out: when a call returns, the context's chunks that changed are
  // written to its chunks/ directory, so evicting them later frees memory without losing
  // them, and switch-in (or a reopen in a new process) loads them instead of recomputing.
  // false: evicted chunks are always dropped and recomputed.
  bool kv_swap = true;
  std::string state_dir;    // persistent contexts; empty: persist::resolve_state_root's default
  // A context made with another model file: refused with Code::model_mismatch, or (when
  // set, and the vocabulary is the same) reopened with its KV recomputed from its tokens.
  bool recompute_on_model_change = false;

  // The memory policy's parts, each replaceable by what a baseline does (the trace
  // benchmark's baselines and ablations; the defaults are llmsvc's policy).
  enum class Eviction {
    lctru,          // chunks: least compressed first, least recently used within a level (LLMS)
    lru,            // chunks: least recently used context first, whatever the format
    whole_context,  // every resident chunk of the least recently used context at once
  };
  Eviction eviction = Eviction::lctru;
  // false: no ahead-of-time swap-out; a chunk without a current file is written (encoded,
  // written, made durable) when it is evicted, on the path of the call that needs the
  // memory. Only with kv_swap.
  bool aot_swap_out = true;
  // false: switch-in loads every swapped chunk and recomputes only the dropped ones, even
  // with a switch-cost profile (no swap/recompute split, no overlap).
  bool swap_recompute_pipeline = true;
  // The switch-cost profile; empty: <state root>/switch-profile.json if it exists.
  std::string switch_profile;
  // An elastic model's level profile (`llmsvc profile`); empty: <state root>/level-profile.json
  // if it exists and is this model's. Without one, levels' costs are estimated from weight bytes.
  std::string level_profile;
  // LoRA adapters the engine offers, by name (1..64 bytes of [A-Za-z0-9._-], each once) and
  // GGUF path (llama.cpp's adapter format, made for this model); loaded at creation, a bad one
  // failing it with the name. Contexts and calls choose one by name
  // (ContextOptions::adapter, CallParams::adapter).
  std::vector<std::pair<std::string, std::string>> adapters;
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineOptions& options);
  virtual ~Engine() = default;

  // Creates a context; returns its id. Code::exists if the id is taken.
  virtual Result<std::string> create_context(const ContextOptions& options) = 0;
  // Makes a context ready for calls, loading it from storage if needed. Code::not_found for
  // an unknown id, busy if another process holds it, model_mismatch (see EngineOptions).
  virtual Status open_context(std::string_view id) = 0;
  // The caller holds it open no more: if it is loaded and not inside a call it leaves this
  // engine (its queued chunk writes finish first, its memory is freed, its history file
  // unlocked), so another process may open or delete it; the next open loads it again.
  // Embedded bindings release on the last handle's close; llmsvcd keeps contexts loaded.
  virtual void release_context(std::string_view id) = 0;
  // Deletes the context and its files. Code::busy while inside a call; not_found if unknown.
  virtual Status delete_context(std::string_view id) = 0;
  // Forks context `parent` into a new one, `child_id` named as create_context names it ("" or
  // "<scope>/": a fresh id): the same mode, system prompt, tokens and messages, durable when
  // it returns. Its KV shares the parent's full chunks that are in memory (their bytes count
  // once; each lives while either context holds it); the rest is computed at its first call.
  // busy while the parent is inside a call; unsupported for a chat context that keeps no
  // messages (history format 1); exists / invalid_argument for the id as create_context.
  virtual Result<std::string> fork_context(std::string_view parent, std::string_view child_id) = 0;
  // Every context on storage, by id (those without a scope).
  virtual Result<std::vector<std::string>> list_contexts() const = 0;
  // Scopes (llmsvcd: one per app). Every method that takes an id also takes a key
  // "<scope>/<id>": a context in that scope, stored under <state root>/contexts/<scope>/ (0700).
  // The ids of the contexts in `scope`, without the prefix.
  virtual Result<std::vector<std::string>> list_scope(std::string_view scope) const = 0;
  virtual Result<ContextInfo> context_info(std::string_view id) const = 0;
  // Appends `prompt` (as a user turn unless raw; nothing with params.reply_only) and generates. Code::busy if the context
  // is in another call; cancelled when the callback or the cancel flag stops it (what was
  // generated stays in the context); context_overflow when the prompt cannot fit. Whatever
  // the context holds when call() returns is on storage already; if it cannot be written
  // (Code::io: disk full, ...) the call's tokens are taken back and the context is as it was.
  virtual Status call(std::string_view id, std::string_view prompt, const CallParams& params, const PieceFn& on_piece,
                      CallStats* stats) = 0;

  // Messages (chat contexts). A context's conversation is its user and assistant messages in
  // turn, from a user message; the system prompt is the context's own (ContextOptions). Every
  // llmsvc call adds its user message and the reply. Contexts made before messages were kept
  // (history format 1) have none: these fail with Code::unsupported, as raw contexts do.
  //
  // Appends messages to the conversation without generating (an app seeds it from its own
  // data); the next call evaluates them. They continue the turn order (invalid_argument
  // otherwise; a system message: invalid_argument, the system prompt is set at creation).
  // Tool messages (a context with tools, ContextOptions::tools) answer a reply that called
  // tools, all of that reply's results in one append; the reply after them is generated. context_overflow / quota_exceeded (max_context_tokens > 0)
  // when they do not fit; busy inside a call. Durable when it returns, or not appended (io).
  virtual Status append_messages(std::string_view id, std::span<const ChatMessage> messages,
                                 int32_t max_context_tokens) = 0;
  // Rewinds the conversation to its first n messages: the tokens after them are dropped, the
  // KV before them kept. invalid_argument when it has fewer.
  virtual Status truncate_messages(std::string_view id, size_t n) = 0;
  // The conversation's messages [first, first + max) (open or only on storage), their contents
  // as the chat template holds them (stripped of surrounding whitespace where it strips).
  virtual Result<std::vector<ChatMessage>> messages(std::string_view id, size_t first, size_t max) const = 0;

  // The model, where it runs and this engine's n_ctx (ready: always, once created).
  virtual ModelInfo model_info() const = 0;
  // The tokens `text` adds as a prompt of a context of the kind `params` describes, template
  // included, as call() tokenizes it (the user's text never parsed for special tokens).
  virtual std::vector<int32_t> prompt_ids(std::string_view text, const CountParams& params) const = 0;
  // The tokens params.messages add, as append_messages adds them (first_turn: to a new chat
  // context with params.system_prompt; else after an assistant message). Its errors.
  virtual Result<std::vector<int32_t>> message_ids(const CountParams& params) const = 0;

  virtual EngineStats stats() const = 0;
  // The bytes of resident KV the loaded contexts in `scope` hold, a chunk shared by forks
  // counted once (llmsvcd's per-app kv_bytes; ContextInfo.kv_resident_bytes counts it in each).
  virtual uint64_t kv_resident_bytes_in(std::string_view scope) const = 0;
  // Waits until every swap write queued so far is durable or has failed (tests, benchmarks).
  virtual void flush_swap() = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  // The longest token text of the model's vocabulary, in bytes (what bounds a context's messages).
  virtual size_t max_piece_bytes() const = 0;
  virtual int n_ctx() const = 0;
  virtual const std::string& state_root() const = 0;
  // The devices that run the model, in the embedder's order, by their names (hal::Device::name).
  virtual std::vector<std::string> device_names() const = 0;
  // Whether a device's driver needs ioctl while the model runs (hal::Capabilities::driver_ioctl).
  virtual bool devices_need_ioctl() const = 0;
  // Memory pressure: an elastic model gives back the weight rows that only levels above the
  // smallest read (WeightResidency; anchor layers stay, pinned) and returns the bytes. A call at
  // a larger level takes back what it reads as it starts, priced into its SLO's TTFT. While a
  // call computes, the release waits for its next turn at the compute lock (above that call's
  // level) and this answers 0.
  virtual uint64_t trim_weights() = 0;
};

}  // namespace llmsvc
