// SPDX-License-Identifier: Apache-2.0
/* test_fork.c — FORK-*: llmsvc_context_fork (since ABI 1.4): a fork holds its parent's
 * conversation and answers as it would, each goes on alone, a fork outlives its parent and
 * persists, shared chunks count once in the service's KV bytes, and the refusals. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "support.h"
#include "tests.h"

/* A prompt long enough to fill several KV chunks whatever the chunk size. */
static const char kLongPrompt[] =
    "The lighthouse keeper wrote in his log every evening: the wind from the north, the colour "
    "of the sea, the ships that passed and the ones that did not. Over forty years the log grew "
    "to twelve volumes, and when he retired he gave them to the village library, where children "
    "read them on rainy afternoons and argued about which storm had been the worst. Summarise.";

/* One greedy call collecting its pieces into `out` (initialised here). */
static llmsvc_status say(llmsvc_context* ctx, const char* prompt, int32_t max_tokens, conf_text* out) {
  conf_text_init(out);
  llmsvc_call_options o = conf_greedy(max_tokens);
  return llmsvc_call(ctx, prompt, strlen(prompt), &o, conf_collect, out, NULL);
}

static uint64_t kv_bytes(conf_t* t, llmsvc_service* svc) {
  llmsvc_stats s;
  llmsvc_stats_init(&s);
  CONF_STATUS(t, llmsvc_get_stats(svc, &s), LLMSVC_OK);
  return s.kv_bytes;
}

/* The messages of a context joined into one string "role:content|..." (truncated at size). */
static int join_msg(const llmsvc_message* m, void* user) {
  char* buf = user;
  size_t used = strlen(buf);
  snprintf(buf + used, 2048 - used, "%d:%.*s|", (int)m->role, (int)m->content_len, m->content);
  return 0;
}

static void conversation(conf_t* t, llmsvc_context* ctx, char out[2048]) {
  out[0] = '\0';
  CONF_STATUS(t, llmsvc_context_messages(ctx, 0, join_msg, out), LLMSVC_OK);
}

/* FORK-1: a fork has its parent's id-free state: mode, tokens, conversation; two forks answer
 * a prompt with the same tokens, and their first token is the one the parent gives. */
static void fork_answers_as_parent(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "fork1", 0)) return;
  conf_text first;
  CONF_STATUS(t, say(f.ctx, kLongPrompt, 8, &first), LLMSVC_OK);
  conf_text_free(&first);
  llmsvc_context *a = NULL, *b = NULL;
  char b_id[80];
  conf_unique_id(b_id, sizeof b_id, "fork1-b");
  CONF_STATUS(t, llmsvc_context_fork(f.ctx, NULL, &a), LLMSVC_OK);
  CONF_STATUS(t, llmsvc_context_fork(f.ctx, b_id, &b), LLMSVC_OK);
  if (a && b) {
    CONF_CHECK(t, strcmp(llmsvc_context_id(b), b_id) == 0, "the fork is named %s", llmsvc_context_id(b));
    CONF_CHECK(t, strcmp(llmsvc_context_id(a), f.id) != 0 && strcmp(llmsvc_context_id(a), b_id) != 0,
               "a fresh id: %s", llmsvc_context_id(a));
    const llmsvc_context_info pi = conf_info(t, f.svc, f.id), ai = conf_info(t, f.svc, llmsvc_context_id(a));
    CONF_CHECK(t, ai.tokens == pi.tokens && ai.turns == pi.turns && ai.raw == pi.raw, "tokens %d/%d turns %d/%d",
               ai.tokens, pi.tokens, ai.turns, pi.turns);
    static char pm[2048], am[2048];
    conversation(t, f.ctx, pm);
    conversation(t, a, am);
    CONF_CHECK(t, strcmp(pm, am) == 0, "parent [%s] fork [%s]", pm, am);
    conf_text ra, rb, rp;
    CONF_STATUS(t, say(a, "And in one word?", 6, &ra), LLMSVC_OK);
    CONF_STATUS(t, say(b, "And in one word?", 6, &rb), LLMSVC_OK);
    CONF_STATUS(t, say(f.ctx, "And in one word?", 6, &rp), LLMSVC_OK);
    CONF_CHECK(t, ra.pieces > 0 && conf_same_tokens(&ra, &rb), "twin forks answered [%s] and [%s]", ra.data, rb.data);
    CONF_CHECK(t, ra.pieces > 0 && rp.pieces > 0 && ra.tokens[0] == rp.tokens[0], "fork [%s] parent [%s]", ra.data,
               rp.data);
    conf_text_free(&ra);
    conf_text_free(&rb);
    conf_text_free(&rp);
  }
  conf_close_and_delete(t, f.svc, a);
  conf_close_and_delete(t, f.svc, b);
  conf_teardown(t, &f);
}

/* FORK-2: after the fork each goes on alone: a call on the fork leaves the parent's tokens and
 * conversation as they were, and a call on the parent leaves the fork's. A raw context forks
 * too. */
static void forks_diverge(conf_t* t) {
  for (int raw = 0; raw <= 1; raw++) {
    conf_fixture f;
    if (!conf_setup(t, &f, raw ? "fork2-raw" : "fork2", raw)) return;
    conf_text out;
    CONF_STATUS(t, say(f.ctx, kLongPrompt, 4, &out), LLMSVC_OK);
    conf_text_free(&out);
    llmsvc_context* c = NULL;
    CONF_STATUS(t, llmsvc_context_fork(f.ctx, NULL, &c), LLMSVC_OK);
    if (c) {
      const int base = conf_info(t, f.svc, f.id).tokens;
      static char before[2048], after[2048];
      before[0] = after[0] = '\0';
      if (!raw) conversation(t, f.ctx, before);
      CONF_STATUS(t, say(c, " Then the fork goes on.", 4, &out), LLMSVC_OK);
      conf_text_free(&out);
      if (!raw) conversation(t, f.ctx, after);
      CONF_CHECK(t, conf_info(t, f.svc, f.id).tokens == base, "the parent grew with its fork");
      CONF_CHECK(t, strcmp(before, after) == 0, "the parent's conversation changed: [%s]", after);
      const int forked = conf_info(t, f.svc, llmsvc_context_id(c)).tokens;
      CONF_CHECK(t, forked > base, "the fork holds %d tokens, the parent %d", forked, base);
      CONF_STATUS(t, say(f.ctx, " The parent goes on.", 4, &out), LLMSVC_OK);
      conf_text_free(&out);
      CONF_CHECK(t, conf_info(t, f.svc, llmsvc_context_id(c)).tokens == forked, "the fork grew with its parent");
    }
    conf_close_and_delete(t, f.svc, c);
    conf_teardown(t, &f);
  }
}

/* FORK-3: a fork outlives its parent: deleted, the parent is gone and the fork answers, its
 * conversation whole; from a new binding the fork opens with the same conversation. */
static void fork_outlives_parent(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "fork3", 0)) return;
  conf_text out;
  CONF_STATUS(t, say(f.ctx, kLongPrompt, 6, &out), LLMSVC_OK);
  conf_text_free(&out);
  llmsvc_context* c = NULL;
  CONF_STATUS(t, llmsvc_context_fork(f.ctx, NULL, &c), LLMSVC_OK);
  if (!c) {
    conf_teardown(t, &f);
    return;
  }
  char fork_id[80];
  snprintf(fork_id, sizeof fork_id, "%s", llmsvc_context_id(c));
  static char forked[2048];
  conversation(t, c, forked);
  conf_close_and_delete(t, f.svc, f.ctx);
  f.ctx = NULL;
  llmsvc_context_info gone;
  llmsvc_context_info_init(&gone);
  CONF_STATUS(t, llmsvc_context_info_get(f.svc, f.id, &gone), LLMSVC_ERR_NOT_FOUND);
  CONF_STATUS(t, say(c, "Who read the logs?", 6, &out), LLMSVC_OK);
  CONF_CHECK(t, out.pieces > 0, "no reply from the fork");
  conf_text_free(&out);
  const int tokens = conf_info(t, f.svc, fork_id).tokens;
  llmsvc_context_close(c);
  llmsvc_unbind(f.svc);
  f.svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, f.svc != NULL);
  CONF_STATUS(t, llmsvc_context_open(f.svc, fork_id, &f.ctx), LLMSVC_OK);
  if (f.ctx) {
    static char reread[2048];
    conversation(t, f.ctx, reread);
    CONF_CHECK(t, strncmp(reread, forked, strlen(forked)) == 0, "reopened: [%s]", reread);
    CONF_CHECK(t, conf_info(t, f.svc, fork_id).tokens == tokens);
  }
  conf_teardown(t, &f);
}

/* FORK-4: the fork shares the parent's resident chunks: the fork reports chunks_shared > 0,
 * the service's kv_bytes does not grow with the fork alone, and a fork's short call grows it by
 * less than the prefix. */
static void forks_share_memory(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "fork4", 1)) return;
  conf_text out;
  CONF_STATUS(t, say(f.ctx, kLongPrompt, 1, &out), LLMSVC_OK);
  conf_text_free(&out);
  const llmsvc_context_info pi = conf_info(t, f.svc, f.id);
  const uint64_t before = kv_bytes(t, f.svc);
  llmsvc_context* c = NULL;
  CONF_STATUS(t, llmsvc_context_fork(f.ctx, NULL, &c), LLMSVC_OK);
  if (c) {
    const uint64_t forked = kv_bytes(t, f.svc);
    CONF_CHECK(t, forked == before, "kv_bytes %llu -> %llu by the fork alone", (unsigned long long)before,
               (unsigned long long)forked);
    const llmsvc_context_info ci = conf_info(t, f.svc, llmsvc_context_id(c));
    CONF_CHECK(t, ci.chunks_shared > 0 && ci.chunks_shared <= ci.chunks_resident, "shared %d of %d resident",
               ci.chunks_shared, ci.chunks_resident);
    CONF_CHECK(t, conf_info(t, f.svc, f.id).chunks_shared == ci.chunks_shared, "the parent shares %d",
               conf_info(t, f.svc, f.id).chunks_shared);
    CONF_STATUS(t, say(c, " And", 2, &out), LLMSVC_OK);
    conf_text_free(&out);
    const uint64_t grown = kv_bytes(t, f.svc) - before;
    CONF_CHECK(t, grown < pi.kv_resident_bytes, "a 2-token call on the fork grew kv_bytes by %llu, the prefix is %llu",
               (unsigned long long)grown, (unsigned long long)pi.kv_resident_bytes);
  }
  conf_close_and_delete(t, f.svc, c);
  /* With the fork gone, the parent holds its chunks alone. */
  CONF_CHECK(t, conf_info(t, f.svc, f.id).chunks_shared == 0, "still shared after the fork's deletion");
  conf_teardown(t, &f);
}

/* FORK-5: refusals, nothing created: NULL parent or out (INVALID_ARGUMENT), an id in use
 * (EXISTS), an id the service cannot take (INVALID_ARGUMENT), a parent inside a call (BUSY,
 * tried from a second handle while the first call waits in its callback). */
typedef struct fork_probe {
  llmsvc_context* other; /* a second handle on the parent */
  llmsvc_status status;
  int tried;
} fork_probe;

static void* fork_thread(void* arg) {
  fork_probe* p = arg;
  llmsvc_context* out = NULL;
  p->status = llmsvc_context_fork(p->other, NULL, &out);
  if (out) llmsvc_context_close(out);
  return NULL;
}

static int fork_while_busy(const char* piece, size_t len, int32_t token, void* user) {
  (void)piece;
  (void)len;
  (void)token;
  fork_probe* p = user;
  if (!p->tried) {
    p->tried = 1;
    pthread_t th;
    if (pthread_create(&th, NULL, fork_thread, p) == 0) pthread_join(th, NULL);
  }
  return 0;
}

static void fork_refusals(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "fork5", 0)) return;
  conf_text out;
  CONF_STATUS(t, say(f.ctx, "Hello.", 2, &out), LLMSVC_OK);
  conf_text_free(&out);
  const int n0 = conf_count_contexts(t, f.svc);
  llmsvc_context* c = NULL;
  CONF_STATUS(t, llmsvc_context_fork(NULL, NULL, &c), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_fork(f.ctx, NULL, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_fork(f.ctx, f.id, &c), LLMSVC_ERR_EXISTS);
  CONF_STATUS(t, llmsvc_context_fork(f.ctx, "../escape", &c), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_fork(f.ctx, "", &c), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, c == NULL, "a handle came with a refusal");
  fork_probe p;
  memset(&p, 0, sizeof p);
  CONF_STATUS(t, llmsvc_context_open(f.svc, f.id, &p.other), LLMSVC_OK);
  if (p.other) {
    llmsvc_call_options o = conf_greedy(3);
    CONF_STATUS(t, llmsvc_call(f.ctx, "Again.", 6, &o, fork_while_busy, &p, NULL), LLMSVC_OK);
    CONF_CHECK(t, p.tried, "no piece came");
    CONF_CHECK(t, p.status == LLMSVC_ERR_BUSY, "a fork inside a call gave %s", llmsvc_status_name(p.status));
    llmsvc_context_close(p.other);
  }
  CONF_CHECK(t, conf_count_contexts(t, f.svc) == n0, "%d contexts, %d before the refusals", conf_count_contexts(t, f.svc), n0);
  conf_teardown(t, &f);
}

const conf_test conf_fork_tests[] = {
    {"FORK-1", "a fork holds the parent's tokens and conversation; twin forks answer alike, as the parent starts",
     fork_answers_as_parent},
    {"FORK-2", "parent and fork go on alone, chat and raw", forks_diverge},
    {"FORK-3", "a fork outlives its deleted parent and persists across a new binding", fork_outlives_parent},
    {"FORK-4", "shared chunks: chunks_shared reported, kv_bytes unchanged by the fork, suffixes only", forks_share_memory},
    {"FORK-5", "fork refusals: NULLs, EXISTS, a bad id, BUSY inside a call; nothing created", fork_refusals},
    {NULL, NULL, NULL},
};
