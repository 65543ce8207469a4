// SPDX-License-Identifier: Apache-2.0
/* test_level.c — LEVEL-*: the elastic level of a call (llmsvc_call_options.level_percent and
 * llmsvc_call_result.level_percent, since ABI 1.5) on the suite's model, which is plain: its one
 * level is 100. A call without a level runs at the service's choice and reports it; 100 is
 * that level; any other value is refused before the context changes. (Calls at the levels of
 * an elastic model are tested in tests/elastic/engine_level_test.cpp: the suite has one
 * model.) */
#include <stddef.h>
#include <string.h>

#include "support.h"
#include "tests.h"

static const char kPrompt[] = "Name three colours.";

/* One greedy call at `level` on `ctx`, its pieces in `out` (initialised here). */
static llmsvc_status at_level(llmsvc_context* ctx, int32_t level, int32_t max_tokens, conf_text* out,
                              llmsvc_call_result* r) {
  conf_text_init(out);
  llmsvc_call_options o = conf_greedy(max_tokens);
  o.level_percent = level;
  llmsvc_call_result_init(r);
  return llmsvc_call(ctx, kPrompt, strlen(kPrompt), &o, conf_collect, out, r);
}

/* LEVEL-1: `_init` leaves level_percent 0 (the service chooses); a call so made runs, and its
 * result reports the level it ran at: 100, the plain model's one level. */
static void chosen_level_reported(conf_t* t) {
  llmsvc_call_options o;
  memset(&o, 0x5A, sizeof o);
  llmsvc_call_options_init(&o);
  CONF_CHECK(t, o.level_percent == 0, "init sets level_percent %d", (int)o.level_percent);
  llmsvc_call_result r;
  memset(&r, 0x5A, sizeof r);
  llmsvc_call_result_init(&r);
  CONF_CHECK(t, r.level_percent == 0, "init sets the result's level_percent %d", (int)r.level_percent);

  conf_fixture f;
  if (!conf_setup(t, &f, "level1", 0)) return;
  conf_text out;
  CONF_STATUS(t, at_level(f.ctx, 0, 6, &out, &r), LLMSVC_OK);
  CONF_CHECK(t, r.generated_tokens > 0, "generated %d", (int)r.generated_tokens);
  CONF_CHECK(t, r.level_percent == 100, "ran at level %d", (int)r.level_percent);
  conf_text_free(&out);
  conf_teardown(t, &f);
}

/* LEVEL-2: level 100 (the full model) is taken: reported as 100, and the greedy reply is the one
 * a call without a level gives on the same state. */
static void full_level(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  char a_id[80], b_id[80];
  conf_unique_id(a_id, sizeof a_id, "level2-a");
  conf_unique_id(b_id, sizeof b_id, "level2-b");
  llmsvc_context* a = conf_new_context(t, svc, a_id, 0, NULL);
  llmsvc_context* b = conf_new_context(t, svc, b_id, 0, NULL);
  if (a && b) {
    conf_text chosen, full;
    llmsvc_call_result rc, rf;
    CONF_STATUS(t, at_level(a, 0, 8, &chosen, &rc), LLMSVC_OK);
    CONF_STATUS(t, at_level(b, 100, 8, &full, &rf), LLMSVC_OK);
    CONF_CHECK(t, rf.level_percent == 100, "ran at level %d", (int)rf.level_percent);
    CONF_CHECK(t, rc.generated_tokens == rf.generated_tokens && strcmp(chosen.data, full.data) == 0,
               "level 0 gave '%s', level 100 '%s'", chosen.data, full.data);
    conf_text_free(&chosen);
    conf_text_free(&full);
  }
  if (a) conf_close_and_delete(t, svc, a);
  if (b) conf_close_and_delete(t, svc, b);
  llmsvc_unbind(svc);
}

/* Calls `ctx` at `level`, expecting INVALID_ARGUMENT with nothing streamed, `r` untouched and the
 * context's tokens as they were. */
static void refused(conf_t* t, llmsvc_service* svc, llmsvc_context* ctx, int32_t level, const char* detail) {
  const int32_t before = conf_info(t, svc, llmsvc_context_id(ctx)).tokens;
  conf_text out;
  llmsvc_call_result r;
  conf_text_init(&out);
  llmsvc_call_options o = conf_greedy(6);
  o.level_percent = level;
  llmsvc_call_result_init(&r);
  r.generated_tokens = -7;
  r.level_percent = -7;
  CONF_STATUS(t, llmsvc_call(ctx, kPrompt, strlen(kPrompt), &o, conf_collect, &out, &r), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, strstr(llmsvc_last_error(), detail) != NULL, "level %d: the detail '%s' names '%s'", (int)level,
             llmsvc_last_error(), detail);
  CONF_CHECK(t, out.pieces == 0, "level %d: %d pieces streamed", (int)level, out.pieces);
  CONF_CHECK(t, r.generated_tokens == -7 && r.level_percent == -7, "level %d: the result was written", (int)level);
  const int32_t after = conf_info(t, svc, llmsvc_context_id(ctx)).tokens;
  CONF_CHECK(t, after == before, "level %d: the context went from %d to %d tokens", (int)level, (int)before,
             (int)after);
  conf_text_free(&out);
}

/* LEVEL-3: a level in 1..100 the model does not have (50: a plain model has only 100) is
 * INVALID_ARGUMENT, the detail naming the levels it has; nothing streamed, the result untouched,
 * the context's tokens unchanged (on a context with history and on a new one); it goes on. */
static void missing_level(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "level3", 0)) return;
  refused(t, f.svc, f.ctx, 50, "100");
  conf_text out;
  llmsvc_call_result r;
  CONF_STATUS(t, at_level(f.ctx, 0, 4, &out, &r), LLMSVC_OK);
  conf_text_free(&out);
  refused(t, f.svc, f.ctx, 50, "level_percent");
  refused(t, f.svc, f.ctx, 99, "level_percent");
  CONF_STATUS(t, at_level(f.ctx, 100, 4, &out, &r), LLMSVC_OK); /* it goes on */
  CONF_CHECK(t, r.level_percent == 100, "ran at level %d", (int)r.level_percent);
  conf_text_free(&out);
  conf_teardown(t, &f);
}

/* LEVEL-4: a level outside 0..100 (101, -1, INT32_MIN) is INVALID_ARGUMENT naming
 * level_percent, nothing changed. */
static void out_of_range(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "level4", 1)) return;
  refused(t, f.svc, f.ctx, 101, "level_percent");
  refused(t, f.svc, f.ctx, -1, "level_percent");
  refused(t, f.svc, f.ctx, INT32_MIN, "level_percent");
  conf_teardown(t, &f);
}

/* LEVEL-6: SLO ratios (llmsvc_call_options.slo_ttft_ratio / slo_tpot_ratio) with level 0: the
 * plain model's one level meets ratios of 1 and more (slo_missed 0) and no smaller one: a ratio
 * below 1 runs the full model all the same and reports slo_missed 1; no SLO, slo_missed 0. */
static void slo_choice(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "level6", 0)) return;
  const float ratios[][2] = {{0.0f, 0.0f}, {1.0f, 1.0f}, {2.0f, 0.0f}, {0.5f, 0.0f}, {0.0f, 0.3f}, {1.0f, 0.9f}};
  const int32_t missed[] = {0, 0, 0, 1, 1, 1};
  for (size_t i = 0; i < sizeof missed / sizeof missed[0]; ++i) {
    llmsvc_call_options o = conf_greedy(2);
    o.slo_ttft_ratio = ratios[i][0];
    o.slo_tpot_ratio = ratios[i][1];
    llmsvc_call_result r;
    llmsvc_call_result_init(&r);
    r.slo_missed = -7;
    conf_text out;
    conf_text_init(&out);
    CONF_STATUS(t, llmsvc_call(f.ctx, kPrompt, strlen(kPrompt), &o, conf_collect, &out, &r), LLMSVC_OK);
    CONF_CHECK(t, r.level_percent == 100 && r.slo_missed == missed[i], "SLO %.1f / %.1f: level %d, slo_missed %d",
               (double)ratios[i][0], (double)ratios[i][1], (int)r.level_percent, (int)r.slo_missed);
    conf_text_free(&out);
  }
  conf_teardown(t, &f);
}

/* LEVEL-5: a caller built before ABI 1.5 (options and result without level_percent): its
 * options' struct_size ends before the field, so bytes there are never read (the service
 * chooses), and its result's struct_size ends before the result's field, which is not written. */
static void older_structs(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "level5", 0)) return;
  llmsvc_call_options o = conf_greedy(4);
  o.level_percent = 50; /* past the older struct_size: not the caller's */
  o.struct_size = offsetof(llmsvc_call_options, level_percent);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  r.struct_size = offsetof(llmsvc_call_result, level_percent);
  r.level_percent = -3;
  CONF_STATUS(t, llmsvc_call(f.ctx, kPrompt, strlen(kPrompt), &o, NULL, NULL, &r), LLMSVC_OK);
  CONF_CHECK(t, r.generated_tokens > 0, "generated %d", (int)r.generated_tokens);
  CONF_CHECK(t, r.level_percent == -3, "a field past the result's struct_size was written (%d)", (int)r.level_percent);
  conf_teardown(t, &f);
}

const conf_test conf_level_tests[] = {
    {"LEVEL-1", "level_percent 0 (init's): the service chooses; the result reports 100 on a plain model",
     chosen_level_reported},
    {"LEVEL-2", "level 100 is taken, reported, and gives the reply a call without a level gives", full_level},
    {"LEVEL-3", "a level the model lacks (50): INVALID_ARGUMENT naming its levels, nothing changed", missing_level},
    {"LEVEL-4", "a level outside 0..100 (101, -1): INVALID_ARGUMENT, nothing changed", out_of_range},
    {"LEVEL-5", "a pre-1.5 caller's structs: level_percent neither read past its options nor written past its result",
     older_structs},
    {"LEVEL-6", "SLO ratios on a plain model: the full model runs; slo_missed 1 for a ratio below 1, else 0", slo_choice},
    {NULL, NULL, NULL},
};
