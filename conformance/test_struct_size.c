// SPDX-License-Identifier: Apache-2.0
/* test_struct_size.c — SIZE-*: the struct_size rules. Smaller than a struct's first version:
 * INVALID_ARGUMENT. Larger (a newer caller): accepted, the unknown tail ignored, and a result's
 * tail left untouched. Between the first version and now (an older caller): accepted, and the
 * result fields the caller does not know are not written. */
#include <string.h>

#include "support.h"
#include "tests.h"

/* Bytes of a struct's first version: through its last field before the "Added after v1" ones. */
#define SIZE_THROUGH(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))
#define CALL_RESULT_V1 SIZE_THROUGH(llmsvc_call_result, tpot_ms)
#define STATS_V1 SIZE_THROUGH(llmsvc_stats, weight_bytes)
#define INFO_V1 SIZE_THROUGH(llmsvc_context_info, kv_resident_bytes)
#define INFO_V2 SIZE_THROUGH(llmsvc_context_info, chunks_q2)
#define BIND_V1 SIZE_THROUGH(llmsvc_bind_options, kv_ratio)
#define CONTEXT_OPTIONS_V1 SIZE_THROUGH(llmsvc_context_options, raw)
#define CALL_OPTIONS_V1 SIZE_THROUGH(llmsvc_call_options, slo_tpot_ratio)

/* The fixture with a few tokens in its raw context, for the tests below; 0 on failure. */
static int setup_with_tokens(conf_t* t, conf_fixture* f) {
  if (!conf_setup(t, f, "size", 1)) return 0;
  llmsvc_call_options o = conf_greedy(2);
  llmsvc_status st = llmsvc_call(f->ctx, "Once upon a time", 16, &o, NULL, NULL, NULL);
  if (st != LLMSVC_OK) conf_fail_at(t, __FILE__, __LINE__, "call: %s", llmsvc_status_name(st));
  return 1;
}

/* SIZE-1: every struct with a struct_size below its first version is INVALID_ARGUMENT. */
static void too_small(conf_t* t) {
  conf_fixture f;
  CONF_REQUIRE(t, setup_with_tokens(t, &f));
  llmsvc_context_info before = conf_info(t, f.svc, f.id);
  const size_t sizes[] = {0, sizeof(size_t)};
  for (int k = 0; k < 3; k++) {
    llmsvc_bind_options b;
    llmsvc_bind_options_init(&b);
    b.target = t->env->target;
    b.struct_size = k < 2 ? sizes[k] : BIND_V1 - 1;
    llmsvc_service* s = NULL;
    CONF_STATUS(t, llmsvc_bind(&b, &s), LLMSVC_ERR_INVALID_ARGUMENT);
    CONF_CHECK(t, s == NULL && strstr(llmsvc_last_error(), "struct_size") != NULL, "'%s'", llmsvc_last_error());

    llmsvc_context_options co;
    llmsvc_context_options_init(&co);
    co.struct_size = k < 2 ? sizes[k] : CONTEXT_OPTIONS_V1 - 1;
    llmsvc_context* c = NULL;
    CONF_STATUS(t, llmsvc_context_new(f.svc, &co, &c), LLMSVC_ERR_INVALID_ARGUMENT);

    llmsvc_call_options o = conf_greedy(1);
    o.struct_size = k < 2 ? sizes[k] : CALL_OPTIONS_V1 - 1;
    CONF_STATUS(t, llmsvc_call(f.ctx, "Hi", 2, &o, NULL, NULL, NULL), LLMSVC_ERR_INVALID_ARGUMENT);

    llmsvc_call_result r;
    llmsvc_call_result_init(&r);
    r.struct_size = k < 2 ? sizes[k] : CALL_RESULT_V1 - 1;
    llmsvc_call_options ok = conf_greedy(1);
    CONF_STATUS(t, llmsvc_call(f.ctx, "Hi", 2, &ok, NULL, NULL, &r), LLMSVC_ERR_INVALID_ARGUMENT);

    llmsvc_stats s2;
    llmsvc_stats_init(&s2);
    s2.struct_size = k < 2 ? sizes[k] : STATS_V1 - 1;
    CONF_STATUS(t, llmsvc_get_stats(f.svc, &s2), LLMSVC_ERR_INVALID_ARGUMENT);

    llmsvc_context_info info;
    llmsvc_context_info_init(&info);
    info.struct_size = k < 2 ? sizes[k] : INFO_V1 - 1;
    CONF_STATUS(t, llmsvc_context_info_get(f.svc, f.id, &info), LLMSVC_ERR_INVALID_ARGUMENT);
  }
  /* None of the refused calls reached the context. */
  llmsvc_context_info after = conf_info(t, f.svc, f.id);
  CONF_CHECK(t, after.tokens == before.tokens && before.tokens > 0, "tokens %d -> %d", before.tokens, after.tokens);
  conf_teardown(t, &f);
}

/* SIZE-2: option structs from a newer caller (larger, zeroed tail) are accepted, and so is a
 * tail the library does not know (it is ignored, whatever it holds). */
static void larger_options(conf_t* t) {
  struct {
    llmsvc_bind_options v;
    char tail[64];
  } b;
  memset(&b, 0, sizeof b);
  llmsvc_bind_options_init(&b.v);
  b.v.struct_size = sizeof b;
  b.v.target = t->env->target;
  llmsvc_service* svc = NULL;
  CONF_STATUS_REQ(t, llmsvc_bind(&b.v, &svc), LLMSVC_OK);

  struct {
    llmsvc_context_options v;
    char tail[64];
  } co;
  memset(&co, 0, sizeof co);
  llmsvc_context_options_init(&co.v);
  co.v.struct_size = sizeof co;
  co.v.raw = 1;
  llmsvc_context* ctx = NULL;
  CONF_STATUS(t, llmsvc_context_new(svc, &co.v, &ctx), LLMSVC_OK);
  if (ctx) {
    llmsvc_context_info info = conf_info(t, svc, llmsvc_context_id(ctx));
    CONF_CHECK(t, info.raw != 0, "the known fields are read");
    for (int fill = 0; fill < 2; fill++) {
      struct {
        llmsvc_call_options v;
        unsigned char tail[64];
      } o;
      memset(&o, 0, sizeof o);
      o.v = conf_greedy(2);
      o.v.struct_size = sizeof o;
      memset(o.tail, fill ? 0xFF : 0, sizeof o.tail);
      llmsvc_call_result r;
      llmsvc_call_result_init(&r);
      CONF_STATUS(t, llmsvc_call(ctx, "Hi", 2, &o.v, NULL, NULL, &r), LLMSVC_OK);
      CONF_CHECK(t, r.generated_tokens == 2, "max_tokens read: %d generated", r.generated_tokens);
    }
  }
  conf_close_and_delete(t, svc, ctx);
  llmsvc_unbind(svc);
}

/* Every byte of a tail the caller filled with 0xA5 is still 0xA5; else a failure naming `what`. */
static void check_tail(conf_t* t, const unsigned char* tail, size_t n, const char* what) {
  for (size_t i = 0; i < n; i++)
    if (tail[i] != 0xA5) {
      conf_fail_at(t, __FILE__, __LINE__, "%s: byte %zu of the tail written", what, i);
      return;
    }
}

/* SIZE-3: result structs from a newer caller are filled, the tail and struct_size untouched. */
static void larger_results(conf_t* t) {
  conf_fixture f;
  CONF_REQUIRE(t, setup_with_tokens(t, &f));
  struct {
    llmsvc_call_result v;
    unsigned char tail[32];
  } r;
  llmsvc_call_result_init(&r.v);
  r.v.struct_size = sizeof r;
  memset(r.tail, 0xA5, sizeof r.tail);
  llmsvc_call_options o = conf_greedy(2);
  CONF_STATUS(t, llmsvc_call(f.ctx, " and", 4, &o, NULL, NULL, &r.v), LLMSVC_OK);
  CONF_CHECK(t, r.v.struct_size == sizeof r && r.v.generated_tokens == 2);
  check_tail(t, r.tail, sizeof r.tail, "call result");

  struct {
    llmsvc_stats v;
    unsigned char tail[32];
  } s;
  llmsvc_stats_init(&s.v);
  s.v.struct_size = sizeof s;
  memset(s.tail, 0xA5, sizeof s.tail);
  CONF_STATUS(t, llmsvc_get_stats(f.svc, &s.v), LLMSVC_OK);
  CONF_CHECK(t, s.v.struct_size == sizeof s && s.v.weight_bytes > 0);
  check_tail(t, s.tail, sizeof s.tail, "stats");

  struct {
    llmsvc_context_info v;
    unsigned char tail[32];
  } info;
  llmsvc_context_info_init(&info.v);
  info.v.struct_size = sizeof info;
  memset(info.tail, 0xA5, sizeof info.tail);
  CONF_STATUS(t, llmsvc_context_info_get(f.svc, f.id, &info.v), LLMSVC_OK);
  CONF_CHECK(t, info.v.struct_size == sizeof info && info.v.tokens == r.v.context_tokens);
  check_tail(t, info.tail, sizeof info.tail, "context info");
  conf_teardown(t, &f);
}

/* SIZE-4: result structs from an older caller (an earlier version's size) are accepted and
 * only the fields that version knew are written. */
static void older_results(conf_t* t) {
  conf_fixture f;
  CONF_REQUIRE(t, setup_with_tokens(t, &f));

  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  r.struct_size = CALL_RESULT_V1;
  r.chunks_loaded = -11;
  r.chunks_recomputed = -12;
  llmsvc_call_options o = conf_greedy(2);
  CONF_STATUS(t, llmsvc_call(f.ctx, " and", 4, &o, NULL, NULL, &r), LLMSVC_OK);
  CONF_CHECK(t, r.struct_size == CALL_RESULT_V1 && r.generated_tokens == 2 && r.context_tokens > 0);
  CONF_CHECK(t, r.chunks_loaded == -11 && r.chunks_recomputed == -12, "fields past v1 written");

  llmsvc_stats s;
  llmsvc_stats_init(&s);
  s.struct_size = STATS_V1;
  s.kv_peak_bytes = 77;
  s.swap_out_failures = 78;
  CONF_STATUS(t, llmsvc_get_stats(f.svc, &s), LLMSVC_OK);
  CONF_CHECK(t, s.weight_bytes > 0 && s.kv_peak_bytes == 77 && s.swap_out_failures == 78);

  llmsvc_context_info v1;
  llmsvc_context_info_init(&v1);
  v1.struct_size = INFO_V1;
  v1.chunks_f16 = -3;
  v1.chunks_q3 = -4;
  CONF_STATUS(t, llmsvc_context_info_get(f.svc, f.id, &v1), LLMSVC_OK);
  CONF_CHECK(t, v1.tokens == r.context_tokens && strcmp(v1.id, f.id) == 0);
  CONF_CHECK(t, v1.chunks_f16 == -3 && v1.chunks_q3 == -4, "fields past v1 written");

  /* Version 2 knew the 8/4/2-bit counts but not chunks_q3. */
  llmsvc_context_info v2;
  llmsvc_context_info_init(&v2);
  v2.struct_size = INFO_V2;
  v2.chunks_q3 = -4;
  CONF_STATUS(t, llmsvc_context_info_get(f.svc, f.id, &v2), LLMSVC_OK);
  CONF_CHECK(t, v2.tokens == r.context_tokens && v2.chunks_q3 == -4, "chunks_q3 written to a v2 struct");
  conf_teardown(t, &f);
}

const conf_test conf_struct_size_tests[] = {
    {"SIZE-1", "struct_size below a struct's first version: INVALID_ARGUMENT", too_small},
    {"SIZE-2", "larger option structs (newer caller) accepted, unknown tail ignored", larger_options},
    {"SIZE-3", "larger result structs: filled, tail and struct_size untouched", larger_results},
    {"SIZE-4", "older result structs: accepted, later fields not written", older_results},
    {NULL, NULL, NULL}};
