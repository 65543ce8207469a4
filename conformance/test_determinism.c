// SPDX-License-Identifier: Apache-2.0
/* test_determinism.c — DET-*: same seed and same state give the same tokens; greedy output
 * is the same through every transport. */
#include <string.h>

#include "support.h"
#include "tests.h"

/* One call on a fresh context with `o`, collected into `out`. */
static llmsvc_status call_with(conf_t* t, llmsvc_service* svc, const char* prompt, int raw, llmsvc_call_options* o,
                               conf_text* out) {
  conf_text_init(out);
  char id[80];
  conf_unique_id(id, sizeof id, "det");
  llmsvc_context* ctx = conf_new_context(t, svc, id, raw, NULL);
  if (!ctx) return LLMSVC_ERR_INTERNAL;
  llmsvc_status st = llmsvc_call(ctx, prompt, strlen(prompt), o, conf_collect, out, NULL);
  conf_close_and_delete(t, svc, ctx);
  return st;
}

/* DET-1: greedy sampling on the same state gives the same tokens, twice. */
static void greedy_repeats(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  conf_text a, b;
  CONF_STATUS(t, conf_call_fresh(t, svc, "What is the capital of France?", 0, 12, &a, NULL), LLMSVC_OK);
  CONF_STATUS(t, conf_call_fresh(t, svc, "What is the capital of France?", 0, 12, &b, NULL), LLMSVC_OK);
  CONF_CHECK(t, a.pieces > 0 && conf_same_tokens(&a, &b), "'%s' vs '%s'", a.data, b.data);
  conf_text_free(&a);
  conf_text_free(&b);
  llmsvc_unbind(svc);
}

/* DET-2: sampling with temperature: the same seed gives the same tokens. */
static void same_seed_same_tokens(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  llmsvc_call_options o = conf_greedy(16);
  o.temperature = 0.9f;
  o.top_k = 40;
  o.top_p = 0.95f;
  o.seed = 1234567;
  conf_text a, b;
  CONF_STATUS(t, call_with(t, svc, "Once upon a time", 1, &o, &a), LLMSVC_OK);
  CONF_STATUS(t, call_with(t, svc, "Once upon a time", 1, &o, &b), LLMSVC_OK);
  CONF_CHECK(t, a.pieces > 0 && conf_same_tokens(&a, &b), "'%s' vs '%s'", a.data, b.data);
  conf_text_free(&a);
  conf_text_free(&b);
  llmsvc_unbind(svc);
}

/* DET-3: the same conversation on two contexts gives the same second reply (state, not only
 * the prompt, decides the tokens). */
static void same_conversation(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  conf_text second[2];
  for (int k = 0; k < 2; k++) {
    char id[80];
    conf_unique_id(id, sizeof id, "conv");
    conf_text_init(&second[k]);
    llmsvc_context* ctx = conf_new_context(t, svc, id, 0, "You are brief.");
    if (!ctx) continue;
    llmsvc_call_options o = conf_greedy(8);
    CONF_STATUS(t, llmsvc_call(ctx, "My name is Ada.", 15, &o, NULL, NULL, NULL), LLMSVC_OK);
    CONF_STATUS(t, llmsvc_call(ctx, "What is my name?", 16, &o, conf_collect, &second[k], NULL), LLMSVC_OK);
    conf_close_and_delete(t, svc, ctx);
  }
  CONF_CHECK(t, second[0].pieces > 0 && conf_same_tokens(&second[0], &second[1]), "'%s' vs '%s'", second[0].data,
             second[1].data);
  conf_text_free(&second[0]);
  conf_text_free(&second[1]);
  llmsvc_unbind(svc);
}

/* DET-4: greedy output is identical through the target and the comparison target (embedded
 * against the daemon): same tokens, same text, chat and raw. */
static void same_across_transports(conf_t* t) {
  if (!t->env->compare_target) {
    conf_skip(t, "no comparison target (--compare-with TARGET)");
    return;
  }
  llmsvc_service* a = conf_bind(t, t->env->target);
  llmsvc_service* b = conf_bind(t, t->env->compare_target);
  if (a && b) {
    const char* prompts[] = {"Name three colors.", "The quick brown fox"};
    for (int raw = 0; raw < 2; raw++) {
      conf_text x, y;
      CONF_STATUS(t, conf_call_fresh(t, a, prompts[raw], raw, 12, &x, NULL), LLMSVC_OK);
      CONF_STATUS(t, conf_call_fresh(t, b, prompts[raw], raw, 12, &y, NULL), LLMSVC_OK);
      CONF_CHECK(t, x.pieces > 0 && conf_same_tokens(&x, &y), "%s: '%s' vs %s: '%s'", t->env->target, x.data,
                 t->env->compare_target, y.data);
      conf_text_free(&x);
      conf_text_free(&y);
    }
  }
  llmsvc_unbind(a);
  llmsvc_unbind(b);
}

const conf_test conf_determinism_tests[] = {
    {"DET-1", "greedy: the same state gives the same tokens", greedy_repeats},
    {"DET-2", "sampling: the same seed gives the same tokens", same_seed_same_tokens},
    {"DET-3", "the same conversation gives the same reply", same_conversation},
    {"DET-4", "greedy output identical through both transports", same_across_transports},
    {NULL, NULL, NULL}};
