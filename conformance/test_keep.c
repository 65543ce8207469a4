// SPDX-License-Identifier: Apache-2.0
/* test_keep.c — KEEP-*: prompt compression (llmsvc_call_options.prompt_keep and
 * llmsvc_call_result.prompt_kept, since ABI 1.7). A call keeps the share of its prompt's tokens
 * it asks for (dropping words, so a little less), the service compresses for a TTFT ratio on
 * its own, and nothing else changes: no share asked and no SLO keeps the whole prompt. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "support.h"
#include "tests.h"

/* Several sentences of droppable words before the question that stays. */
static const char kText[] =
    "The river runs past the old mill, under the stone bridge and through the meadow where the village children "
    "play in summer. In winter it freezes and the mill wheel stands still until the spring rains come. "
    "Where does the river run?";

static llmsvc_status keep_call(llmsvc_context* ctx, float keep, float slo_ttft, llmsvc_call_result* r) {
  llmsvc_call_options o = conf_greedy(2);
  o.prompt_keep = keep;
  o.slo_ttft_ratio = slo_ttft;
  llmsvc_call_result_init(r);
  return llmsvc_call(ctx, kText, strlen(kText), &o, NULL, NULL, r);
}

/* KEEP-1: `_init` leaves prompt_keep 0 and the result's prompt_kept 0; a call with neither a
 * share nor an SLO keeps its whole prompt and reports 1. */
static void nothing_dropped(conf_t* t) {
  llmsvc_call_options o;
  memset(&o, 0x5A, sizeof o);
  llmsvc_call_options_init(&o);
  CONF_CHECK(t, o.prompt_keep == 0.0f, "init sets prompt_keep %g", (double)o.prompt_keep);
  llmsvc_call_result r;
  memset(&r, 0x5A, sizeof r);
  llmsvc_call_result_init(&r);
  CONF_CHECK(t, r.prompt_kept == 0.0, "init sets prompt_kept %g", r.prompt_kept);
  conf_fixture f;
  if (!conf_setup(t, &f, "keep1", 1)) return;
  CONF_STATUS(t, keep_call(f.ctx, 0.0f, 0.0f, &r), LLMSVC_OK);
  CONF_CHECK(t, r.prompt_kept == 1.0, "prompt_kept %g", r.prompt_kept);
  const int32_t tokens = conf_info(t, f.svc, llmsvc_context_id(f.ctx)).tokens;
  CONF_CHECK(t, tokens == r.prompt_tokens + r.generated_tokens, "the context holds %d tokens, the call added %d + %d",
             (int)tokens, (int)r.prompt_tokens, (int)r.generated_tokens);
  conf_teardown(t, &f);
}

/* KEEP-2: a share of 0.5 keeps no more than half the prompt's tokens (words are dropped whole:
 * a little less), reports the share kept, and the context holds the kept tokens; the call
 * replies. On a chat context, the template's tokens stay. */
static void share_kept(conf_t* t) {
  for (int raw = 1; raw >= 0; --raw) {
    conf_fixture a, b;
    if (!conf_setup(t, &a, raw ? "keep2-raw" : "keep2-chat", raw)) return;
    if (!conf_setup(t, &b, raw ? "keep2-raw-half" : "keep2-chat-half", raw)) {
      conf_teardown(t, &a);
      return;
    }
    llmsvc_call_result whole, half;
    CONF_STATUS(t, keep_call(a.ctx, 0.0f, 0.0f, &whole), LLMSVC_OK);
    CONF_STATUS(t, keep_call(b.ctx, 0.5f, 0.0f, &half), LLMSVC_OK);
    CONF_CHECK(t, half.prompt_kept > 0.2 && half.prompt_kept <= 0.6, "raw %d: prompt_kept %g", raw, half.prompt_kept);
    const double share = (double)half.prompt_tokens / whole.prompt_tokens;
    CONF_CHECK(t, fabs(share - half.prompt_kept) < 1e-9, "raw %d: %d of %d tokens, reported %g", raw,
               (int)half.prompt_tokens, (int)whole.prompt_tokens, half.prompt_kept);
    CONF_CHECK(t, half.generated_tokens > 0, "raw %d: generated %d", raw, (int)half.generated_tokens);
    const int32_t tokens = conf_info(t, b.svc, llmsvc_context_id(b.ctx)).tokens;
    CONF_CHECK(t, tokens == half.context_tokens, "raw %d: info %d tokens, the result %d", raw, (int)tokens,
               (int)half.context_tokens);
    conf_teardown(t, &b);
    conf_teardown(t, &a);
  }
}

/* KEEP-3: a share outside [0, 1] or not finite is INVALID_ARGUMENT naming prompt_keep; nothing
 * streamed, the result untouched, the context unchanged. */
static void out_of_range(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "keep3", 1)) return;
  const float bad[] = {1.5f, -0.25f, NAN, INFINITY};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    const int32_t before = conf_info(t, f.svc, llmsvc_context_id(f.ctx)).tokens;
    llmsvc_call_options o = conf_greedy(2);
    o.prompt_keep = bad[i];
    llmsvc_call_result r;
    llmsvc_call_result_init(&r);
    r.prompt_kept = -7;
    CONF_STATUS(t, llmsvc_call(f.ctx, kText, strlen(kText), &o, NULL, NULL, &r), LLMSVC_ERR_INVALID_ARGUMENT);
    CONF_CHECK(t, strstr(llmsvc_last_error(), "prompt_keep") != NULL, "%g: the detail '%s'", (double)bad[i],
               llmsvc_last_error());
    CONF_CHECK(t, r.prompt_kept == -7, "%g: the result was written", (double)bad[i]);
    const int32_t after = conf_info(t, f.svc, llmsvc_context_id(f.ctx)).tokens;
    CONF_CHECK(t, after == before, "%g: the context went from %d to %d tokens", (double)bad[i], (int)before, (int)after);
  }
  conf_teardown(t, &f);
}

/* KEEP-4: with a TTFT ratio and no share, the service compresses on its own: the plain model's
 * one level meets a ratio of 0.6 by keeping no more than 0.6 of the prompt (slo_missed 0). */
static void slo_compresses(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "keep4", 1)) return;
  llmsvc_call_result r;
  CONF_STATUS(t, keep_call(f.ctx, 0.0f, 0.6f, &r), LLMSVC_OK);
  CONF_CHECK(t, r.prompt_kept > 0 && r.prompt_kept <= 0.6, "prompt_kept %g", r.prompt_kept);
  CONF_CHECK(t, r.slo_missed == 0 && r.level_percent == 100, "slo_missed %d, level %d", (int)r.slo_missed,
             (int)r.level_percent);
  conf_teardown(t, &f);
}

/* KEEP-5: a caller built before ABI 1.7: bytes past its options' struct_size are not read (no
 * compression), and the result's prompt_kept past its struct_size is not written. */
static void older_structs(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "keep5", 1)) return;
  llmsvc_call_options o = conf_greedy(2);
  o.prompt_keep = 0.3f; /* past the older struct_size: not the caller's */
  o.struct_size = offsetof(llmsvc_call_options, prompt_keep);
  llmsvc_call_result r, whole;
  llmsvc_call_result_init(&r);
  r.struct_size = offsetof(llmsvc_call_result, prompt_kept);
  r.prompt_kept = -3;
  CONF_STATUS(t, llmsvc_call(f.ctx, kText, strlen(kText), &o, NULL, NULL, &r), LLMSVC_OK);
  CONF_CHECK(t, r.prompt_kept == -3, "a field past the result's struct_size was written (%g)", r.prompt_kept);
  conf_teardown(t, &f);
  if (!conf_setup(t, &f, "keep5-b", 1)) return;
  CONF_STATUS(t, keep_call(f.ctx, 0.0f, 0.0f, &whole), LLMSVC_OK);
  CONF_CHECK(t, r.prompt_tokens == whole.prompt_tokens, "the older caller's prompt took %d tokens, the whole %d",
             (int)r.prompt_tokens, (int)whole.prompt_tokens);
  conf_teardown(t, &f);
}

const conf_test conf_keep_tests[] = {
    {"KEEP-1", "prompt_keep 0 (init's) and no SLO: the whole prompt, prompt_kept 1", nothing_dropped},
    {"KEEP-2", "prompt_keep 0.5: at most half the prompt's tokens kept and reported, the context holds them",
     share_kept},
    {"KEEP-3", "prompt_keep outside [0, 1] or not finite: INVALID_ARGUMENT, nothing changed", out_of_range},
    {"KEEP-4", "a TTFT ratio of 0.6 on a plain model: the service keeps at most 0.6 of the prompt, SLO met",
     slo_compresses},
    {"KEEP-5", "a pre-1.7 caller's structs: prompt_keep not read past its options, prompt_kept not written past its result",
     older_structs},
    {NULL, NULL, NULL},
};
