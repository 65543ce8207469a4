// SPDX-License-Identifier: Apache-2.0
/* test_persist.c — PERSIST-*: contexts outlive their handles, their bindings and the process
 * that serves them. Embedded, "restart" is unbind + bind with the same state directory in
 * this process; through the daemon, the command given by --restart-cmd restarts llmsvcd. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "tests.h"

/* PERSIST-1: close and reopen by id: same tokens, turns and kind, and the context goes on
 * from where it was. */
static void close_and_reopen(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  for (int raw = 0; raw < 2; raw++) {
    char id[80];
    conf_unique_id(id, sizeof id, raw ? "reopen-raw" : "reopen-chat");
    llmsvc_context* ctx = conf_new_context(t, svc, id, raw, NULL);
    if (!ctx) continue;
    llmsvc_call_options o = conf_greedy(4);
    CONF_STATUS(t, llmsvc_call(ctx, "Remember the word: lighthouse.", 30, &o, NULL, NULL, NULL), LLMSVC_OK);
    llmsvc_context_info before = conf_info(t, svc, id);
    llmsvc_context_close(ctx);
    ctx = NULL;
    CONF_STATUS(t, llmsvc_context_open(svc, id, &ctx), LLMSVC_OK);
    if (!ctx) continue;
    CONF_CHECK(t, strcmp(llmsvc_context_id(ctx), id) == 0);
    llmsvc_context_info reopened = conf_info(t, svc, id);
    CONF_CHECK(t, reopened.tokens == before.tokens && reopened.turns == before.turns && reopened.raw == raw,
               "tokens %d -> %d, turns %d -> %d, raw %d", before.tokens, reopened.tokens, before.turns, reopened.turns,
               reopened.raw);
    llmsvc_call_result r;
    llmsvc_call_result_init(&r);
    CONF_STATUS(t, llmsvc_call(ctx, " Again.", 7, &o, NULL, NULL, &r), LLMSVC_OK);
    /* A chat turn may be closed by template tokens counted in neither figure (STATS-2). */
    const int32_t sum = before.tokens + r.prompt_tokens + r.generated_tokens;
    CONF_CHECK(t, raw ? r.context_tokens == sum : r.context_tokens >= sum, "context %d after %d + %d + %d",
               r.context_tokens, before.tokens, r.prompt_tokens, r.generated_tokens);
    conf_close_and_delete(t, svc, ctx);
  }
  llmsvc_unbind(svc);
}

/* Restarts what serves t->env->target: 1 when done, 0 (and a skip) when it cannot be. */
static int restart_service(conf_t* t) {
  if (!t->env->is_unix) return 1; /* embedded: every binding is gone, the next bind starts afresh */
  if (!t->env->restart_cmd) {
    conf_skip(t, "cannot restart an external daemon (no --restart-cmd / LLMSVC_CONF_RESTART_CMD)");
    return 0;
  }
  int rc = system(t->env->restart_cmd);
  if (rc != 0) conf_fail_at(t, __FILE__, __LINE__, "restart command '%s' exited %d", t->env->restart_cmd, rc);
  return rc == 0;
}

/* PERSIST-2: after the serving process restarts, a context is still there and reopens with
 * its tokens and turns; its KV comes back from storage or is recomputed (the call reports
 * which, and the service's counters agree); a deleted context stays deleted. */
static void reopen_after_restart(conf_t* t) {
  if (t->env->is_unix && !t->env->restart_cmd) {
    conf_skip(t, "cannot restart an external daemon (no --restart-cmd / LLMSVC_CONF_RESTART_CMD)");
    return;
  }
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  char id[80], gone[80];
  conf_unique_id(id, sizeof id, "restart");
  conf_unique_id(gone, sizeof gone, "restart-deleted");
  llmsvc_context* ctx = conf_new_context(t, svc, id, 0, NULL);
  llmsvc_context* del = conf_new_context(t, svc, gone, 1, NULL);
  CONF_REQUIRE(t, ctx && del);
  llmsvc_call_options o = conf_greedy(6);
  CONF_STATUS(t, llmsvc_call(ctx, "My favourite city is Lisbon, by the sea.", 40, &o, NULL, NULL, NULL), LLMSVC_OK);
  CONF_STATUS(t, llmsvc_call(ctx, "And my favourite food is bread.", 31, &o, NULL, NULL, NULL), LLMSVC_OK);
  llmsvc_context_info before = conf_info(t, svc, id);
  llmsvc_context_close(ctx);
  conf_close_and_delete(t, svc, del);
  llmsvc_unbind(svc);
  if (!restart_service(t)) return;

  svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  llmsvc_context_info after = conf_info(t, svc, id);
  CONF_CHECK(t, after.tokens == before.tokens && after.turns == before.turns && after.turns == 2,
             "tokens %d -> %d, turns %d -> %d", before.tokens, after.tokens, before.turns, after.turns);
  llmsvc_context_info gone_info;
  llmsvc_context_info_init(&gone_info);
  CONF_STATUS(t, llmsvc_context_info_get(svc, gone, &gone_info), LLMSVC_ERR_NOT_FOUND);
  llmsvc_stats s0;
  llmsvc_stats_init(&s0);
  CONF_STATUS(t, llmsvc_get_stats(svc, &s0), LLMSVC_OK);
  ctx = NULL;
  CONF_STATUS(t, llmsvc_context_open(svc, id, &ctx), LLMSVC_OK);
  if (ctx) {
    llmsvc_call_result r;
    llmsvc_call_result_init(&r);
    CONF_STATUS(t, llmsvc_call(ctx, "Where do I like to be?", 22, &o, NULL, NULL, &r), LLMSVC_OK);
    CONF_CHECK(t, r.context_tokens >= before.tokens + r.prompt_tokens + r.generated_tokens, "context %d after %d",
               r.context_tokens, before.tokens);
    CONF_CHECK(t, r.context_tokens == conf_info(t, svc, id).tokens);
    CONF_CHECK(t, r.chunks_loaded + r.chunks_recomputed > 0, "switch-in after a restart loaded %d, recomputed %d",
               r.chunks_loaded, r.chunks_recomputed);
    llmsvc_stats s1;
    llmsvc_stats_init(&s1);
    CONF_STATUS(t, llmsvc_get_stats(svc, &s1), LLMSVC_OK);
    CONF_CHECK(t, s1.chunks_loaded - s0.chunks_loaded == (uint64_t)r.chunks_loaded &&
                      s1.chunks_recomputed - s0.chunks_recomputed == (uint64_t)r.chunks_recomputed,
               "stats: loaded +%llu, recomputed +%llu", (unsigned long long)(s1.chunks_loaded - s0.chunks_loaded),
               (unsigned long long)(s1.chunks_recomputed - s0.chunks_recomputed));
  }
  conf_close_and_delete(t, svc, ctx);
  llmsvc_unbind(svc);
}

/* PERSIST-3: through the daemon, an open context handle survives a daemon restart: the next
 * call reconnects, reopens the context by id and goes on. */
static void handle_survives_daemon_restart(conf_t* t) {
  if (!t->env->is_unix) {
    conf_skip(t, "embedded: no serving process apart from the app");
    return;
  }
  if (!t->env->restart_cmd) {
    conf_skip(t, "cannot restart an external daemon (no --restart-cmd / LLMSVC_CONF_RESTART_CMD)");
    return;
  }
  conf_fixture f;
  CONF_REQUIRE(t, conf_setup(t, &f, "survivor", 1));
  llmsvc_call_options o = conf_greedy(3);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  CONF_STATUS(t, llmsvc_call(f.ctx, "A, B, C,", 8, &o, NULL, NULL, &r), LLMSVC_OK);
  const int32_t tokens = r.context_tokens;
  if (restart_service(t)) {
    llmsvc_call_result_init(&r);
    CONF_STATUS(t, llmsvc_call(f.ctx, " D,", 3, &o, NULL, NULL, &r), LLMSVC_OK);
    CONF_CHECK(t, r.context_tokens == tokens + r.prompt_tokens + r.generated_tokens, "context %d after %d",
               r.context_tokens, tokens);
  }
  conf_teardown(t, &f);
}

const conf_test conf_persist_tests[] = {
    {"PERSIST-1", "close and reopen by id: same state, and it goes on", close_and_reopen},
    {"PERSIST-2", "after a restart of the serving process: same state, reopened, KV restored", reopen_after_restart},
    {"PERSIST-3", "daemon: an open handle survives a daemon restart", handle_survives_daemon_restart},
    {NULL, NULL, NULL}};
