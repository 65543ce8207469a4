// SPDX-License-Identifier: Apache-2.0
/*
 * llmsvc.h — the stable C API of llmsvc, the on-device LLM system service.
 *
 * One API, two transports: a service handle is either embedded (the engine runs
 * inside the calling process) or bound to the llmsvcd daemon. Apps open
 * persistent contexts and call the model with prompts; replies stream back as
 * UTF-8 pieces.
 *
 * Rules every function follows:
 *  - every fallible function returns an llmsvc_status and writes results only
 *    through its `out` parameters (left untouched on failure);
 *  - option and result structs start with `size_t struct_size`; initialise them
 *    with their `_init()` function so fields can be added without breaking old
 *    callers. A struct_size smaller than the first version of a struct is
 *    refused with LLMSVC_ERR_INVALID_ARGUMENT; a larger one is accepted and the
 *    unknown tail ignored (results: left untouched);
 *  - strings are UTF-8 and validated; lengths are in bytes;
 *  - llmsvc_last_error() gives a human-readable detail of the calling thread's
 *    last failure. Every fallible function clears it first, so after a success
 *    it is "";
 *  - no C++ exception ever leaves a function: an allocation failure inside is
 *    LLMSVC_ERR_OUT_OF_MEMORY.
 *
 * Thread safety:
 *  - llmsvc_bind, llmsvc_unbind: call unbind only after every context of the
 *    service is closed and no call is running.
 *  - A service handle may be used from several threads at once.
 *  - A context handle is used by one thread at a time; calls on different
 *    contexts may run concurrently (they are serialised inside the engine).
 *  - llmsvc_context_cancel may be called from any thread at any time while the
 *    context handle is open.
 */
#ifndef LLMSVC_LLMSVC_H
#define LLMSVC_LLMSVC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LLMSVC_API __attribute__((visibility("default")))
#else
#define LLMSVC_API
#endif

/** Version of this header; compare with llmsvc_abi_version() at run time. */
#define LLMSVC_ABI_VERSION_MAJOR 1
#define LLMSVC_ABI_VERSION_MINOR 7
#define LLMSVC_ABI_VERSION ((LLMSVC_ABI_VERSION_MAJOR << 16) | LLMSVC_ABI_VERSION_MINOR)

/** Status codes. Values are part of the ABI and never change meaning. */
typedef enum llmsvc_status {
  LLMSVC_OK = 0,
  LLMSVC_ERR_INVALID_ARGUMENT = 1, /* NULL handle/pointer, bad struct_size, bad option value */
  LLMSVC_ERR_INVALID_UTF8 = 2,     /* a string argument is not valid UTF-8 */
  LLMSVC_ERR_MODEL_NOT_FOUND = 3,  /* the model file does not exist or cannot be opened */
  LLMSVC_ERR_MODEL_INVALID = 4,    /* the model file is malformed */
  LLMSVC_ERR_UNSUPPORTED = 5,      /* valid, but an architecture/type/feature we do not support */
  LLMSVC_ERR_OUT_OF_MEMORY = 6,
  LLMSVC_ERR_CONTEXT_OVERFLOW = 7, /* prompt (plus history) longer than the context allows */
  LLMSVC_ERR_NOT_FOUND = 8,        /* unknown context id */
  LLMSVC_ERR_EXISTS = 9,           /* a context with that id already exists */
  LLMSVC_ERR_CANCELLED = 10,       /* the call was cancelled (callback returned non-zero or cancel()) */
  LLMSVC_ERR_BUSY = 11,            /* the context is inside another call */
  LLMSVC_ERR_IO = 12,              /* storage error */
  LLMSVC_ERR_UNAVAILABLE = 13,     /* the service cannot be reached */
  LLMSVC_ERR_QUOTA_EXCEEDED = 14,  /* a per-app quota would be exceeded */
  LLMSVC_ERR_INTERNAL = 15,        /* a bug; the message says where */
  LLMSVC_ERR_MODEL_MISMATCH = 16   /* the context was made with another model (its state cannot be used) */
} llmsvc_status;

typedef struct llmsvc_service llmsvc_service; /* a bound service (embedded or daemon) */
typedef struct llmsvc_context llmsvc_context; /* an open persistent context */

/** ABI version of the loaded library: (major << 16) | minor. */
LLMSVC_API uint32_t llmsvc_abi_version(void);
/** Static name of a status code, e.g. "LLMSVC_ERR_NOT_FOUND". Never NULL. */
LLMSVC_API const char* llmsvc_status_name(llmsvc_status status);
/** Detail of the calling thread's last failure ("" if the last fallible call succeeded).
 *  Never NULL; valid until the next llmsvc_ call on this thread. */
LLMSVC_API const char* llmsvc_last_error(void);

/* ---------------------------------------------------------------- bind */

typedef struct llmsvc_bind_options {
  size_t struct_size;
  /** "embedded" or "unix:PATH" (the llmsvcd daemon listening on the Unix socket PATH, e.g.
   *  "unix:/run/llmsvc/llmsvc.sock"). NULL or "": $LLMSVC_TARGET, else embedded.
   *  unix: bind connects (LLMSVC_ERR_UNAVAILABLE if the daemon cannot be reached); the fields
   *  marked "Embedded" are then ignored (the daemon has its own model and state). Contexts live
   *  in the daemon, in the calling user's own namespace (ids are per uid). If the connection is
   *  lost, calls in flight fail with LLMSVC_ERR_UNAVAILABLE; the next function call reconnects
   *  and reopens the open contexts by id, so context handles survive a daemon restart. */
  const char* target;
  /** Embedded: GGUF model path. NULL: the default model in $LLMSVC_MODEL_DIR or ~/.cache/llmsvc/models
   *  (LLMSVC_ERR_MODEL_NOT_FOUND when absent; tools/scripts/fetch_model.sh fetches it). */
  const char* model_path;
  /** Embedded: worker threads; 0 = all online CPUs. */
  int32_t n_threads;
  /** Embedded: maximum tokens per context (0 = the model's trained length; llmsvc_model_info
   *  reports both). Memory does not grow with it: the KV cache is paged under kv_budget_bytes. */
  int32_t n_ctx;
  /** Embedded: tokens per KV chunk (0 = 16). */
  int32_t chunk_tokens;
  /** Embedded: where persistent contexts live. NULL: $LLMSVC_STATE_DIR, else
   *  $XDG_STATE_HOME/llmsvc, else ~/.local/state/llmsvc. Created 0700 when absent; one that
   *  belongs to another user or that its group or others can write is refused (LLMSVC_ERR_IO). */
  const char* state_dir;
  /** Embedded: non-zero reopens a context made with another model file (same vocabulary)
   *  by recomputing its state; zero (default) refuses it with LLMSVC_ERR_MODEL_MISMATCH. */
  int32_t recompute_on_model_change;
  /** Embedded: memory budget in bytes for every context's KV cache together (0: no limit).
   *  Contexts outside a call give up chunks when others need room; they come back on use. */
  uint64_t kv_budget_bytes;
  /** Embedded: KV compression after each call, as the average bits of a context's chunks over
   *  8 (chunks ranked by the attention they receive get 8, 4, 3 or 2 bits; a context under 256
   *  tokens keeps 8). 0: the default, 0.5; negative: no compression (f16); at most 1. */
  float kv_ratio;
  /** Embedded: the devices that run the model, e.g. "cpu", or several comma-separated in order
   *  of preference ("cpu,cpu:1": ops are placed by capability and cost, the weights load on the
   *  first); NULL or "": the default (the CPU). One not present here is LLMSVC_ERR_UNSUPPORTED,
   *  its detail naming the devices present. Since ABI 1.1. */
  const char* device;
  /** Embedded, since ABI 1.6: LoRA adapters the service offers, "NAME=PATH" entries separated
   *  by ';' (a NAME is 1..64 bytes of [A-Za-z0-9._-]; PATH a GGUF adapter in llama.cpp's
   *  format, made for this model). Loaded by bind: a missing or bad file, or one made for
   *  another model, fails it (the detail names the adapter). NULL or "": none. Contexts and
   *  calls choose one by name (llmsvc_context_options.adapter, llmsvc_call_options.adapter);
   *  llmsvc_adapter_list lists them. Through llmsvcd the daemon's configuration offers them. */
  const char* adapters;
} llmsvc_bind_options;

LLMSVC_API void llmsvc_bind_options_init(llmsvc_bind_options* options);
/** Bind to the service (or start the embedded engine: loads the model). `options` may be NULL for defaults.
 *  Through llmsvcd: UNAVAILABLE when no daemon answers, UNSUPPORTED without a protocol version
 *  both speak, QUOTA_EXCEEDED when the app already holds as many connections as it may. */
LLMSVC_API llmsvc_status llmsvc_bind(const llmsvc_bind_options* options, llmsvc_service** out);
/** Release a service handle. NULL is a no-op. Context handles still open stay usable and keep
 *  the engine alive until they are closed. */
LLMSVC_API void llmsvc_unbind(llmsvc_service* service);

/* ------------------------------------------------------------ contexts */

typedef struct llmsvc_context_options {
  size_t struct_size;
  /** Stable id (1..64 bytes of [A-Za-z0-9._-], not "." or ".."); NULL: a fresh id is generated. */
  const char* id;
  /** System prompt placed at the start of the context (chat mode); NULL: none / template default. */
  const char* system_prompt;
  /** Non-zero: prompts are fed as they are, without the chat template. */
  int32_t raw;
  /** Since ABI 1.4, chat contexts: the tools the conversation may call, a JSON array of
   *  OpenAI-style tools, [{"type": "function", "function": {"name", "description",
   *  "parameters"}}] (or the function objects alone), NUL-terminated; NULL or "[]": none.
   *  The model's chat template renders them into the first turn; each reply is parsed for
   *  calls in the syntax the template teaches (llmsvc_call_result.tool_calls), and the app
   *  appends each call's result as an LLMSVC_ROLE_TOOL message (all of a reply's results in
   *  one llmsvc_context_append), then generates the next reply. LLMSVC_ERR_INVALID_ARGUMENT
   *  for tools that are not such an array (at most 64 tools, 64 KiB, names of 1..64
   *  [A-Za-z0-9_.-], each once), LLMSVC_ERR_UNSUPPORTED for a model whose template renders
   *  no tools or whose call syntax the library does not parse. */
  const char* tools_json;
  /** Since ABI 1.6: the LoRA adapter every call of this context runs with, by name (one the
   *  service offers: llmsvc_adapter_list); NULL or "": none. Kept with the context (reopened,
   *  forked, after a restart). A name the service does not offer is
   *  LLMSVC_ERR_INVALID_ARGUMENT naming those it does; through a daemon older than this
   *  (protocol < 8) a name is LLMSVC_ERR_UNSUPPORTED. */
  const char* adapter;
} llmsvc_context_options;

LLMSVC_API void llmsvc_context_options_init(llmsvc_context_options* options);
/** Create a new context. `options` may be NULL. */
LLMSVC_API llmsvc_status llmsvc_context_new(llmsvc_service* service, const llmsvc_context_options* options,
                                            llmsvc_context** out);
/** Open an existing context by id. */
LLMSVC_API llmsvc_status llmsvc_context_open(llmsvc_service* service, const char* id, llmsvc_context** out);
/** Id of an open context. The string lives as long as the handle. NULL context: "". */
LLMSVC_API const char* llmsvc_context_id(const llmsvc_context* context);
/** Close a handle; the context itself persists. NULL is a no-op. */
LLMSVC_API void llmsvc_context_close(llmsvc_context* context);
/** Delete a context and its state. Fails with LLMSVC_ERR_BUSY while a handle to it is open. */
LLMSVC_API llmsvc_status llmsvc_context_delete(llmsvc_service* service, const char* id);
/** What llmsvc_context_info() reports about a context. */
typedef struct llmsvc_context_info {
  size_t struct_size;
  char id[65];                 /* NUL-terminated */
  int32_t raw;                 /* non-zero: a raw (untemplated) context */
  int32_t tokens;              /* tokens the context holds */
  int32_t turns;               /* completed user turns */
  /* KV chunks by state: resident (in memory, any format), swapped (only on storage),
   * dropped (recomputed from the tokens when needed); they add up to chunks_total. */
  int32_t chunks_total;
  int32_t chunks_resident;
  int32_t chunks_swapped;
  int32_t chunks_dropped;
  uint64_t kv_resident_bytes;
  /* Added after v1: the resident chunks by format (they add up to chunks_resident). */
  int32_t chunks_f16;
  int32_t chunks_q8;
  int32_t chunks_q4;
  int32_t chunks_q2;
  /* Added after v2: 3-bit chunks (also counted in chunks_resident). */
  int32_t chunks_q3;
  /* Added in ABI 1.4 (the padding keeps it past the end of the 1.3 struct, whose tail padding
   * an older caller's struct_size covers): resident chunks this context shares with forks of
   * it or its parent (llmsvc_context_fork); their memory counts once in
   * llmsvc_stats.kv_bytes, but in every holder's kv_resident_bytes. */
  int32_t padding_1_4;
  int32_t chunks_shared;
} llmsvc_context_info;

LLMSVC_API void llmsvc_context_info_init(llmsvc_context_info* info);
/** Describe the context `id` (open or not). */
LLMSVC_API llmsvc_status llmsvc_context_info_get(llmsvc_service* service, const char* id, llmsvc_context_info* out);
/** Called once per context id, in order; return non-zero to stop early. */
typedef int (*llmsvc_context_fn)(const char* id, void* user);
/** List the contexts the service holds for this app. */
LLMSVC_API llmsvc_status llmsvc_context_list(llmsvc_service* service, llmsvc_context_fn fn, void* user);
/**
 * Fork `parent` into a new context (since ABI 1.4): the same mode, system prompt, tokens and
 * conversation, durable when it returns, and opened into `*out`. `id` names it as
 * llmsvc_context_options.id does (NULL: a fresh id). The fork shares the parent's KV chunks
 * in memory (a shared system prompt or document costs its memory once; each chunk lives
 * while either context holds it), then each goes on alone: neither sees the other's later
 * turns, and deleting one leaves the other intact. LLMSVC_ERR_BUSY while the parent is inside
 * a call, LLMSVC_ERR_EXISTS for an id in use, LLMSVC_ERR_QUOTA_EXCEEDED past the app's
 * contexts quota (llmsvcd), LLMSVC_ERR_UNSUPPORTED for a chat context made before contexts
 * kept their messages; nothing is created then.
 */
LLMSVC_API llmsvc_status llmsvc_context_fork(llmsvc_context* parent, const char* id, llmsvc_context** out);
/** Request cancellation of the running call on `context` (no-op when idle). Thread-safe. */
LLMSVC_API llmsvc_status llmsvc_context_cancel(llmsvc_context* context);

/* ---------------------------------------------------------------- call */

/**
 * A streamed piece with its tokens (since ABI 1.2; llmsvc_call_options.on_tokens). Everything
 * it points to is valid only during the callback. The library sets struct_size to the size of
 * the struct it fills: a field a later version appends is read only when struct_size covers it.
 */
typedef struct llmsvc_piece {
  size_t struct_size;
  /** The text, as llmsvc_token_fn gets it (valid UTF-8, not NUL-terminated). Empty (len 0) only
   *  in the last piece of a call, which then carries tokens whose text never streamed (the end
   *  of turn, a stop string's). */
  const char* text;
  size_t len;
  /** Every token sampled since the previous piece, in order (n_tokens may be 0: text held back
   *  from an earlier token). Over a call, the pieces' tokens are its generated tokens. */
  const int32_t* tokens;
  size_t n_tokens;
  /** NULL unless llmsvc_call_options.logprobs: then n_tokens values, each token's natural-log
   *  probability under the model's distribution (the softmax of its logits, before repeat
   *  penalty, temperature and filters), <= 0. */
  const float* logprobs;
} llmsvc_piece;

/** Receives each llmsvc_piece; return 0 to continue, non-zero to cancel (as llmsvc_token_fn). */
typedef int (*llmsvc_piece_fn)(const llmsvc_piece* piece, void* user);

typedef struct llmsvc_call_options {
  size_t struct_size;
  uint64_t seed;            /* sampling seed; same seed + same state = same tokens */
  float temperature;        /* <= 0: greedy (default 0) */
  int32_t top_k;            /* 0: off */
  float top_p;              /* in [0, 1]; 1: off */
  float min_p;              /* in [0, 1]; 0: off */
  float repeat_penalty;     /* > 0; 1: off */
  int32_t repeat_last_n;    /* tokens looked back for the penalty (default 64; 0: off; -1: the whole context) */
  int32_t max_tokens;       /* generated tokens at most (default 256; 0 = prefill only) */
  const char* const* stop;  /* stop strings (UTF-8, 1..256 bytes), `n_stop` (<= 16) of them; not part of the output */
  size_t n_stop;
  /* SLO: requested ratios of time-to-first-token and time-per-token to the full model's (0 =
   * none). With level_percent 0, an elastic model runs the call at the largest level predicted
   * to meet both (from the level profile `llmsvc profile` measures, else from each level's
   * weight bytes); when none can, the smallest, and llmsvc_call_result.slo_missed is 1. */
  float slo_ttft_ratio;
  float slo_tpot_ratio;
  /* Since ABI 1.2: streaming with token ids. `on_tokens` (NULL: none) is called for every piece
   * with the ids of the tokens behind it (see llmsvc_piece), besides llmsvc_call's `on_piece`
   * (either may be NULL; a non-zero return from either cancels). Its pieces' ids together are
   * every token the call generated. Non-zero `logprobs`: each piece also carries the
   * log-probability of each of its tokens. Through a daemon older than this (protocol < 4) a
   * call with `on_tokens` is LLMSVC_ERR_UNSUPPORTED, before anything is sent. */
  llmsvc_piece_fn on_tokens;
  void* on_tokens_user;  /* passed to on_tokens */
  int32_t logprobs;
  /* Since ABI 1.3: structured output. A JSON Schema (`json_schema`) or a grammar in llama.cpp's
   * GBNF (`grammar`), NUL-terminated UTF-8 of at most 64 KiB, at most one of them (NULL: none):
   * every generated token is one the constraint allows, the reply ends (LLMSVC_FINISH_EOS) only
   * once its text is complete, and near max_tokens only tokens that can still complete it in
   * time are allowed. Stop strings are not applied. A schema or grammar that cannot be compiled
   * is LLMSVC_ERR_INVALID_ARGUMENT (LLMSVC_ERR_UNSUPPORTED for a schema feature not
   * implemented), the detail naming the place. Supported JSON Schema: type, properties,
   * required, additionalProperties, items, prefixItems, minItems / maxItems, enum, const,
   * anyOf / oneOf / allOf of objects, $ref / $defs, minimum / maximum (integers), minLength /
   * maxLength, pattern-free strings. */
  const char* json_schema;
  const char* grammar;
  /* Since ABI 1.5: the elastic level to run the call at, in per cent (0: the service chooses:
   * by the SLO ratios above, the full model without them). An elastic model (made by `llmsvc elastify`) has levels such as 20,
   * 30, ..., 100: each a smaller sub-model of the full one (100) that costs less time per
   * token; a plain model has one level, 100. Any other value (outside 0..100, or a level the
   * model does not have) is LLMSVC_ERR_INVALID_ARGUMENT, its detail naming the model's levels,
   * and the context is unchanged. Each call runs at its own level, whatever level concurrent
   * calls run at; llmsvc_call_result.level_percent reports it. The context remembers which level
   * computed each part of its state: a call at a larger level than earlier calls first
   * recomputes their part at its own level (with SLO ratios, only where the TTFT ratio leaves
   * room for it; else it reads that state as it is), and a call at the same or a smaller level
   * recomputes nothing. Through a daemon older than this (protocol < 7) a level other than 0 is
   * LLMSVC_ERR_UNSUPPORTED, before anything is sent. */
  int32_t level_percent;
  /** Since ABI 1.6: the LoRA adapter this call runs with in place of its context's, by name;
   *  NULL or "": the context's own. The tokens the call adds (prompt and reply) get their
   *  state from it; when the service later recomputes that state (after memory pressure) it
   *  uses the context's adapter. Errors as llmsvc_context_options.adapter. */
  const char* adapter;
  /** Since ABI 1.7: prompt compression, the share of the prompt's tokens to keep, in (0, 1].
   *  The service drops the least informative words of the prompt's text (scored by their
   *  tokens' unigram self-information, no model run) until no more than this share of the
   *  prompt's tokens (its chat template's included) remain; the template, the text's last
   *  sentence, words with a digit and line breaks always stay. The kept text is what the
   *  context holds (its user message, its tokens). 0: the service chooses: with SLO ratios and
   *  level_percent 0, the least compression that, with the level it picks, meets the TTFT
   *  ratio (at most 70 % dropped); else none. Outside [0, 1] or not finite:
   *  LLMSVC_ERR_INVALID_ARGUMENT. llmsvc_call_result.prompt_kept reports the share kept.
   *  Through a daemon older than this (protocol < 9) a value other than 0 is
   *  LLMSVC_ERR_UNSUPPORTED, before anything is sent. */
  float prompt_keep;
} llmsvc_call_options;

LLMSVC_API void llmsvc_call_options_init(llmsvc_call_options* options);

/** Why generation stopped. */
typedef enum llmsvc_finish_reason {
  LLMSVC_FINISH_NONE = 0,
  LLMSVC_FINISH_EOS = 1,       /* the model ended its turn */
  LLMSVC_FINISH_LENGTH = 2,    /* max_tokens reached */
  LLMSVC_FINISH_STOP = 3,      /* a stop string matched */
  LLMSVC_FINISH_CANCELLED = 4, /* cancelled */
  LLMSVC_FINISH_CONTEXT_FULL = 5
} llmsvc_finish_reason;

typedef struct llmsvc_call_result {
  size_t struct_size;
  int32_t prompt_tokens;     /* tokens the prompt (with template) added */
  int32_t generated_tokens;  /* tokens generated */
  int32_t context_tokens;    /* tokens in the context after the call */
  int32_t finish_reason;     /* llmsvc_finish_reason */
  double switch_in_ms;       /* time to make the context's state ready */
  double ttft_ms;            /* time to first token (includes switch-in and prefill) */
  double prefill_ms;         /* prompt processing */
  double decode_ms;          /* generation after the first token */
  double tpot_ms;            /* mean time per output token after the first */
  /* Added after v1: switch-in's KV chunks loaded from storage and recomputed from tokens. */
  int32_t chunks_loaded;
  int32_t chunks_recomputed;
  /* Since ABI 1.3: structured output's own time (allowed tokens, the matcher's steps). */
  double constrain_ms;
  /* Since ABI 1.4, a context with tools (llmsvc_context_options.tools_json): the tool calls
   * parsed from the reply (read them with llmsvc_context_messages: the reply's message carries
   * them), and 1 when the reply started a call that did not parse (it stays text). */
  int32_t tool_calls;
  int32_t tool_call_errors;
  /* Since ABI 1.5: the elastic level the call ran at, in per cent (100: the full model; see
   * llmsvc_call_options.level_percent); 0 through a daemon older than this (protocol < 7). */
  int32_t level_percent;
  /* Since ABI 1.5: 1 when the call's SLO ratios asked more than any level is predicted to give
   * (the smallest level ran, or the full model where the device runs no other), else 0. */
  int32_t slo_missed;
  /* Since ABI 1.7: the share of the prompt's tokens the call kept after prompt compression
   * (llmsvc_call_options.prompt_keep; 1: none dropped); 0 through a daemon older than this
   * (protocol < 9). */
  double prompt_kept;
} llmsvc_call_result;

LLMSVC_API void llmsvc_call_result_init(llmsvc_call_result* result);

/**
 * Streamed output: one call per piece of valid UTF-8 text (never splits a code
 * point; `piece` is not NUL-terminated). `token` is the last token the piece
 * completes. Return 0 to continue, non-zero to cancel the call: it is not called
 * again for this call. (Through llmsvcd, tokens the daemon generated before the
 * cancel reached it stay in the context; the result's generated_tokens counts them.)
 */
typedef int (*llmsvc_token_fn)(const char* piece, size_t len, int32_t token, void* user);

/**
 * Append `prompt` to the context (as a user turn unless the context is raw) and
 * generate a reply. `options`, `on_piece` and `out` may be NULL; `prompt` may be
 * NULL when `len` is 0. On cancel the call returns LLMSVC_ERR_CANCELLED, what
 * was generated until then stays in the context, and `out` is filled (the one
 * failure that writes it).
 */
LLMSVC_API llmsvc_status llmsvc_call(llmsvc_context* context, const char* prompt, size_t len,
                                     const llmsvc_call_options* options, llmsvc_token_fn on_piece, void* user,
                                     llmsvc_call_result* out);

/* --------------------------------------------------------------- stats */

typedef struct llmsvc_stats {
  size_t struct_size;
  int32_t open_contexts;      /* context handles open on this service */
  int32_t known_contexts;     /* contexts the service holds (open or not) */
  uint64_t calls;             /* calls completed (any status) */
  uint64_t prompt_tokens;     /* prompt tokens processed, all calls */
  uint64_t generated_tokens;  /* tokens generated, all calls */
  uint64_t kv_bytes;          /* bytes of resident KV cache */
  uint64_t weight_bytes;      /* bytes of model weights held (less the rows of an elastic model's
                               * larger levels that memory pressure gave back, until a call
                               * at such a level takes them back) */
  /* Added after v1. Through llmsvcd, kv_peak_bytes and the swap_out_ figures are the daemon's
   * as a whole (one KV budget and one swap writer serve every app); the others are the calling
   * app's. A daemon older than these fields reports them as 0. */
  uint64_t kv_peak_bytes;      /* the most resident KV cache held at once */
  uint64_t chunks_loaded;      /* KV chunks loaded from storage at switch-in, all calls */
  uint64_t chunks_recomputed;  /* KV chunks recomputed from their tokens at switch-in */
  uint64_t swap_out_bytes;     /* bytes of KV chunk files written */
  uint64_t swap_out_failures;  /* chunk writes that failed (disk full...; nothing is lost) */
} llmsvc_stats;

LLMSVC_API void llmsvc_stats_init(llmsvc_stats* stats);
LLMSVC_API llmsvc_status llmsvc_get_stats(llmsvc_service* service, llmsvc_stats* out);

/* ------------------------------------------------------ model and service (since ABI 1.2) */

#define LLMSVC_MAX_WEIGHT_TYPES 8

/** The tensors of one weight type in the model file. */
typedef struct llmsvc_weight_type {
  char name[16];     /* GGUF type name, e.g. "Q4_1", "F32"; NUL-terminated */
  int32_t tensors;   /* tensors of this type */
  uint64_t bytes;    /* their bytes in the file */
} llmsvc_weight_type;

/** A special token: its id (-1: the model has none) and its text, e.g. "<|im_end|>". */
typedef struct llmsvc_special_token {
  int32_t id;
  char text[257];    /* NUL-terminated; cut at 256 bytes on a code point boundary */
} llmsvc_special_token;

/** What llmsvc_model_info_get() reports: the service's model and whether it is ready. Strings
 *  are NUL-terminated UTF-8, cut on a code point boundary where longer than their room. */
typedef struct llmsvc_model_info {
  size_t struct_size;
  int32_t ready;              /* non-zero: a model is loaded and calls are served */
  char architecture[65];      /* GGUF general.architecture, e.g. "llama" */
  char name[257];             /* GGUF general.name ("" when the file has none) */
  uint64_t n_params;          /* parameters: elements of every tensor in the file */
  int32_t n_ctx_train;        /* the context length the model was trained with */
  int32_t n_ctx;              /* tokens one context holds on this service (the n_ctx in effect) */
  int32_t n_vocab;            /* vocabulary size */
  int32_t n_layer;
  int32_t n_embd;
  int32_t n_head;
  int32_t n_head_kv;
  uint64_t weight_bytes;      /* bytes of every tensor in the file */
  /* The weight types, by bytes, the dominant one first; n_weight_types of them are set. */
  int32_t n_weight_types;
  llmsvc_weight_type weight_types[LLMSVC_MAX_WEIGHT_TYPES];
  int32_t has_chat_template;  /* non-zero: the file has tokenizer.chat_template */
  llmsvc_special_token bos;   /* beginning of sequence */
  llmsvc_special_token eos;   /* end of sequence */
  llmsvc_special_token eot;   /* end of turn (<|im_end|>, <|eot_id|>, <end_of_turn>) */
  /* The devices the model runs on, their kinds comma-separated in order of preference, e.g.
   * "cpu" or "opencl,cpu" (the weights load on the first). */
  char devices[256];
} llmsvc_model_info;

LLMSVC_API void llmsvc_model_info_init(llmsvc_model_info* info);
/** Describe the service's model (embedded: the one bind loaded; through llmsvcd: the daemon's).
 *  This is also the readiness query: OK with `ready` set means calls are served now; a daemon
 *  that cannot be reached is LLMSVC_ERR_UNAVAILABLE, one older than this function (protocol
 *  < 4) LLMSVC_ERR_UNSUPPORTED. Thread-safe. */
LLMSVC_API llmsvc_status llmsvc_model_info_get(llmsvc_service* service, llmsvc_model_info* out);

/** Called once per name, in order; return non-zero to stop early. */
typedef int (*llmsvc_name_fn)(const char* name, void* user);
/** The LoRA adapters the service offers, by name, in the order they were given (since ABI
 *  1.6; embedded: llmsvc_bind_options.adapters; through llmsvcd: its configuration's). A
 *  daemon older than this (protocol < 8) is LLMSVC_ERR_UNSUPPORTED. Thread-safe. */
LLMSVC_API llmsvc_status llmsvc_adapter_list(llmsvc_service* service, llmsvc_name_fn fn, void* user);

/** How llmsvc_count_tokens() counts. */
typedef struct llmsvc_count_options {
  size_t struct_size;
  /** Non-zero: the text as a user turn of a chat context, the chat template's tokens included;
   *  zero (default): as a prompt of a raw context (special-token text such as "<|im_end|>" is
   *  parsed, as llmsvc_call does in a raw context). */
  int32_t chat;
  /** Non-zero: as the first prompt of a new context: BOS where the model adds one, and (chat)
   *  the system turn before it. The count is then what llmsvc_call_result.prompt_tokens reports
   *  for that context's first call. */
  int32_t first_turn;
  /** chat and first_turn: the context's system prompt (llmsvc_context_options.system_prompt);
   *  NULL: the template's default. */
  const char* system_prompt;
  /** NULL, or room for ids_capacity token ids: the first min(count, ids_capacity) ids are
   *  written there. */
  int32_t* ids;
  size_t ids_capacity;
  /** Since ABI 1.3 (it is declared below, with the other message functions): count these
   *  `n_messages` messages (`text` NULL, `len` 0, `chat` set) as llmsvc_context_append adds them:
   *  with first_turn, to a new context with `system_prompt`; else after an assistant message. The
   *  count is then the tokens that append stores. NULL: count the text. */
  const struct llmsvc_message* messages;
  size_t n_messages;
} llmsvc_count_options;

LLMSVC_API void llmsvc_count_options_init(llmsvc_count_options* options);
/**
 * Count the tokens `text` (UTF-8, `len` bytes; NULL when len is 0) adds as a prompt, as
 * llmsvc_call tokenizes it, into *out_count. `options` may be NULL (raw text, not the first).
 * Through llmsvcd a text longer than the daemon takes for a prompt (256 KiB by default) is
 * LLMSVC_ERR_CONTEXT_OVERFLOW, and a daemon older than this function (protocol < 4)
 * LLMSVC_ERR_UNSUPPORTED. Thread-safe.
 */
LLMSVC_API llmsvc_status llmsvc_count_tokens(llmsvc_service* service, const char* text, size_t len,
                                             const llmsvc_count_options* options, int32_t* out_count);

/* ------------------------------------------------------------- messages (since ABI 1.3) */

/*
 * A chat context holds a conversation: user and assistant messages in turn, from a user
 * message. llmsvc_call adds its prompt as a user message and its reply as an assistant message;
 * llmsvc_context_append seeds the conversation from the app's own data without generating,
 * llmsvc_context_generate replies to it, llmsvc_context_truncate rewinds it. The system prompt
 * is the context's own (llmsvc_context_options.system_prompt). The model's chat template
 * renders the messages; each message is the tokens its turn adds, so rewinding keeps the KV
 * cache of every message before the cut and appending computes only what is new.
 *
 * Raw contexts hold no messages (LLMSVC_ERR_INVALID_ARGUMENT); contexts made before ABI 1.3
 * kept none (LLMSVC_ERR_UNSUPPORTED); through a daemon older than these functions (protocol
 * < 5) they are LLMSVC_ERR_UNSUPPORTED, before anything is sent.
 */

/** A message's role. Values are part of the ABI. */
typedef enum llmsvc_role {
  LLMSVC_ROLE_SYSTEM = 0,    /* not appended: the system prompt is the context's option */
  LLMSVC_ROLE_USER = 1,
  LLMSVC_ROLE_ASSISTANT = 2,
  LLMSVC_ROLE_TOOL = 3       /* a tool's result, after a reply that called tools (since ABI 1.4) */
} llmsvc_role;

typedef struct llmsvc_message {  /* (also named by llmsvc_count_options) */
  size_t struct_size;
  int32_t role;             /* llmsvc_role */
  const char* content;      /* UTF-8, content_len bytes, not NUL-terminated; NULL when len 0 */
  size_t content_len;
  /* Since ABI 1.4, an assistant message of a context with tools: the calls its reply made, an
   * OpenAI-style JSON array [{"id", "type": "function", "function": {"name", "arguments"}}]
   * (tool_calls_len bytes, not NUL-terminated; NULL and 0 for none), its content then the
   * text around them. Read back by llmsvc_context_messages (arguments a JSON object); given to
   * llmsvc_context_append (arguments a JSON object or its text, as OpenAI sends them), the
   * reply is stored as the model's chat template writes those calls. Any other message with
   * calls, or calls in a context without tools: LLMSVC_ERR_INVALID_ARGUMENT. */
  const char* tool_calls;
  size_t tool_calls_len;
} llmsvc_message;

LLMSVC_API void llmsvc_message_init(llmsvc_message* message);

/**
 * Append `n` messages to the context's conversation without generating. They must continue
 * its turn order (after a user message comes an assistant one, and so on): otherwise, or for
 * a system message, LLMSVC_ERR_INVALID_ARGUMENT naming the message; nothing is appended then.
 * The array is stepped through by messages[0].struct_size (all elements the same size).
 * LLMSVC_ERR_CONTEXT_OVERFLOW (or QUOTA_EXCEEDED through llmsvcd) when they do not fit, BUSY
 * inside a call. Their tokens are stored when it returns; their KV is computed by the next
 * llmsvc_context_generate or llmsvc_call.
 */
LLMSVC_API llmsvc_status llmsvc_context_append(llmsvc_context* context, const llmsvc_message* messages, size_t n);

/**
 * Generate the assistant's reply to the conversation, which must end with a user message
 * (LLMSVC_ERR_INVALID_ARGUMENT otherwise). As llmsvc_call without a prompt: the same options,
 * streaming, cancellation and result (prompt_tokens 0); the reply becomes the conversation's
 * next message, its text what was streamed.
 */
LLMSVC_API llmsvc_status llmsvc_context_generate(llmsvc_context* context, const llmsvc_call_options* options,
                                                 llmsvc_token_fn on_piece, void* user, llmsvc_call_result* out);

/**
 * Rewind the conversation to its first `n_messages` messages: the later ones and their tokens
 * are dropped, the KV of the earlier ones kept. LLMSVC_ERR_INVALID_ARGUMENT when it holds
 * fewer. Stored when it returns.
 */
LLMSVC_API llmsvc_status llmsvc_context_truncate(llmsvc_context* context, size_t n_messages);

/** Called for each message, in order; the message is valid only during the call. Return
 *  non-zero to stop early. */
typedef int (*llmsvc_message_fn)(const llmsvc_message* message, void* user);

/** The conversation's messages from index `first` (0: all of them), one call of `fn` each. A
 *  message's content is as the model's chat template holds it: a template that strips the
 *  whitespace around contents (Gemma's) has it stripped. */
LLMSVC_API llmsvc_status llmsvc_context_messages(llmsvc_context* context, size_t first, llmsvc_message_fn fn,
                                                 void* user);

#ifdef __cplusplus
}
#endif

#endif /* LLMSVC_LLMSVC_H */
