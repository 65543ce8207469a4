// SPDX-License-Identifier: Apache-2.0
/* test_lifecycle.c — LIFE-*: version and names, _init() defaults, bind / unbind, and the
 * life of a context handle (new, open, id, close, delete, list, info). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "tests.h"

/* LIFE-1: the loaded library speaks the header's ABI major version. */
static void abi_version(conf_t* t) {
  uint32_t v = llmsvc_abi_version();
  CONF_CHECK(t, (v >> 16) == LLMSVC_ABI_VERSION_MAJOR, "library 0x%x, header 0x%x", v, LLMSVC_ABI_VERSION);
}

/* LIFE-2: every status has its static name; an unknown value still gets a string. */
static void status_names(conf_t* t) {
  static const char* const names[] = {
      "LLMSVC_OK", "LLMSVC_ERR_INVALID_ARGUMENT", "LLMSVC_ERR_INVALID_UTF8", "LLMSVC_ERR_MODEL_NOT_FOUND",
      "LLMSVC_ERR_MODEL_INVALID", "LLMSVC_ERR_UNSUPPORTED", "LLMSVC_ERR_OUT_OF_MEMORY",
      "LLMSVC_ERR_CONTEXT_OVERFLOW", "LLMSVC_ERR_NOT_FOUND", "LLMSVC_ERR_EXISTS", "LLMSVC_ERR_CANCELLED",
      "LLMSVC_ERR_BUSY", "LLMSVC_ERR_IO", "LLMSVC_ERR_UNAVAILABLE", "LLMSVC_ERR_QUOTA_EXCEEDED",
      "LLMSVC_ERR_INTERNAL", "LLMSVC_ERR_MODEL_MISMATCH"};
  for (int s = 0; s < (int)(sizeof names / sizeof names[0]); s++) {
    const char* got = llmsvc_status_name((llmsvc_status)s);
    CONF_CHECK(t, got != NULL && strcmp(got, names[s]) == 0, "status %d: '%s'", s, got ? got : "(null)");
  }
  CONF_CHECK(t, llmsvc_status_name((llmsvc_status)12345) != NULL);
  CONF_CHECK(t, llmsvc_status_name((llmsvc_status)-1) != NULL);
}

/* LIFE-3: _init() sets struct_size and the documented defaults; NULL is harmless. */
static void init_defaults(conf_t* t) {
  llmsvc_bind_options b;
  memset(&b, 0xAB, sizeof b);
  llmsvc_bind_options_init(&b);
  CONF_CHECK(t, b.struct_size == sizeof b);
  CONF_CHECK(t, b.target == NULL && b.model_path == NULL && b.state_dir == NULL);
  CONF_CHECK(t, b.n_threads == 0 && b.n_ctx == 0 && b.chunk_tokens == 0 && b.recompute_on_model_change == 0);
  CONF_CHECK(t, b.kv_budget_bytes == 0 && b.kv_ratio == 0.0f);

  llmsvc_context_options c;
  memset(&c, 0xAB, sizeof c);
  llmsvc_context_options_init(&c);
  CONF_CHECK(t, c.struct_size == sizeof c && c.id == NULL && c.system_prompt == NULL && c.raw == 0);

  llmsvc_call_options o;
  memset(&o, 0xAB, sizeof o);
  llmsvc_call_options_init(&o);
  CONF_CHECK(t, o.struct_size == sizeof o);
  CONF_CHECK(t, o.temperature <= 0.0f, "greedy by default");
  CONF_CHECK(t, o.top_k == 0 && o.top_p == 1.0f && o.min_p == 0.0f && o.repeat_penalty == 1.0f);
  CONF_CHECK(t, o.repeat_last_n == 64 && o.max_tokens == 256);
  CONF_CHECK(t, o.stop == NULL && o.n_stop == 0 && o.slo_ttft_ratio == 0.0f && o.slo_tpot_ratio == 0.0f);

  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  CONF_CHECK(t, r.struct_size == sizeof r);
  llmsvc_stats s;
  llmsvc_stats_init(&s);
  CONF_CHECK(t, s.struct_size == sizeof s);
  llmsvc_context_info i;
  llmsvc_context_info_init(&i);
  CONF_CHECK(t, i.struct_size == sizeof i);

  llmsvc_bind_options_init(NULL);
  llmsvc_context_options_init(NULL);
  llmsvc_call_options_init(NULL);
  llmsvc_call_result_init(NULL);
  llmsvc_stats_init(NULL);
  llmsvc_context_info_init(NULL);
}

/* LIFE-4: bind with NULL options (or a NULL / "" target) follows $LLMSVC_TARGET, which main
 * points at the target under test: a context made there is visible through the target. */
static void bind_follows_env(conf_t* t) {
  const char* env = getenv("LLMSVC_TARGET");
  CONF_REQUIRE(t, env && strcmp(env, t->env->target) == 0, "main sets LLMSVC_TARGET");
  llmsvc_service* by_env = NULL;
  CONF_STATUS_REQ(t, llmsvc_bind(NULL, &by_env), LLMSVC_OK);
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = "";
  llmsvc_service* by_empty = NULL;
  CONF_STATUS(t, llmsvc_bind(&o, &by_empty), LLMSVC_OK);
  char id[80];
  conf_unique_id(id, sizeof id, "env");
  llmsvc_context* ctx = conf_new_context(t, by_env, id, 1, NULL);
  if (ctx) llmsvc_context_close(ctx);
  llmsvc_service* explicit_svc = conf_bind(t, t->env->target);
  if (explicit_svc && ctx) {
    llmsvc_context_info info = conf_info(t, explicit_svc, id);
    CONF_CHECK(t, strcmp(info.id, id) == 0);
  }
  llmsvc_unbind(explicit_svc);
  if (ctx) CONF_STATUS(t, llmsvc_context_delete(by_env, id), LLMSVC_OK);
  llmsvc_unbind(by_empty);
  llmsvc_unbind(by_env);
}

/* LIFE-5: the NULL-tolerant functions: unbind(NULL), close(NULL), context_id(NULL) == "". */
static void null_noops(conf_t* t) {
  llmsvc_unbind(NULL);
  llmsvc_context_close(NULL);
  const char* id = llmsvc_context_id(NULL);
  CONF_CHECK(t, id != NULL && id[0] == '\0');
}

/* LIFE-6: unbind with a context still open: the handle stays usable until it is closed. */
static void unbind_with_open_context(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  char id[80];
  conf_unique_id(id, sizeof id, "orphan");
  llmsvc_context* ctx = conf_new_context(t, svc, id, 1, NULL);
  llmsvc_unbind(svc);
  CONF_REQUIRE(t, ctx != NULL);
  llmsvc_call_options o = conf_greedy(2);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  CONF_STATUS(t, llmsvc_call(ctx, "The sky is", 10, &o, NULL, NULL, &r), LLMSVC_OK);
  CONF_CHECK(t, r.generated_tokens == 2, "generated %d", r.generated_tokens);
  CONF_CHECK(t, strcmp(llmsvc_context_id(ctx), id) == 0);
  llmsvc_context_close(ctx);
  /* The context persisted: a new binding sees it (and cleans it up). */
  llmsvc_service* again = conf_bind(t, t->env->target);
  if (again) {
    llmsvc_context_info info = conf_info(t, again, id);
    CONF_CHECK(t, info.tokens == r.context_tokens, "%d tokens, the call said %d", info.tokens, r.context_tokens);
    CONF_STATUS(t, llmsvc_context_delete(again, id), LLMSVC_OK);
  }
  llmsvc_unbind(again);
}

/* LIFE-7: two bindings at once are independent handles: unbinding one leaves the other working. */
static void two_bindings(conf_t* t) {
  llmsvc_service* a = conf_bind(t, t->env->target);
  llmsvc_service* b = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, a && b && a != b);
  llmsvc_unbind(a);
  llmsvc_stats s;
  llmsvc_stats_init(&s);
  CONF_STATUS(t, llmsvc_get_stats(b, &s), LLMSVC_OK);
  char id[80];
  conf_unique_id(id, sizeof id, "second");
  llmsvc_context* ctx = conf_new_context(t, b, id, 1, NULL);
  conf_close_and_delete(t, b, ctx);
  llmsvc_unbind(b);
}

/* LIFE-8: context_new: the given id is kept; NULL options or id generate distinct ids that
 * follow the id rules (1..64 bytes of [A-Za-z0-9._-], not "." or ".."). */
static void ids(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  char id[80];
  conf_unique_id(id, sizeof id, "named");
  llmsvc_context* named = conf_new_context(t, svc, id, 0, NULL);
  if (named) CONF_CHECK(t, strcmp(llmsvc_context_id(named), id) == 0, "'%s'", llmsvc_context_id(named));
  llmsvc_context* g1 = NULL;
  llmsvc_context* g2 = NULL;
  CONF_STATUS(t, llmsvc_context_new(svc, NULL, &g1), LLMSVC_OK);
  llmsvc_context_options o;
  llmsvc_context_options_init(&o);
  CONF_STATUS(t, llmsvc_context_new(svc, &o, &g2), LLMSVC_OK);
  if (g1 && g2) {
    const char* ids[2] = {llmsvc_context_id(g1), llmsvc_context_id(g2)};
    CONF_CHECK(t, strcmp(ids[0], ids[1]) != 0, "'%s' twice", ids[0]);
    for (int k = 0; k < 2; k++) {
      size_t n = strlen(ids[k]);
      CONF_CHECK(t, n >= 1 && n <= 64, "'%s'", ids[k]);
      CONF_CHECK(t, strspn(ids[k], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n, "'%s'",
                 ids[k]);
      CONF_CHECK(t, strcmp(ids[k], ".") != 0 && strcmp(ids[k], "..") != 0);
    }
  }
  conf_close_and_delete(t, svc, g1);
  conf_close_and_delete(t, svc, g2);
  conf_close_and_delete(t, svc, named);
  llmsvc_unbind(svc);
}

/* LIFE-9: a context opened twice gives two working handles; delete is BUSY while either is
 * open, succeeds once both are closed, and the id is then gone. */
static void open_close_delete(conf_t* t) {
  conf_fixture f;
  CONF_REQUIRE(t, conf_setup(t, &f, "twice", 1));
  llmsvc_service* svc = f.svc;
  llmsvc_context* a = f.ctx;
  const char* id = f.id;
  llmsvc_context* b = NULL;
  CONF_STATUS(t, llmsvc_context_open(svc, id, &b), LLMSVC_OK);
  CONF_CHECK(t, b != NULL && b != a);
  CONF_STATUS(t, llmsvc_context_delete(svc, id), LLMSVC_ERR_BUSY);
  CONF_CHECK(t, llmsvc_last_error()[0] != '\0', "a failure has a detail");
  llmsvc_call_options o = conf_greedy(1);
  CONF_STATUS(t, llmsvc_call(a, "One", 3, &o, NULL, NULL, NULL), LLMSVC_OK);
  llmsvc_context_close(a);
  CONF_STATUS(t, llmsvc_context_delete(svc, id), LLMSVC_ERR_BUSY);
  if (b) CONF_STATUS(t, llmsvc_call(b, " two", 4, &o, NULL, NULL, NULL), LLMSVC_OK);
  llmsvc_context_close(b);
  CONF_STATUS(t, llmsvc_context_delete(svc, id), LLMSVC_OK);
  llmsvc_context* gone = NULL;
  CONF_STATUS(t, llmsvc_context_open(svc, id, &gone), LLMSVC_ERR_NOT_FOUND);
  CONF_CHECK(t, gone == NULL);
  llmsvc_unbind(svc);
}

/* Two bindings of the app and a context, with one call made, through the first. */
typedef struct two_bindings_fixture {
  llmsvc_service* a;
  llmsvc_service* b;
  llmsvc_context* ctx; /* open through a */
  char id[80];
} two_bindings_fixture;

static int two_bindings_setup(conf_t* t, two_bindings_fixture* f, const char* tag) {
  f->a = conf_bind(t, t->env->target);
  f->b = conf_bind(t, t->env->target);
  conf_unique_id(f->id, sizeof f->id, tag);
  f->ctx = f->a && f->b ? conf_new_context(t, f->a, f->id, 1, NULL) : NULL;
  if (f->ctx) {
    llmsvc_call_options o = conf_greedy(1);
    CONF_STATUS(t, llmsvc_call(f->ctx, "Hi", 2, &o, NULL, NULL, NULL), LLMSVC_OK);
    return 1;
  }
  llmsvc_unbind(f->a);
  llmsvc_unbind(f->b);
  return 0;
}

/* LIFE-10: delete is BUSY while a handle is open through another binding of the same app. */
static void delete_busy_across_bindings(conf_t* t) {
  two_bindings_fixture f;
  CONF_REQUIRE(t, two_bindings_setup(t, &f, "held"));
  CONF_STATUS(t, llmsvc_context_delete(f.b, f.id), LLMSVC_ERR_BUSY);
  llmsvc_context_close(f.ctx);
  llmsvc_unbind(f.a);
  CONF_STATUS(t, llmsvc_context_delete(f.b, f.id), LLMSVC_OK);
  llmsvc_unbind(f.b);
}

/* LIFE-13: once every handle is closed, another binding of the app can delete the context
 * (the header's only BUSY for delete is "while a handle to it is open"). */
static void delete_after_close_across_bindings(conf_t* t) {
  two_bindings_fixture f;
  CONF_REQUIRE(t, two_bindings_setup(t, &f, "closed"));
  llmsvc_context_close(f.ctx);
  CONF_STATUS(t, llmsvc_context_delete(f.b, f.id), LLMSVC_OK);
  llmsvc_unbind(f.a);
  llmsvc_context_delete(f.b, f.id); /* cleans up after a failure above; NOT_FOUND otherwise */
  llmsvc_unbind(f.b);
}

typedef struct listed {
  char ids[64][80];
  int n;
  int stop_after; /* > 0: return non-zero after this many */
} listed;

static int on_id(const char* id, void* user) {
  listed* l = user;
  if (l->n < 64) snprintf(l->ids[l->n], sizeof l->ids[0], "%s", id);
  l->n++;
  return l->stop_after > 0 && l->n >= l->stop_after;
}

static int count_id(const listed* l, const char* id) {
  int c = 0;
  for (int i = 0; i < l->n && i < 64; i++) c += strcmp(l->ids[i], id) == 0;
  return c;
}

/* LIFE-11: list gives every context of the app once, open or not, in (byte) order; a non-zero
 * return stops it. */
static void list_contexts(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  char id1[80], id2[80];
  conf_unique_id(id1, sizeof id1, "list-b");
  conf_unique_id(id2, sizeof id2, "list-a");
  llmsvc_context* c1 = conf_new_context(t, svc, id1, 1, NULL);
  llmsvc_context* c2 = conf_new_context(t, svc, id2, 1, NULL);
  llmsvc_context_close(c2); /* closed contexts are listed too */
  listed all;
  memset(&all, 0, sizeof all);
  CONF_STATUS(t, llmsvc_context_list(svc, on_id, &all), LLMSVC_OK);
  CONF_CHECK(t, count_id(&all, id1) == 1 && count_id(&all, id2) == 1, "%d ids listed", all.n);
  for (int i = 1; i < all.n && i < 64; i++)
    CONF_CHECK(t, strcmp(all.ids[i - 1], all.ids[i]) < 0, "'%s' before '%s'", all.ids[i - 1], all.ids[i]);
  listed one;
  memset(&one, 0, sizeof one);
  one.stop_after = 1;
  CONF_STATUS(t, llmsvc_context_list(svc, on_id, &one), LLMSVC_OK);
  CONF_CHECK(t, one.n == 1, "called %d times after asking to stop", one.n);
  conf_close_and_delete(t, svc, c1);
  if (c2) CONF_STATUS(t, llmsvc_context_delete(svc, id2), LLMSVC_OK);
  listed after;
  memset(&after, 0, sizeof after);
  CONF_STATUS(t, llmsvc_context_list(svc, on_id, &after), LLMSVC_OK);
  CONF_CHECK(t, count_id(&after, id1) == 0 && count_id(&after, id2) == 0, "deleted ids are not listed");
  llmsvc_unbind(svc);
}

/* LIFE-12: info describes a context whether open or not: its id, raw flag, tokens and turns. */
static void info_open_or_not(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  char raw_id[80], chat_id[80];
  conf_unique_id(raw_id, sizeof raw_id, "info-raw");
  conf_unique_id(chat_id, sizeof chat_id, "info-chat");
  llmsvc_context* raw = conf_new_context(t, svc, raw_id, 1, NULL);
  llmsvc_context* chat = conf_new_context(t, svc, chat_id, 0, NULL);
  CONF_REQUIRE(t, raw && chat);
  llmsvc_call_options o = conf_greedy(2);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  CONF_STATUS(t, llmsvc_call(chat, "Hello", 5, &o, NULL, NULL, &r), LLMSVC_OK);
  llmsvc_context_info open_info = conf_info(t, svc, chat_id);
  llmsvc_context_close(chat);
  llmsvc_context_info closed_info = conf_info(t, svc, chat_id);
  CONF_CHECK(t, strcmp(closed_info.id, chat_id) == 0 && closed_info.raw == 0);
  CONF_CHECK(t, open_info.tokens == r.context_tokens && closed_info.tokens == r.context_tokens,
             "open %d, closed %d, call %d", open_info.tokens, closed_info.tokens, r.context_tokens);
  CONF_CHECK(t, open_info.turns == 1 && closed_info.turns == 1, "turns %d / %d", open_info.turns, closed_info.turns);
  llmsvc_context_info raw_info = conf_info(t, svc, raw_id);
  CONF_CHECK(t, strcmp(raw_info.id, raw_id) == 0 && raw_info.raw != 0 && raw_info.turns == 0);
  conf_close_and_delete(t, svc, raw);
  CONF_STATUS(t, llmsvc_context_delete(svc, chat_id), LLMSVC_OK);
  llmsvc_unbind(svc);
}

const conf_test conf_lifecycle_tests[] = {
    {"LIFE-1", "the library's ABI major version is the header's", abi_version},
    {"LIFE-2", "llmsvc_status_name names every status, never NULL", status_names},
    {"LIFE-3", "_init() sets struct_size and the documented defaults; NULL is a no-op", init_defaults},
    {"LIFE-4", "bind with NULL options or an empty target follows $LLMSVC_TARGET", bind_follows_env},
    {"LIFE-5", "unbind(NULL) and close(NULL) are no-ops; context_id(NULL) is \"\"", null_noops},
    {"LIFE-6", "context handles stay usable after unbind until closed", unbind_with_open_context},
    {"LIFE-7", "two bindings are independent; unbinding one leaves the other working", two_bindings},
    {"LIFE-8", "context ids: given ids kept, generated ids distinct and well-formed", ids},
    {"LIFE-9", "open twice, delete BUSY while any handle is open, then NOT_FOUND", open_close_delete},
    {"LIFE-10", "delete is BUSY while another binding of the app holds a handle", delete_busy_across_bindings},
    {"LIFE-11", "list: each context once, open or not, in order; non-zero stops it", list_contexts},
    {"LIFE-12", "info describes a context open or closed: id, raw, tokens, turns", info_open_or_not},
    {"LIFE-13", "after every handle is closed, another binding can delete the context",
     delete_after_close_across_bindings},
    {NULL, NULL, NULL}};
