// SPDX-License-Identifier: Apache-2.0
/* test_token_stream.c — TOKS-*: streaming with token ids (llmsvc_call_options.on_tokens): every
 * generated token in the pieces, the same text as llmsvc_token_fn's, log-probabilities on
 * request, cancellation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "tests.h"

/* A prompt whose reply has code points of several tokens each, so that a piece holds several
 * ids (the example: 12 tokens in 6 pieces). */
static const char kJapanesePrompt[] = "\xe6\x97\xa5\xe6\x9c\xac\xe3\x81\xae\xe9\xa6\x96\xe9\x83\xbd\xe3\x81\xaf\xe3\x81\xa9"
                                      "\xe3\x81\x93\xe3\x81\xa7\xe3\x81\x99\xe3\x81\x8b\xef\xbc\x9f";

/* What the token pieces of one call brought. */
typedef struct toks {
  char text[8192];
  size_t len;
  int32_t ids[1024];
  float lps[1024];
  int n_ids;
  int n_lps;
  int pieces;
  int empty_pieces;      /* pieces without text */
  int empty_not_last;    /* ... followed by another piece */
  int last_token[256];   /* per piece with text: its last id (-1 without ids) */
  int bad_struct;        /* struct_size below the 1.2 struct */
  int cancel_after;      /* > 0: return non-zero from this piece (1-based) */
  int after_cancel;
} toks;

static int collect_toks(const llmsvc_piece* p, void* user) {
  toks* c = user;
  if (c->cancel_after > 0 && c->pieces >= c->cancel_after) c->after_cancel++;
  if (p->struct_size < sizeof(llmsvc_piece)) c->bad_struct++;
  if (c->empty_pieces > 0) c->empty_not_last++;
  if (p->len == 0) c->empty_pieces++;
  if (p->len > 0 && c->pieces < 256) c->last_token[c->pieces] = p->n_tokens ? p->tokens[p->n_tokens - 1] : -1;
  if (c->len + p->len < sizeof c->text) {
    memcpy(c->text + c->len, p->text, p->len);
    c->len += p->len;
  }
  for (size_t k = 0; k < p->n_tokens && c->n_ids < 1024; k++) {
    c->ids[c->n_ids++] = p->tokens[k];
    if (p->logprobs) c->lps[c->n_lps++] = p->logprobs[k];
  }
  c->pieces++;
  return c->cancel_after > 0 && c->pieces == c->cancel_after;
}

/* One greedy call of `prompt` on a fresh context with both callbacks; the status. */
static llmsvc_status call_both(conf_t* t, llmsvc_service* svc, const char* prompt, int raw, int32_t max_tokens,
                               int logprobs, const char* stop, conf_text* old, toks* c, llmsvc_call_result* r) {
  char id[80];
  conf_unique_id(id, sizeof id, "toks");
  llmsvc_context* ctx = conf_new_context(t, svc, id, raw, NULL);
  if (!ctx) return LLMSVC_ERR_INTERNAL;
  llmsvc_call_options o = conf_greedy(max_tokens);
  o.on_tokens = collect_toks;
  o.on_tokens_user = c;
  o.logprobs = logprobs;
  const char* stops[] = {stop};
  if (stop) {
    o.stop = stops;
    o.n_stop = 1;
  }
  llmsvc_call_result_init(r);
  llmsvc_status st = llmsvc_call(ctx, prompt, strlen(prompt), &o, old ? conf_collect : NULL, old, r);
  conf_close_and_delete(t, svc, ctx);
  return st;
}

/* TOKS-1: the pieces' ids are every generated token (as many as generated_tokens); their text
 * is llmsvc_token_fn's text, piece for piece, each piece with text ending in the token the old
 * callback names (where it names one); a piece holds several ids where a code point takes
 * several tokens. */
static void every_token_in_pieces(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  conf_text old;
  conf_text_init(&old);
  toks* c = calloc(1, sizeof *c);
  CONF_REQUIRE(t, c != NULL);
  llmsvc_call_result r;
  CONF_STATUS(t, call_both(t, svc, kJapanesePrompt, 0, 12, 0, NULL, &old, c, &r), LLMSVC_OK);
  CONF_CHECK(t, c->n_ids == r.generated_tokens && r.generated_tokens == 12, "%d ids, %d generated", c->n_ids,
             r.generated_tokens);
  CONF_CHECK(t, c->len == old.len && memcmp(c->text, old.data, old.len) == 0, "texts differ: '%s' / '%s'", old.data,
             c->text);
  CONF_CHECK(t, c->pieces - c->empty_pieces == old.pieces, "%d pieces with text, %d old", c->pieces - c->empty_pieces,
             old.pieces);
  for (int k = 0; k < old.pieces && k < 256; k++)  /* (-1: the end's held-back text, no token completes it) */
    CONF_CHECK(t, old.tokens[k] < 0 || c->last_token[k] == old.tokens[k], "piece %d ends in %d, the old callback says %d",
               k, c->last_token[k], old.tokens[k]);
  CONF_CHECK(t, old.pieces < c->n_ids, "%d pieces for %d ids: no piece of several tokens", old.pieces, c->n_ids);
  CONF_CHECK(t, c->n_lps == 0, "log-probabilities without asking");
  CONF_CHECK(t, c->bad_struct == 0);
  conf_text_free(&old);
  free(c);
  llmsvc_unbind(svc);
}

/* TOKS-2: the tokens whose text never streams come in a last piece without text: a chat reply
 * that ends by itself ends with the end-of-turn token (eos or eot of llmsvc_model_info); a stop
 * string's tokens are there too; no piece without text comes before another. */
static void untexted_tokens_last(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  llmsvc_model_info info;
  llmsvc_model_info_init(&info);
  CONF_STATUS(t, llmsvc_model_info_get(svc, &info), LLMSVC_OK);
  toks* c = calloc(2, sizeof *c);
  CONF_REQUIRE(t, c != NULL);
  llmsvc_call_result r;
  CONF_STATUS(t, call_both(t, svc, "Reply with the single word: yes", 0, 48, 0, NULL, NULL, &c[0], &r), LLMSVC_OK);
  CONF_CHECK(t, r.finish_reason == LLMSVC_FINISH_EOS, "finish %d (the test needs a reply that ends)", r.finish_reason);
  CONF_CHECK(t, c[0].n_ids == r.generated_tokens, "%d ids, %d generated", c[0].n_ids, r.generated_tokens);
  const int32_t last = c[0].n_ids > 0 ? c[0].ids[c[0].n_ids - 1] : -1;
  CONF_CHECK(t, last == info.eos.id || last == info.eot.id, "last id %d, eos %d, eot %d", last, info.eos.id, info.eot.id);
  CONF_CHECK(t, c[0].empty_pieces == 1 && c[0].empty_not_last == 0, "%d pieces without text, %d not last",
             c[0].empty_pieces, c[0].empty_not_last);
  /* A stop string cuts the text, not the ids. */
  conf_text full;
  CONF_STATUS(t, conf_call_fresh(t, svc, "Monday, Tuesday, Wednesday,", 1, 16, &full, NULL), LLMSVC_OK);
  if (full.len >= 8) {
    char stop[4];
    memcpy(stop, full.data + full.len / 2, 3);
    stop[3] = '\0';
    CONF_STATUS(t, call_both(t, svc, "Monday, Tuesday, Wednesday,", 1, 16, 0, stop, NULL, &c[1], &r), LLMSVC_OK);
    CONF_CHECK(t, r.finish_reason == LLMSVC_FINISH_STOP && c[1].n_ids == r.generated_tokens, "finish %d, %d ids of %d",
               r.finish_reason, c[1].n_ids, r.generated_tokens);
    CONF_CHECK(t, c[1].empty_not_last == 0 && strstr(c[1].text, stop) == NULL);
  }
  conf_text_free(&full);
  free(c);
  llmsvc_unbind(svc);
}

/* TOKS-3: logprobs on request: one per id, finite and <= 0; asking for them changes nothing
 * else (the same ids, greedy); the greedy choice of a confident continuation is likely. */
static void logprobs(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  toks* c = calloc(2, sizeof *c);
  CONF_REQUIRE(t, c != NULL);
  llmsvc_call_result r[2];
  const char* prompt = "1, 2, 3, 4, 5,";
  CONF_STATUS(t, call_both(t, svc, prompt, 1, 8, 0, NULL, NULL, &c[0], &r[0]), LLMSVC_OK);
  CONF_STATUS(t, call_both(t, svc, prompt, 1, 8, 1, NULL, NULL, &c[1], &r[1]), LLMSVC_OK);
  CONF_CHECK(t, c[0].n_ids == 8 && c[1].n_ids == 8 && memcmp(c[0].ids, c[1].ids, sizeof c[0].ids[0] * 8) == 0,
             "the ids changed with logprobs");
  CONF_CHECK(t, c[1].n_lps == c[1].n_ids, "%d log-probabilities for %d ids", c[1].n_lps, c[1].n_ids);
  float best = -1e30f;
  for (int k = 0; k < c[1].n_lps; k++) {
    CONF_CHECK(t, isfinite(c[1].lps[k]) && c[1].lps[k] <= 0.0f, "logprob %g", (double)c[1].lps[k]);
    if (c[1].lps[k] > best) best = c[1].lps[k];
  }
  /* " 6" after "1, 2, 3, 4, 5," is near certain for any model worth testing. */
  CONF_CHECK(t, c[1].n_lps > 0 && c[1].lps[0] > logf(0.5f), "first token's probability %g", (double)expf(c[1].lps[0]));
  CONF_CHECK(t, best > logf(0.5f));
  free(c);
  llmsvc_unbind(svc);
}

/* TOKS-4: a non-zero return from on_tokens cancels: CANCELLED, finish CANCELLED, no piece of
 * either callback after it; max_tokens 0 calls it not at all. */
static void cancel_and_prefill(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  toks* c = calloc(2, sizeof *c);
  CONF_REQUIRE(t, c != NULL);
  conf_text old;
  conf_text_init(&old);
  c[0].cancel_after = 2;
  llmsvc_call_result r;
  CONF_STATUS(t, call_both(t, svc, "Count: one, two, three, four, five, six", 1, 32, 0, NULL, &old, &c[0], &r),
              LLMSVC_ERR_CANCELLED);
  CONF_CHECK(t, r.finish_reason == LLMSVC_FINISH_CANCELLED, "finish %d", r.finish_reason);
  CONF_CHECK(t, c[0].pieces == 2 && c[0].after_cancel == 0 && old.pieces == 2, "%d token pieces, %d old pieces",
             c[0].pieces, old.pieces);
  CONF_STATUS(t, call_both(t, svc, "Just read this.", 1, 0, 1, NULL, NULL, &c[1], &r), LLMSVC_OK);
  CONF_CHECK(t, c[1].pieces == 0 && r.generated_tokens == 0, "%d pieces", c[1].pieces);
  conf_text_free(&old);
  free(c);
  llmsvc_unbind(svc);
}

const conf_test conf_token_stream_tests[] = {
    {"TOKS-1", "on_tokens: every generated id, the old callback's text piece for piece, several ids a piece", every_token_in_pieces},
    {"TOKS-2", "ids whose text never streams (end of turn, stop string) come last, in a piece without text", untexted_tokens_last},
    {"TOKS-3", "logprobs on request: one per id, finite, <= 0; the ids unchanged", logprobs},
    {"TOKS-4", "on_tokens returning non-zero cancels (nothing after it); max_tokens 0: no piece", cancel_and_prefill},
    {NULL, NULL, NULL}};
