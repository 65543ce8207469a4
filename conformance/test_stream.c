// SPDX-License-Identifier: Apache-2.0
/* test_stream.c — STREAM-*: the pieces of a reply: valid UTF-8 one by one, in order, the
 * reply itself (a longer reply extends a shorter one), stop strings, max_tokens. */
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "tests.h"

/* A chat prompt the model answers with emoji: 4-byte code points made of several byte-level
 * tokens each, so pieces must hold bytes back. */
static const char kEmojiPrompt[] = "Write three emoji.";

/* STREAM-1: every piece is valid UTF-8 on its own (no code point split), and so is the reply. */
static void pieces_are_utf8(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  conf_text c;
  llmsvc_call_result r;
  CONF_STATUS(t, conf_call_fresh(t, svc, kEmojiPrompt, 0, 16, &c, &r), LLMSVC_OK);
  CONF_CHECK(t, c.pieces > 0 && c.invalid_pieces == 0, "%d of %d pieces not UTF-8", c.invalid_pieces, c.pieces);
  CONF_CHECK(t, conf_utf8_valid(c.data, c.len));
  /* Without a multi-byte code point in the reply this test would prove nothing. */
  int non_ascii = 0;
  for (size_t i = 0; i < c.len; i++) non_ascii |= (unsigned char)c.data[i] >= 0x80;
  CONF_CHECK(t, non_ascii, "the reply has no multi-byte code point: '%s'", c.data);
  CONF_CHECK(t, c.pieces <= r.generated_tokens, "%d pieces for %d tokens", c.pieces, r.generated_tokens);
  conf_text_free(&c);
  llmsvc_unbind(svc);
}

/* STREAM-2: the pieces are the reply, in order: with greedy sampling, the pieces of a short
 * reply are the first pieces of a longer one. */
static void shorter_reply_is_prefix(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  conf_text s, l;
  llmsvc_call_result rs, rl;
  CONF_STATUS(t, conf_call_fresh(t, svc, "The three primary colors are", 1, 6, &s, &rs), LLMSVC_OK);
  CONF_STATUS(t, conf_call_fresh(t, svc, "The three primary colors are", 1, 14, &l, &rl), LLMSVC_OK);
  CONF_CHECK(t, rs.generated_tokens == 6 && rl.generated_tokens == 14, "%d / %d tokens", rs.generated_tokens,
             rl.generated_tokens);
  CONF_CHECK(t, s.len < l.len && memcmp(s.data, l.data, s.len) == 0, "'%s' does not start '%s'", l.data, s.data);
  CONF_CHECK(t, s.pieces <= l.pieces && memcmp(s.tokens, l.tokens, sizeof s.tokens[0] * (size_t)s.pieces) == 0,
             "token order differs");
  conf_text_free(&s);
  conf_text_free(&l);
  llmsvc_unbind(svc);
}

/* STREAM-3: a stop string ends the reply before it (it is not part of the output) with finish
 * reason STOP. The stop string is taken from the middle of the unstopped greedy reply. */
static void stop_string(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  const char* prompt = "Monday, Tuesday, Wednesday,";
  conf_text full;
  CONF_STATUS(t, conf_call_fresh(t, svc, prompt, 1, 16, &full, NULL), LLMSVC_OK);
  CONF_REQUIRE(t, full.len >= 8, "reply too short to cut: '%s'", full.data);
  char stop[4];
  memcpy(stop, full.data + full.len / 2, 3);
  stop[3] = '\0';
  size_t cut = (size_t)(strstr(full.data, stop) - full.data);
  char id[80];
  conf_unique_id(id, sizeof id, "stop");
  llmsvc_context* ctx = conf_new_context(t, svc, id, 1, NULL);
  if (ctx) {
    const char* stops[] = {"never appears \xe2\x9c\x93", stop};
    llmsvc_call_options o = conf_greedy(16);
    o.stop = stops;
    o.n_stop = 2;
    conf_text c;
    conf_text_init(&c);
    llmsvc_call_result r;
    llmsvc_call_result_init(&r);
    CONF_STATUS(t, llmsvc_call(ctx, prompt, strlen(prompt), &o, conf_collect, &c, &r), LLMSVC_OK);
    CONF_CHECK(t, r.finish_reason == LLMSVC_FINISH_STOP, "finish reason %d", r.finish_reason);
    CONF_CHECK(t, c.len == cut && memcmp(c.data, full.data, cut) == 0, "stop '%s': got '%s', expected the first %zu bytes of '%s'",
               stop, c.data, cut, full.data);
    CONF_CHECK(t, strstr(c.data, stop) == NULL);
    conf_text_free(&c);
  }
  conf_close_and_delete(t, svc, ctx);
  conf_text_free(&full);
  llmsvc_unbind(svc);
}

/* STREAM-4: max_tokens 0 is prefill only: no piece, no token generated, the prompt kept. */
static void prefill_only(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  conf_text c;
  llmsvc_call_result r;
  CONF_STATUS(t, conf_call_fresh(t, svc, "Just read this.", 1, 0, &c, &r), LLMSVC_OK);
  CONF_CHECK(t, c.pieces == 0 && r.generated_tokens == 0, "%d pieces, %d tokens", c.pieces, r.generated_tokens);
  CONF_CHECK(t, r.prompt_tokens > 0 && r.context_tokens == r.prompt_tokens, "prompt %d, context %d", r.prompt_tokens,
             r.context_tokens);
  conf_text_free(&c);
  llmsvc_unbind(svc);
}

/* STREAM-5: max_tokens bounds the reply; reaching it is finish reason LENGTH. */
static void max_tokens_length(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  conf_text c;
  llmsvc_call_result r;
  CONF_STATUS(t, conf_call_fresh(t, svc, "1, 2, 3, 4,", 1, 5, &c, &r), LLMSVC_OK);
  CONF_CHECK(t, r.generated_tokens == 5 && r.finish_reason == LLMSVC_FINISH_LENGTH, "%d tokens, finish %d",
             r.generated_tokens, r.finish_reason);
  conf_text_free(&c);
  /* A chat reply that ends by itself is EOS, within the limit. */
  CONF_STATUS(t, conf_call_fresh(t, svc, "Reply with the single word: yes", 0, 48, &c, &r), LLMSVC_OK);
  CONF_CHECK(t, r.generated_tokens <= 48);
  CONF_CHECK(t, r.finish_reason == LLMSVC_FINISH_EOS || r.finish_reason == LLMSVC_FINISH_LENGTH, "finish %d",
             r.finish_reason);
  CONF_CHECK(t, r.finish_reason != LLMSVC_FINISH_LENGTH || r.generated_tokens == 48);
  conf_text_free(&c);
  llmsvc_unbind(svc);
}

const conf_test conf_stream_tests[] = {
    {"STREAM-1", "each piece is valid UTF-8 (no split code point); the reply too", pieces_are_utf8},
    {"STREAM-2", "pieces arrive in order: a shorter greedy reply is a prefix of a longer", shorter_reply_is_prefix},
    {"STREAM-3", "a stop string ends the reply before it, finish reason STOP", stop_string},
    {"STREAM-4", "max_tokens 0 is prefill only: no piece, prompt kept", prefill_only},
    {"STREAM-5", "max_tokens bounds the reply; reaching it is LENGTH", max_tokens_length},
    {NULL, NULL, NULL}};
