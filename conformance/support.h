// SPDX-License-Identifier: Apache-2.0
/* support.h — small helpers the conformance tests share: binding, fresh ids and contexts,
 * collecting streamed pieces, an independent UTF-8 check. Only the public header is used. */
#ifndef LLMSVC_CONFORMANCE_SUPPORT_H
#define LLMSVC_CONFORMANCE_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "runner.h"
#include "llmsvc/llmsvc.h"

/* A bind with default options but for `target`; NULL (and a test failure) when it fails. */
llmsvc_service* conf_bind(conf_t* t, const char* target);
/* A fresh id unique to this process and run: "conf-<pid>-<n>-<tag>". */
void conf_unique_id(char* buf, size_t size, const char* tag);
/* A new context (raw or chat, optional system prompt); NULL (and a failure) when it fails. */
llmsvc_context* conf_new_context(conf_t* t, llmsvc_service* svc, const char* id, int raw, const char* system_prompt);
/* Closes `ctx` and deletes its context (a failure if the delete fails). */
void conf_close_and_delete(conf_t* t, llmsvc_service* svc, llmsvc_context* ctx);
/* What most tests start from: a binding to the target and a new context on it. */
typedef struct conf_fixture {
  llmsvc_service* svc;
  llmsvc_context* ctx;
  char id[80];
} conf_fixture;
/* Binds and makes a context with a unique id built from `tag`; 0 (a failure recorded, nothing
 * left bound) when either fails. */
int conf_setup(conf_t* t, conf_fixture* f, const char* tag, int raw);
/* Closes and deletes the fixture's context and unbinds. */
void conf_teardown(conf_t* t, conf_fixture* f);
/* Greedy call options with `max_tokens`. */
llmsvc_call_options conf_greedy(int32_t max_tokens);
/* How many contexts llmsvc_context_list reports through `svc` (a failure if listing fails). */
int conf_count_contexts(conf_t* t, llmsvc_service* svc);
/* info_get through `svc`; a failure (and a zeroed info) if it fails. */
llmsvc_context_info conf_info(conf_t* t, llmsvc_service* svc, const char* id);

/* The pieces of one call. */
typedef struct conf_text {
  char* data; /* NUL-terminated concatenation */
  size_t len, cap;
  int32_t tokens[1024]; /* the token each piece reported, in order */
  int pieces;
  int invalid_pieces; /* pieces that were not valid UTF-8 on their own */
  int cancel_after;   /* > 0: return non-zero from the piece with this number (1-based) */
  int cancel_delay_ms; /* > 0: wait this long before that return (the call generates meanwhile) */
  int pieces_after_cancel;
} conf_text;

void conf_text_init(conf_text* c);
void conf_text_free(conf_text* c);
/* llmsvc_token_fn appending to a conf_text. */
int conf_collect(const char* piece, size_t len, int32_t token, void* user);

/* One greedy call of `prompt` on a fresh raw or chat context that is then deleted; the pieces
 * go to `out` (initialised here), the result to `result` (may be NULL). Returns the status. */
llmsvc_status conf_call_fresh(conf_t* t, llmsvc_service* svc, const char* prompt, int raw, int32_t max_tokens,
                              conf_text* out, llmsvc_call_result* result);

/* One greedy call made on a thread of its own: conf_call_thread is the pthread start routine,
 * a conf_caller its argument. */
typedef struct conf_caller {
  llmsvc_context* ctx;
  const char* prompt;
  int32_t max_tokens;
  llmsvc_token_fn on_piece; /* may be NULL */
  void* user;
  llmsvc_call_result result;
  llmsvc_status status;
} conf_caller;

void conf_caller_init(conf_caller* c, llmsvc_context* ctx, const char* prompt, int32_t max_tokens,
                      llmsvc_token_fn on_piece, void* user);
void* conf_call_thread(void* caller);

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF. */
int conf_utf8_valid(const char* s, size_t n);
/* The tokens of two collections are the same, in order. */
int conf_same_tokens(const conf_text* a, const conf_text* b);

#endif /* LLMSVC_CONFORMANCE_SUPPORT_H */
