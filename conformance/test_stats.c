// SPDX-License-Identifier: Apache-2.0
/* test_stats.c — STATS-*: the figures add up: a context's chunks by state and by format,
 * a call's token counts, and the service's counters against the calls that made them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "tests.h"

/* ~60 tokens of raw text: several KV chunks whatever the chunk size. */
static const char kLongPrompt[] =
    "The river ran past the old mill, under the stone bridge, through the meadow where the "
    "children played, and on toward the sea, carrying leaves, light and the sound of bells.";

static void check_chunk_sums(conf_t* t, const llmsvc_context_info* i, const char* when) {
  CONF_CHECK(t, i->chunks_resident + i->chunks_swapped + i->chunks_dropped == i->chunks_total,
             "%s: %d resident + %d swapped + %d dropped != %d total", when, i->chunks_resident, i->chunks_swapped,
             i->chunks_dropped, i->chunks_total);
  CONF_CHECK(t, i->chunks_f16 + i->chunks_q8 + i->chunks_q4 + i->chunks_q3 + i->chunks_q2 == i->chunks_resident,
             "%s: f16 %d + q8 %d + q4 %d + q3 %d + q2 %d != %d resident", when, i->chunks_f16, i->chunks_q8,
             i->chunks_q4, i->chunks_q3, i->chunks_q2, i->chunks_resident);
  CONF_CHECK(t, i->chunks_total >= 0 && i->chunks_resident >= 0 && i->chunks_swapped >= 0 && i->chunks_dropped >= 0 &&
                    i->chunks_f16 >= 0 && i->chunks_q8 >= 0 && i->chunks_q4 >= 0 && i->chunks_q3 >= 0 &&
                    i->chunks_q2 >= 0,
             "%s: a negative count", when);
  /* Resident chunks hold bytes; none resident, none held. */
  CONF_CHECK(t, (i->chunks_resident > 0) == (i->kv_resident_bytes > 0), "%s: %d resident chunks, %llu bytes", when,
             i->chunks_resident, (unsigned long long)i->kv_resident_bytes);
}

/* STATS-1: a context's chunks by state add up to chunks_total, and the resident ones by format
 * (f16, q8, q4, q3, q2) to chunks_resident: fresh, after calls, open and closed. */
static void chunk_sums(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  char id[80];
  conf_unique_id(id, sizeof id, "chunks");
  llmsvc_context* ctx = conf_new_context(t, svc, id, 1, NULL);
  CONF_REQUIRE(t, ctx != NULL);
  llmsvc_context_info fresh = conf_info(t, svc, id);
  check_chunk_sums(t, &fresh, "fresh");
  llmsvc_call_options o = conf_greedy(4);
  for (int k = 0; k < 3; k++) {
    CONF_STATUS(t, llmsvc_call(ctx, kLongPrompt, strlen(kLongPrompt), &o, NULL, NULL, NULL), LLMSVC_OK);
    llmsvc_context_info i = conf_info(t, svc, id);
    check_chunk_sums(t, &i, "after a call");
    CONF_CHECK(t, i.chunks_total > 1, "%d tokens in %d chunks", i.tokens, i.chunks_total);
  }
  llmsvc_context_close(ctx);
  llmsvc_context_info closed = conf_info(t, svc, id);
  check_chunk_sums(t, &closed, "closed");
  CONF_STATUS(t, llmsvc_context_delete(svc, id), LLMSVC_OK);
  llmsvc_unbind(svc);
}

/* Resident chunk formats in use: a sum over one format alone would prove little. */
static int formats_in_use(const llmsvc_context_info* i) {
  return (i->chunks_f16 > 0) + (i->chunks_q8 > 0) + (i->chunks_q4 > 0) + (i->chunks_q3 > 0) + (i->chunks_q2 > 0);
}

/* STATS-4: a context of ~370 tokens, long enough to be compressed after its call. Bound
 * with kv_ratio 0.4 (an embedded field: 3.2 bits on average, so 3-bit chunks among the 4-bit
 * ones; the daemon keeps its own ratio). */
static void compressed_chunk_sums(conf_t* t) {
  llmsvc_bind_options b;
  llmsvc_bind_options_init(&b);
  b.target = t->env->target;
  b.device = getenv("LLMSVC_CONF_DEVICES"); /* a GPU's chunks are compressed as the CPU's */
  b.kv_ratio = 0.4f;
  llmsvc_service* svc = NULL;
  CONF_STATUS_REQ(t, llmsvc_bind(&b, &svc), LLMSVC_OK);
  char id[80];
  conf_unique_id(id, sizeof id, "compressed");
  llmsvc_context* ctx = conf_new_context(t, svc, id, 1, NULL);
  if (ctx) {
    size_t n = strlen(kLongPrompt);
    char prompt[sizeof kLongPrompt * 10];
    for (int k = 0; k < 10; k++) memcpy(prompt + (size_t)k * n, kLongPrompt, n);
    llmsvc_call_options o = conf_greedy(2);
    CONF_STATUS(t, llmsvc_call(ctx, prompt, 10 * n, &o, NULL, NULL, NULL), LLMSVC_OK);
    llmsvc_context_info i = conf_info(t, svc, id);
    check_chunk_sums(t, &i, "compressed");
    CONF_CHECK(t, formats_in_use(&i) >= 2, "one format only: f16 %d q8 %d q4 %d q3 %d q2 %d", i.chunks_f16,
               i.chunks_q8, i.chunks_q4, i.chunks_q3, i.chunks_q2);
  }
  conf_close_and_delete(t, svc, ctx);
  llmsvc_unbind(svc);
}

/* STATS-2: a call's counts: context_tokens and info agree; a raw context grows by exactly
 * prompt_tokens + generated_tokens, a chat one by at least that (the template may close the
 * turn with tokens that are neither); timings are finite and not negative. */
static void call_counts(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  const char* prompts[] = {"Hello!", "What is two plus two?", "Thanks."};
  for (int raw = 0; raw < 2; raw++) {
    char id[80];
    conf_unique_id(id, sizeof id, raw ? "counts-raw" : "counts-chat");
    llmsvc_context* ctx = conf_new_context(t, svc, id, raw, raw ? NULL : "You answer in one short sentence.");
    if (!ctx) continue;
    int32_t tokens = conf_info(t, svc, id).tokens;
    for (int k = 0; k < 3; k++) {
      llmsvc_call_options o = conf_greedy(6);
      llmsvc_call_result r;
      llmsvc_call_result_init(&r);
      CONF_STATUS(t, llmsvc_call(ctx, prompts[k], strlen(prompts[k]), &o, NULL, NULL, &r), LLMSVC_OK);
      CONF_CHECK(t, r.prompt_tokens > 0 && r.generated_tokens >= 0 && r.generated_tokens <= 6);
      const int32_t sum = tokens + r.prompt_tokens + r.generated_tokens;
      CONF_CHECK(t, raw ? r.context_tokens == sum : r.context_tokens >= sum,
                 "%s call %d: context %d, %d before + %d prompt + %d generated", raw ? "raw" : "chat", k,
                 r.context_tokens, tokens, r.prompt_tokens, r.generated_tokens);
      llmsvc_context_info i = conf_info(t, svc, id);
      CONF_CHECK(t, i.tokens == r.context_tokens && i.turns == (raw ? 0 : k + 1), "info: %d tokens, %d turns", i.tokens,
                 i.turns);
      const double ms[] = {r.switch_in_ms, r.ttft_ms, r.prefill_ms, r.decode_ms, r.tpot_ms};
      for (int m = 0; m < 5; m++) CONF_CHECK(t, isfinite(ms[m]) && ms[m] >= 0.0, "timing %d is %f", m, ms[m]);
      CONF_CHECK(t, r.chunks_loaded >= 0 && r.chunks_recomputed >= 0);
      tokens = r.context_tokens;
    }
    conf_close_and_delete(t, svc, ctx);
  }
  llmsvc_unbind(svc);
}

/* STATS-3: the service's counters move with the calls: calls (a cancelled one too), prompt
 * and generated tokens, switch-in chunks; open handles and known contexts follow new, close
 * and delete; weights are counted and the KV peak is at least the KV now. */
static void service_counters(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  llmsvc_stats before;
  llmsvc_stats_init(&before);
  CONF_STATUS_REQ(t, llmsvc_get_stats(svc, &before), LLMSVC_OK);
  CONF_CHECK(t, before.open_contexts == 0, "a fresh binding has %d handles open", before.open_contexts);
  char ida[80], idb[80];
  conf_unique_id(ida, sizeof ida, "stats-a");
  conf_unique_id(idb, sizeof idb, "stats-b");
  llmsvc_context* a = conf_new_context(t, svc, ida, 1, NULL);
  llmsvc_context* b = conf_new_context(t, svc, idb, 0, NULL);
  CONF_REQUIRE(t, a && b);
  llmsvc_stats mid;
  llmsvc_stats_init(&mid);
  CONF_STATUS(t, llmsvc_get_stats(svc, &mid), LLMSVC_OK);
  CONF_CHECK(t, mid.open_contexts == 2 && mid.known_contexts == before.known_contexts + 2, "open %d, known %d -> %d",
             mid.open_contexts, before.known_contexts, mid.known_contexts);

  llmsvc_call_options o = conf_greedy(5);
  llmsvc_call_result ra, rb;
  llmsvc_call_result_init(&ra);
  llmsvc_call_result_init(&rb);
  CONF_STATUS(t, llmsvc_call(a, kLongPrompt, strlen(kLongPrompt), &o, NULL, NULL, &ra), LLMSVC_OK);
  conf_text c;
  conf_text_init(&c);
  c.cancel_after = 1;
  CONF_STATUS(t, llmsvc_call(b, "Count to ten.", 13, &o, conf_collect, &c, &rb), LLMSVC_ERR_CANCELLED);
  conf_text_free(&c);

  llmsvc_stats after;
  llmsvc_stats_init(&after);
  CONF_STATUS_REQ(t, llmsvc_get_stats(svc, &after), LLMSVC_OK);
  CONF_CHECK(t, after.calls - before.calls == 2, "calls +%llu", (unsigned long long)(after.calls - before.calls));
  CONF_CHECK(t, after.prompt_tokens - before.prompt_tokens == (uint64_t)(ra.prompt_tokens + rb.prompt_tokens),
             "prompt tokens +%llu, calls said %d", (unsigned long long)(after.prompt_tokens - before.prompt_tokens),
             ra.prompt_tokens + rb.prompt_tokens);
  CONF_CHECK(t,
             after.generated_tokens - before.generated_tokens == (uint64_t)(ra.generated_tokens + rb.generated_tokens),
             "generated +%llu, calls said %d", (unsigned long long)(after.generated_tokens - before.generated_tokens),
             ra.generated_tokens + rb.generated_tokens);
  CONF_CHECK(t, after.chunks_loaded - before.chunks_loaded == (uint64_t)(ra.chunks_loaded + rb.chunks_loaded));
  CONF_CHECK(t, after.chunks_recomputed - before.chunks_recomputed ==
                    (uint64_t)(ra.chunks_recomputed + rb.chunks_recomputed));
  CONF_CHECK(t, after.weight_bytes > 0 && after.kv_peak_bytes >= after.kv_bytes, "weights %llu, kv %llu, peak %llu",
             (unsigned long long)after.weight_bytes, (unsigned long long)after.kv_bytes,
             (unsigned long long)after.kv_peak_bytes);

  llmsvc_context_close(a);
  llmsvc_stats one;
  llmsvc_stats_init(&one);
  CONF_STATUS(t, llmsvc_get_stats(svc, &one), LLMSVC_OK);
  CONF_CHECK(t, one.open_contexts == 1 && one.known_contexts == mid.known_contexts, "open %d, known %d",
             one.open_contexts, one.known_contexts);
  conf_close_and_delete(t, svc, b);
  CONF_STATUS(t, llmsvc_context_delete(svc, ida), LLMSVC_OK);
  llmsvc_stats end;
  llmsvc_stats_init(&end);
  CONF_STATUS(t, llmsvc_get_stats(svc, &end), LLMSVC_OK);
  CONF_CHECK(t, end.open_contexts == 0 && end.known_contexts == before.known_contexts, "open %d, known %d",
             end.open_contexts, end.known_contexts);
  llmsvc_unbind(svc);
}

const conf_test conf_stats_tests[] = {
    {"STATS-1", "chunks by state sum to total; resident by format (incl. q3) to resident", chunk_sums},
    {"STATS-2", "context_tokens = info tokens; raw grows by prompt + generated exactly", call_counts},
    {"STATS-3", "service counters follow calls, handles and contexts", service_counters},
    {"STATS-4", "a compressed context's chunks (several formats; q3 embedded) add up", compressed_chunk_sums},
    {NULL, NULL, NULL}};
