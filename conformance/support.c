// SPDX-License-Identifier: Apache-2.0
/* support.c — helpers shared by the conformance tests. */
#include "support.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

llmsvc_service* conf_bind(conf_t* t, const char* target) {
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = target;
  /* The devices of an embedded binding (a daemon's come from its configuration). */
  o.device = getenv("LLMSVC_CONF_DEVICES");
  /* The adapters an embedded binding offers (a daemon's come from its configuration). */
  o.adapters = getenv("LLMSVC_CONF_ADAPTERS");
  llmsvc_service* svc = NULL;
  llmsvc_status st = llmsvc_bind(&o, &svc);
  if (st != LLMSVC_OK) {
    conf_fail_at(t, __FILE__, __LINE__, "bind to %s: %s (%s)", target, llmsvc_status_name(st), llmsvc_last_error());
    return NULL;
  }
  return svc;
}

void conf_unique_id(char* buf, size_t size, const char* tag) {
  /* The run's start time keeps ids apart from a crashed earlier run with the same pid
   * (a long-lived daemon keeps what it was left). */
  static atomic_int counter;
  static long run = 0;
  if (run == 0) run = (long)time(NULL) % 100000;
  snprintf(buf, size, "conf-%ld-%ld-%d-%s", (long)getpid(), run, atomic_fetch_add(&counter, 1), tag);
}

llmsvc_context* conf_new_context(conf_t* t, llmsvc_service* svc, const char* id, int raw, const char* system_prompt) {
  llmsvc_context_options o;
  llmsvc_context_options_init(&o);
  o.id = id;
  o.raw = raw;
  o.system_prompt = system_prompt;
  llmsvc_context* ctx = NULL;
  llmsvc_status st = llmsvc_context_new(svc, &o, &ctx);
  if (st != LLMSVC_OK) {
    conf_fail_at(t, __FILE__, __LINE__, "context_new(%s): %s (%s)", id ? id : "NULL", llmsvc_status_name(st),
                 llmsvc_last_error());
    return NULL;
  }
  return ctx;
}

void conf_close_and_delete(conf_t* t, llmsvc_service* svc, llmsvc_context* ctx) {
  if (!ctx) return;
  char id[80];
  snprintf(id, sizeof id, "%s", llmsvc_context_id(ctx));
  llmsvc_context_close(ctx);
  llmsvc_status st = llmsvc_context_delete(svc, id);
  if (st != LLMSVC_OK)
    conf_fail_at(t, __FILE__, __LINE__, "delete %s: %s (%s)", id, llmsvc_status_name(st), llmsvc_last_error());
}

int conf_setup(conf_t* t, conf_fixture* f, const char* tag, int raw) {
  f->svc = conf_bind(t, t->env->target);
  conf_unique_id(f->id, sizeof f->id, tag);
  f->ctx = f->svc ? conf_new_context(t, f->svc, f->id, raw, NULL) : NULL;
  if (f->ctx) return 1;
  llmsvc_unbind(f->svc);
  f->svc = NULL;
  return 0;
}

void conf_teardown(conf_t* t, conf_fixture* f) {
  conf_close_and_delete(t, f->svc, f->ctx);
  llmsvc_unbind(f->svc);
  f->ctx = NULL;
  f->svc = NULL;
}

llmsvc_call_options conf_greedy(int32_t max_tokens) {
  llmsvc_call_options o;
  llmsvc_call_options_init(&o);
  o.max_tokens = max_tokens;
  return o;
}

static int count_one(const char* id, void* user) {
  (void)id;
  ++*(int*)user;
  return 0;
}

int conf_count_contexts(conf_t* t, llmsvc_service* svc) {
  int n = 0;
  CONF_STATUS(t, llmsvc_context_list(svc, count_one, &n), LLMSVC_OK);
  return n;
}

llmsvc_context_info conf_info(conf_t* t, llmsvc_service* svc, const char* id) {
  llmsvc_context_info info;
  llmsvc_context_info_init(&info);
  llmsvc_status st = llmsvc_context_info_get(svc, id, &info);
  if (st != LLMSVC_OK) {
    conf_fail_at(t, __FILE__, __LINE__, "info %s: %s (%s)", id, llmsvc_status_name(st), llmsvc_last_error());
    llmsvc_context_info_init(&info);
  }
  return info;
}

void conf_text_init(conf_text* c) {
  memset(c, 0, sizeof *c);
  c->cap = 256;
  c->data = calloc(c->cap, 1);
}

void conf_text_free(conf_text* c) {
  free(c->data);
  c->data = NULL;
}

int conf_collect(const char* piece, size_t len, int32_t token, void* user) {
  conf_text* c = user;
  if (c->cancel_after > 0 && c->pieces >= c->cancel_after) c->pieces_after_cancel++;
  if (!conf_utf8_valid(piece, len)) c->invalid_pieces++;
  if (c->len + len + 1 > c->cap) {
    size_t cap = (c->len + len + 1) * 2;
    char* grown = realloc(c->data, cap);
    if (!grown) return 1; /* out of memory here: stop the call rather than lose text */
    c->data = grown;
    c->cap = cap;
  }
  memcpy(c->data + c->len, piece, len);
  c->len += len;
  c->data[c->len] = '\0';
  if ((size_t)c->pieces < sizeof c->tokens / sizeof c->tokens[0]) c->tokens[c->pieces] = token;
  c->pieces++;
  const int stop = c->cancel_after > 0 && c->pieces >= c->cancel_after;
  if (stop && c->cancel_delay_ms > 0) {
    struct timespec ts = {c->cancel_delay_ms / 1000, (long)(c->cancel_delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  return stop;
}

llmsvc_status conf_call_fresh(conf_t* t, llmsvc_service* svc, const char* prompt, int raw, int32_t max_tokens,
                              conf_text* out, llmsvc_call_result* result) {
  conf_text_init(out);
  char id[80];
  conf_unique_id(id, sizeof id, "fresh");
  llmsvc_context* ctx = conf_new_context(t, svc, id, raw, NULL);
  if (!ctx) return LLMSVC_ERR_INTERNAL;
  llmsvc_call_options o = conf_greedy(max_tokens);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  llmsvc_status st = llmsvc_call(ctx, prompt, strlen(prompt), &o, conf_collect, out, &r);
  if (result) *result = r;
  conf_close_and_delete(t, svc, ctx);
  return st;
}

void conf_caller_init(conf_caller* c, llmsvc_context* ctx, const char* prompt, int32_t max_tokens,
                      llmsvc_token_fn on_piece, void* user) {
  memset(c, 0, sizeof *c);
  c->ctx = ctx;
  c->prompt = prompt;
  c->max_tokens = max_tokens;
  c->on_piece = on_piece;
  c->user = user;
  c->status = LLMSVC_ERR_INTERNAL; /* until the call has answered */
  llmsvc_call_result_init(&c->result);
}

void* conf_call_thread(void* caller) {
  conf_caller* c = caller;
  llmsvc_call_options o = conf_greedy(c->max_tokens);
  c->status = llmsvc_call(c->ctx, c->prompt, strlen(c->prompt), &o, c->on_piece, c->user, &c->result);
  return NULL;
}

int conf_utf8_valid(const char* s, size_t n) {
  const unsigned char* p = (const unsigned char*)s;
  size_t i = 0;
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t need;
    unsigned cp, min;
    if ((c & 0xE0) == 0xC0) need = 1, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) need = 2, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) need = 3, cp = c & 0x07, min = 0x10000;
    else return 0;
    if (i + need >= n) return 0; /* truncated */
    for (size_t k = 1; k <= need; k++) {
      if ((p[i + k] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += need + 1;
  }
  return 1;
}

int conf_same_tokens(const conf_text* a, const conf_text* b) {
  if (a->pieces != b->pieces) return 0;
  size_t n = (size_t)a->pieces;
  if (n > sizeof a->tokens / sizeof a->tokens[0]) n = sizeof a->tokens / sizeof a->tokens[0];
  return a->len == b->len && memcmp(a->tokens, b->tokens, n * sizeof a->tokens[0]) == 0 &&
         memcmp(a->data, b->data, a->len) == 0;
}
