// SPDX-License-Identifier: Apache-2.0
/* test_adapter.c — ADAPTER-*: LoRA adapters (since ABI 1.6): the names a service offers
 * (llmsvc_adapter_list), a context's adapter (llmsvc_context_options.adapter) and a call's
 * (llmsvc_call_options.adapter). The CTest entries offer one adapter, a random one made for the
 * suite's model strong enough to move its greedy reply (LLMSVC_CONF_ADAPTERS); without one the
 * tests that run it skip, saying so. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "support.h"
#include "tests.h"

static const char kPrompt[] = "Name three colours.";

typedef struct names {
  int n;
  char first[80];
  int bad; /* a name that is empty or longer than 64 bytes */
} names;

static int collect_name(const char* name, void* user) {
  names* s = (names*)user;
  size_t len = strlen(name);
  if (len == 0 || len > 64) s->bad++;
  if (s->n++ == 0) snprintf(s->first, sizeof s->first, "%s", name);
  return 0;
}

/* A binding to the target and the first adapter it offers, in `name` (size 80). NULL when the
 * bind fails (a failure) or no adapter is offered (the test skips, saying so). */
static llmsvc_service* bind_with_adapter(conf_t* t, char name[80]) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  if (!svc) return NULL;
  names s;
  memset(&s, 0, sizeof s);
  CONF_STATUS(t, llmsvc_adapter_list(svc, collect_name, &s), LLMSVC_OK);
  snprintf(name, 80, "%s", s.first);
  if (s.n > 0) return svc;
  llmsvc_unbind(svc);
  conf_skip(t, "the service offers no adapter (LLMSVC_CONF_ADAPTERS)");
  return NULL;
}

/* A new chat context with `adapter` (may be NULL); its status, the handle in *ctx. */
static llmsvc_status new_with_adapter(llmsvc_service* svc, const char* id, const char* adapter, llmsvc_context** ctx) {
  llmsvc_context_options o;
  llmsvc_context_options_init(&o);
  o.id = id;
  o.adapter = adapter;
  *ctx = NULL;
  return llmsvc_context_new(svc, &o, ctx);
}

/* One greedy call of kPrompt with the call's adapter (NULL: the context's). */
static llmsvc_status call_with(llmsvc_context* ctx, const char* adapter, conf_text* out) {
  conf_text_init(out);
  llmsvc_call_options o = conf_greedy(8);
  o.adapter = adapter;
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  return llmsvc_call(ctx, kPrompt, strlen(kPrompt), &o, conf_collect, out, &r);
}

/* ADAPTER-1: `_init` leaves both adapter fields NULL; the list is served, each name 1..64 bytes,
 * and stopping early (fn returning non-zero) is honoured. */
static void list_and_init(conf_t* t) {
  llmsvc_context_options co;
  memset(&co, 0x5A, sizeof co);
  llmsvc_context_options_init(&co);
  CONF_CHECK(t, co.adapter == NULL, "context options' adapter not NULL after init");
  llmsvc_call_options o;
  memset(&o, 0x5A, sizeof o);
  llmsvc_call_options_init(&o);
  CONF_CHECK(t, o.adapter == NULL, "call options' adapter not NULL after init");
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  names s;
  memset(&s, 0, sizeof s);
  CONF_STATUS(t, llmsvc_adapter_list(svc, collect_name, &s), LLMSVC_OK);
  CONF_CHECK(t, s.bad == 0, "%d names empty or longer than 64 bytes", s.bad);
  CONF_STATUS(t, llmsvc_adapter_list(svc, NULL, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_adapter_list(NULL, collect_name, &s), LLMSVC_ERR_INVALID_ARGUMENT);
  llmsvc_unbind(svc);
}

/* ADAPTER-2: a context with an adapter the service does not offer, or a name that is not one
 * ("", "../x", 65 bytes are not all refused the same: "" is none), is INVALID_ARGUMENT and no
 * context is made. */
static void unknown_context_adapter(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  const int before = conf_count_contexts(t, svc);
  char id[80], long_name[66];
  memset(long_name, 'a', 65);
  long_name[65] = '\0';
  const char* bad[] = {"no-such-adapter", "../x", long_name};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    conf_unique_id(id, sizeof id, "adapter2");
    llmsvc_context* ctx = NULL;
    CONF_STATUS(t, new_with_adapter(svc, id, bad[i], &ctx), LLMSVC_ERR_INVALID_ARGUMENT);
    CONF_CHECK(t, ctx == NULL, "a handle came back for adapter '%s'", bad[i]);
    llmsvc_context_info info;
    llmsvc_context_info_init(&info);
    CONF_STATUS(t, llmsvc_context_info_get(svc, id, &info), LLMSVC_ERR_NOT_FOUND);
    if (ctx) conf_close_and_delete(t, svc, ctx);
  }
  CONF_CHECK(t, conf_count_contexts(t, svc) == before, "contexts changed");
  conf_unique_id(id, sizeof id, "adapter2-none");
  llmsvc_context* none = NULL;
  CONF_STATUS(t, new_with_adapter(svc, id, "", &none), LLMSVC_OK);
  conf_close_and_delete(t, svc, none);
  llmsvc_unbind(svc);
}

/* ADAPTER-3: a call with an adapter the service does not offer is INVALID_ARGUMENT, before the
 * context changes (its tokens stay). */
static void unknown_call_adapter(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "adapter3", 0)) return;
  conf_text out;
  CONF_STATUS(t, call_with(f.ctx, NULL, &out), LLMSVC_OK);
  conf_text_free(&out);
  const llmsvc_context_info before = conf_info(t, f.svc, f.id);
  CONF_STATUS(t, call_with(f.ctx, "no-such-adapter", &out), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, out.pieces == 0, "%d pieces streamed", out.pieces);
  conf_text_free(&out);
  const llmsvc_context_info after = conf_info(t, f.svc, f.id);
  CONF_CHECK(t, after.tokens == before.tokens, "tokens %d -> %d", (int)before.tokens, (int)after.tokens);
  conf_teardown(t, &f);
}

/* ADAPTER-4: an offered adapter runs: a context made with it and a plain context whose call
 * names it give the same greedy reply, which differs from the plain model's (the suite's
 * adapter moves it), and the context keeps its adapter when reopened. */
static void adapter_runs(conf_t* t) {
  char name[80];
  llmsvc_service* svc = bind_with_adapter(t, name);
  if (!svc) return;
  char a_id[80], b_id[80], c_id[80];
  conf_unique_id(a_id, sizeof a_id, "adapter4-a");
  conf_unique_id(b_id, sizeof b_id, "adapter4-b");
  conf_unique_id(c_id, sizeof c_id, "adapter4-c");
  llmsvc_context *a = NULL, *b = NULL, *c = NULL;
  CONF_STATUS(t, new_with_adapter(svc, a_id, name, &a), LLMSVC_OK);
  CONF_STATUS(t, new_with_adapter(svc, b_id, NULL, &b), LLMSVC_OK);
  CONF_STATUS(t, new_with_adapter(svc, c_id, NULL, &c), LLMSVC_OK);
  if (a && b && c) {
    conf_text with_ctx, with_call, plain;
    CONF_STATUS(t, call_with(a, NULL, &with_ctx), LLMSVC_OK);
    CONF_STATUS(t, call_with(b, name, &with_call), LLMSVC_OK);
    CONF_STATUS(t, call_with(c, NULL, &plain), LLMSVC_OK);
    CONF_CHECK(t, conf_same_tokens(&with_ctx, &with_call), "context's adapter \"%s\" != call's \"%s\"", with_ctx.data,
               with_call.data);
    CONF_CHECK(t, !conf_same_tokens(&with_ctx, &plain), "the adapter changed nothing: \"%s\"", plain.data);
    conf_text_free(&with_ctx);
    conf_text_free(&with_call);
    conf_text_free(&plain);
    /* Reopened, the context's next turn still runs its adapter: the same as b's next turn with
     * the call's adapter. */
    llmsvc_context_close(a);
    a = NULL;
    CONF_STATUS(t, llmsvc_context_open(svc, a_id, &a), LLMSVC_OK);
    if (a) {
      CONF_STATUS(t, call_with(a, NULL, &with_ctx), LLMSVC_OK);
      CONF_STATUS(t, call_with(b, name, &with_call), LLMSVC_OK);
      CONF_CHECK(t, conf_same_tokens(&with_ctx, &with_call), "after reopening: \"%s\" != \"%s\"", with_ctx.data,
                 with_call.data);
      conf_text_free(&with_ctx);
      conf_text_free(&with_call);
    }
  }
  conf_close_and_delete(t, svc, a);
  conf_close_and_delete(t, svc, b);
  conf_close_and_delete(t, svc, c);
  llmsvc_unbind(svc);
}

/* ADAPTER-5: a fork keeps its parent's adapter: a fork called without an adapter answers as its
 * twin called with the parent's adapter by name (a fork that lost it would run the plain model),
 * and its first token is the parent's. */
static void fork_keeps_adapter(conf_t* t) {
  char name[80];
  llmsvc_service* svc = bind_with_adapter(t, name);
  if (!svc) return;
  char id[80];
  conf_unique_id(id, sizeof id, "adapter5");
  llmsvc_context *parent = NULL, *a = NULL, *b = NULL;
  CONF_STATUS(t, new_with_adapter(svc, id, name, &parent), LLMSVC_OK);
  if (parent) {
    conf_text first, ra, rb, rp;
    CONF_STATUS(t, call_with(parent, NULL, &first), LLMSVC_OK);
    conf_text_free(&first);
    CONF_STATUS(t, llmsvc_context_fork(parent, NULL, &a), LLMSVC_OK);
    CONF_STATUS(t, llmsvc_context_fork(parent, NULL, &b), LLMSVC_OK);
    if (a && b) {
      CONF_STATUS(t, call_with(a, NULL, &ra), LLMSVC_OK);
      CONF_STATUS(t, call_with(b, name, &rb), LLMSVC_OK);
      CONF_STATUS(t, call_with(parent, NULL, &rp), LLMSVC_OK);
      CONF_CHECK(t, ra.pieces > 0 && conf_same_tokens(&ra, &rb), "fork \"%s\" != its twin with the adapter named \"%s\"",
                 ra.data, rb.data);
      CONF_CHECK(t, ra.pieces > 0 && rp.pieces > 0 && ra.tokens[0] == rp.tokens[0], "fork \"%s\" parent \"%s\"",
                 ra.data, rp.data);
      conf_text_free(&ra);
      conf_text_free(&rb);
      conf_text_free(&rp);
    }
  }
  conf_close_and_delete(t, svc, a);
  conf_close_and_delete(t, svc, b);
  conf_close_and_delete(t, svc, parent);
  llmsvc_unbind(svc);
}

const conf_test conf_adapter_tests[] = {
    {"ADAPTER-1", "init leaves the adapter fields NULL; llmsvc_adapter_list serves valid names", list_and_init},
    {"ADAPTER-2", "a context with an adapter not offered (or not a name): INVALID_ARGUMENT, nothing made",
     unknown_context_adapter},
    {"ADAPTER-3", "a call with an adapter not offered: INVALID_ARGUMENT, the context unchanged", unknown_call_adapter},
    {"ADAPTER-4", "an offered adapter runs, the same by context or by call, kept when reopened", adapter_runs},
    {"ADAPTER-5", "a fork runs its parent's adapter", fork_keeps_adapter},
    {NULL, NULL, NULL},
};
