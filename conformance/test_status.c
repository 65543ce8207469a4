// SPDX-License-Identifier: Apache-2.0
/* test_status.c — STATUS-*: every status code the API lets a caller reach, with a detail in
 * llmsvc_last_error() and `out` parameters left untouched on failure. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "support.h"
#include "tests.h"

/* A pointer value no API call returns: out parameters must still hold it after a failure. */
#define SENTINEL_SVC ((llmsvc_service*)(void*)0x5a5a5a5a)
#define SENTINEL_CTX ((llmsvc_context*)(void*)0x5a5a5a5a)

static int never(const char* id, void* user) {
  (void)id;
  (void)user;
  return 0;
}

static int has_detail(void) { return llmsvc_last_error()[0] != '\0'; }

/* STATUS-1: NULL handles and out pointers are INVALID_ARGUMENT, with a detail, out untouched. */
static void null_arguments(conf_t* t) {
  conf_fixture f;
  CONF_REQUIRE(t, conf_setup(t, &f, "null", 1));
  llmsvc_bind_options bo;
  llmsvc_bind_options_init(&bo);
  bo.target = t->env->target;
  CONF_STATUS(t, llmsvc_bind(&bo, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, has_detail());

  llmsvc_context* c = SENTINEL_CTX;
  CONF_STATUS(t, llmsvc_context_new(NULL, NULL, &c), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, has_detail());
  CONF_STATUS(t, llmsvc_context_new(f.svc, NULL, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_open(NULL, f.id, &c), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_open(f.svc, NULL, &c), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, has_detail());
  CONF_STATUS(t, llmsvc_context_open(f.svc, f.id, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, c == SENTINEL_CTX, "out written on failure");

  CONF_STATUS(t, llmsvc_context_delete(NULL, f.id), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_delete(f.svc, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, has_detail());

  llmsvc_context_info info;
  llmsvc_context_info_init(&info);
  info.tokens = -7;
  CONF_STATUS(t, llmsvc_context_info_get(NULL, f.id, &info), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_info_get(f.svc, NULL, &info), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_info_get(f.svc, f.id, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, has_detail());
  CONF_CHECK(t, info.tokens == -7 && info.id[0] == '\0', "out written on failure");

  CONF_STATUS(t, llmsvc_context_list(NULL, never, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_list(f.svc, NULL, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, has_detail());
  CONF_STATUS(t, llmsvc_context_cancel(NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, has_detail());

  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  r.generated_tokens = -7;
  CONF_STATUS(t, llmsvc_call(NULL, "Hi", 2, NULL, NULL, NULL, &r), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_call(f.ctx, NULL, 5, NULL, NULL, NULL, &r), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, has_detail());
  CONF_CHECK(t, r.generated_tokens == -7, "out written on failure");

  llmsvc_stats s;
  llmsvc_stats_init(&s);
  s.calls = 777;
  CONF_STATUS(t, llmsvc_get_stats(NULL, &s), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_get_stats(f.svc, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, has_detail());
  CONF_CHECK(t, s.calls == 777, "out written on failure");

  /* The documented NULLs that are fine: options, callback, result, and a NULL prompt of length 0
   * (on a context that already holds tokens: an empty raw context has nothing to go on). */
  llmsvc_call_options o = conf_greedy(1);
  CONF_STATUS(t, llmsvc_call(f.ctx, "Hi", 2, NULL, NULL, NULL, NULL), LLMSVC_OK);
  CONF_STATUS(t, llmsvc_call(f.ctx, NULL, 0, &o, NULL, NULL, NULL), LLMSVC_OK);
  CONF_CHECK(t, llmsvc_last_error()[0] == '\0', "a success clears the detail: '%s'", llmsvc_last_error());
  conf_teardown(t, &f);
}

/* STATUS-2: a prompt that is not UTF-8 is INVALID_UTF8: nothing streamed, the context and the
 * result untouched. Valid UTF-8 holding a NUL byte is a prompt like any other. */
static void invalid_utf8_prompt(conf_t* t) {
  static const struct {
    const char* bytes;
    size_t len;
  } bad[] = {
      {"ab\xc3", 3},             /* truncated 2-byte sequence */
      {"\xc0\xaf", 2},           /* overlong '/' */
      {"\xed\xa0\x80", 3},       /* a surrogate, U+D800 */
      {"\xf4\x90\x80\x80", 4},   /* above U+10FFFF */
      {"x\x80y", 3},             /* a lone continuation byte */
      {"\xff", 1},               /* never valid */
  };
  conf_fixture f;
  CONF_REQUIRE(t, conf_setup(t, &f, "utf8", 1));
  llmsvc_context_info before = conf_info(t, f.svc, f.id);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    conf_text c;
    conf_text_init(&c);
    llmsvc_call_result r;
    llmsvc_call_result_init(&r);
    r.context_tokens = -7;
    llmsvc_call_options o = conf_greedy(2);
    CONF_STATUS(t, llmsvc_call(f.ctx, bad[i].bytes, bad[i].len, &o, conf_collect, &c, &r), LLMSVC_ERR_INVALID_UTF8);
    CONF_CHECK(t, has_detail());
    CONF_CHECK(t, c.pieces == 0 && r.context_tokens == -7, "case %zu: streamed or wrote a result", i);
    conf_text_free(&c);
  }
  llmsvc_context_info after = conf_info(t, f.svc, f.id);
  CONF_CHECK(t, after.tokens == before.tokens, "tokens %d -> %d", before.tokens, after.tokens);
  llmsvc_call_options o = conf_greedy(1);
  CONF_STATUS(t, llmsvc_call(f.ctx, "a\0b", 3, &o, NULL, NULL, NULL), LLMSVC_OK);
  conf_teardown(t, &f);
}

/* STATUS-3: the other strings are validated too: id, system prompt, stop string, target. */
static void invalid_utf8_strings(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  const char* bad_id = "conf\xc3";
  llmsvc_context* c = SENTINEL_CTX;
  llmsvc_context_options co;
  llmsvc_context_options_init(&co);
  co.id = bad_id;
  CONF_STATUS(t, llmsvc_context_new(svc, &co, &c), LLMSVC_ERR_INVALID_UTF8);
  CONF_STATUS(t, llmsvc_context_open(svc, bad_id, &c), LLMSVC_ERR_INVALID_UTF8);
  CONF_STATUS(t, llmsvc_context_delete(svc, bad_id), LLMSVC_ERR_INVALID_UTF8);
  llmsvc_context_info info;
  llmsvc_context_info_init(&info);
  CONF_STATUS(t, llmsvc_context_info_get(svc, bad_id, &info), LLMSVC_ERR_INVALID_UTF8);
  llmsvc_context_options_init(&co);
  co.system_prompt = "You are \xed\xbf\xbf.";
  CONF_STATUS(t, llmsvc_context_new(svc, &co, &c), LLMSVC_ERR_INVALID_UTF8);
  CONF_CHECK(t, c == SENTINEL_CTX, "out written on failure");

  char id[80];
  conf_unique_id(id, sizeof id, "utf8-stop");
  llmsvc_context* ctx = conf_new_context(t, svc, id, 1, NULL);
  if (ctx) {
    const char* stops[] = {"ok", "\xe2\x82"};
    llmsvc_call_options o = conf_greedy(2);
    o.stop = stops;
    o.n_stop = 2;
    CONF_STATUS(t, llmsvc_call(ctx, "Hi", 2, &o, NULL, NULL, NULL), LLMSVC_ERR_INVALID_UTF8);
  }
  conf_close_and_delete(t, svc, ctx);
  llmsvc_unbind(svc);

  llmsvc_bind_options bo;
  llmsvc_bind_options_init(&bo);
  bo.target = "unix:/tmp/\xff";
  llmsvc_service* s = SENTINEL_SVC;
  CONF_STATUS(t, llmsvc_bind(&bo, &s), LLMSVC_ERR_INVALID_UTF8);
  CONF_CHECK(t, s == SENTINEL_SVC, "out written on failure");
}

/* STATUS-4: ids outside the rules are INVALID_ARGUMENT everywhere; a 64-byte id is fine. */
static void bad_ids(conf_t* t) {
  char too_long[66];
  memset(too_long, 'x', 65);
  too_long[65] = '\0';
  const char* bad[] = {"", "has space", "slash/id", ".", "..", "semi;colon", too_long};
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    llmsvc_context* c = SENTINEL_CTX;
    llmsvc_context_options co;
    llmsvc_context_options_init(&co);
    co.id = bad[i];
    CONF_STATUS(t, llmsvc_context_new(svc, &co, &c), LLMSVC_ERR_INVALID_ARGUMENT);
    CONF_STATUS(t, llmsvc_context_open(svc, bad[i], &c), LLMSVC_ERR_INVALID_ARGUMENT);
    CONF_STATUS(t, llmsvc_context_delete(svc, bad[i]), LLMSVC_ERR_INVALID_ARGUMENT);
    llmsvc_context_info info;
    llmsvc_context_info_init(&info);
    CONF_STATUS(t, llmsvc_context_info_get(svc, bad[i], &info), LLMSVC_ERR_INVALID_ARGUMENT);
    CONF_CHECK(t, c == SENTINEL_CTX, "'%s': out written on failure", bad[i]);
  }
  /* The longest id there is: 64 bytes, all of the allowed kinds of character. */
  char longest[65];
  conf_unique_id(longest, sizeof longest, "");
  size_t n = strlen(longest);
  memset(longest + n, 'Z', 64 - n);
  memcpy(longest + 60, "._-9", 4);
  longest[64] = '\0';
  llmsvc_context* ctx = conf_new_context(t, svc, longest, 1, NULL);
  if (ctx) CONF_CHECK(t, strcmp(llmsvc_context_id(ctx), longest) == 0);
  conf_close_and_delete(t, svc, ctx);
  llmsvc_unbind(svc);
}

/* STATUS-5: call option values outside their documented ranges are INVALID_ARGUMENT, and
 * nothing is generated. */
static void bad_call_options(conf_t* t) {
  conf_fixture f;
  CONF_REQUIRE(t, conf_setup(t, &f, "badopt", 1));
  char long_stop[258];
  memset(long_stop, 's', 257);
  long_stop[257] = '\0';
  const char* stops17[17];
  for (int i = 0; i < 17; i++) stops17[i] = "stop";
  const char* empty_stop[] = {""};
  const char* long_stops[] = {long_stop};
  for (int k = 0; k < 15; k++) {
    llmsvc_call_options o = conf_greedy(2);
    switch (k) {
      case 0: o.temperature = 0.0f / 0.0f; break; /* NaN */
      case 1: o.top_k = -1; break;
      case 2: o.top_p = 1.5f; break;
      case 3: o.top_p = -0.1f; break;
      case 4: o.min_p = -0.5f; break;
      case 5: o.min_p = 2.0f; break;
      case 6: o.repeat_penalty = 0.0f; break;
      case 7: o.repeat_last_n = -2; break;
      case 8: o.max_tokens = -1; break;
      case 9: o.n_stop = 1; break; /* stop is NULL */
      case 10: o.stop = stops17; o.n_stop = 17; break;
      case 11: o.stop = empty_stop; o.n_stop = 1; break;
      case 12: o.stop = long_stops; o.n_stop = 1; break;
      case 13: o.slo_ttft_ratio = -1.0f; break;
      case 14: o.slo_tpot_ratio = 1.0f / 0.0f; break; /* infinity */
    }
    conf_text c;
    conf_text_init(&c);
    CONF_STATUS(t, llmsvc_call(f.ctx, "Hi", 2, &o, conf_collect, &c, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
    CONF_CHECK(t, has_detail() && c.pieces == 0, "case %d", k);
    conf_text_free(&c);
  }
  llmsvc_context_info info = conf_info(t, f.svc, f.id);
  CONF_CHECK(t, info.tokens == 0, "refused calls left %d tokens", info.tokens);
  /* The edges of the ranges are valid. */
  const char* stops16[16];
  for (int i = 0; i < 16; i++) stops16[i] = "\xe2\x82\xac";
  long_stop[256] = '\0';
  llmsvc_call_options o = conf_greedy(1);
  o.top_p = 0.0f;
  o.min_p = 1.0f;
  o.repeat_last_n = -1;
  o.stop = stops16;
  o.n_stop = 16;
  CONF_STATUS(t, llmsvc_call(f.ctx, "Hi", 2, &o, NULL, NULL, NULL), LLMSVC_OK);
  o = conf_greedy(1);
  o.stop = long_stops;
  o.n_stop = 1;
  o.repeat_last_n = 0;
  CONF_STATUS(t, llmsvc_call(f.ctx, "Hi", 2, &o, NULL, NULL, NULL), LLMSVC_OK);
  conf_teardown(t, &f);
}

/* STATUS-6: a target that is neither "embedded" nor "unix:PATH" is INVALID_ARGUMENT. */
static void bad_targets(conf_t* t) {
  const char* bad[] = {"tcp:127.0.0.1:80", "unix:", "Embedded", "unix", "embedded:x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    llmsvc_bind_options bo;
    llmsvc_bind_options_init(&bo);
    bo.target = bad[i];
    llmsvc_service* s = SENTINEL_SVC;
    CONF_STATUS(t, llmsvc_bind(&bo, &s), LLMSVC_ERR_INVALID_ARGUMENT);
    CONF_CHECK(t, has_detail() && s == SENTINEL_SVC, "'%s'", bad[i]);
  }
}

/* STATUS-7: unknown and deleted ids are NOT_FOUND for open, info and delete. */
static void unknown_and_deleted_ids(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  char unknown[80], deleted[80];
  conf_unique_id(unknown, sizeof unknown, "never-made");
  conf_unique_id(deleted, sizeof deleted, "deleted");
  llmsvc_context* ctx = conf_new_context(t, svc, deleted, 1, NULL);
  if (ctx) {
    llmsvc_call_options o = conf_greedy(1);
    CONF_STATUS(t, llmsvc_call(ctx, "Hi", 2, &o, NULL, NULL, NULL), LLMSVC_OK);
  }
  conf_close_and_delete(t, svc, ctx);
  const char* ids[] = {unknown, deleted};
  for (int i = 0; i < 2; i++) {
    llmsvc_context* c = SENTINEL_CTX;
    CONF_STATUS(t, llmsvc_context_open(svc, ids[i], &c), LLMSVC_ERR_NOT_FOUND);
    CONF_CHECK(t, has_detail() && c == SENTINEL_CTX);
    llmsvc_context_info info;
    llmsvc_context_info_init(&info);
    CONF_STATUS(t, llmsvc_context_info_get(svc, ids[i], &info), LLMSVC_ERR_NOT_FOUND);
    CONF_STATUS(t, llmsvc_context_delete(svc, ids[i]), LLMSVC_ERR_NOT_FOUND);
  }
  llmsvc_unbind(svc);
}

/* STATUS-8: new with an id that exists (open or closed) is EXISTS; the context is unchanged. */
static void existing_id(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  char id[80];
  conf_unique_id(id, sizeof id, "exists");
  llmsvc_context* ctx = conf_new_context(t, svc, id, 1, NULL);
  CONF_REQUIRE(t, ctx != NULL);
  llmsvc_call_options o = conf_greedy(1);
  CONF_STATUS(t, llmsvc_call(ctx, "Hi", 2, &o, NULL, NULL, NULL), LLMSVC_OK);
  llmsvc_context_info before = conf_info(t, svc, id);
  llmsvc_context* dup = SENTINEL_CTX;
  llmsvc_context_options co;
  llmsvc_context_options_init(&co);
  co.id = id;
  CONF_STATUS(t, llmsvc_context_new(svc, &co, &dup), LLMSVC_ERR_EXISTS);
  CONF_CHECK(t, has_detail() && dup == SENTINEL_CTX);
  llmsvc_context_close(ctx);
  CONF_STATUS(t, llmsvc_context_new(svc, &co, &dup), LLMSVC_ERR_EXISTS);
  llmsvc_context_info after = conf_info(t, svc, id);
  CONF_CHECK(t, after.tokens == before.tokens && after.tokens > 0, "tokens %d -> %d", before.tokens, after.tokens);
  CONF_STATUS(t, llmsvc_context_delete(svc, id), LLMSVC_OK);
  llmsvc_unbind(svc);
}

/* STATUS-9: a call on a context inside another call (through a second handle) is BUSY. The
 * first call waits in its callback until the second has answered, so the overlap is certain. */
typedef struct busy_probe {
  conf_caller other; /* the call through the second handle */
  int tried;
} busy_probe;

static int call_other_while_busy(const char* piece, size_t len, int32_t token, void* user) {
  (void)piece;
  (void)len;
  (void)token;
  busy_probe* p = user;
  if (!p->tried) {
    p->tried = 1;
    /* From another thread: a context handle is used by one thread at a time. */
    pthread_t th;
    if (pthread_create(&th, NULL, conf_call_thread, &p->other) == 0) pthread_join(th, NULL);
  }
  return 0;
}

static void busy_context(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  char id[80];
  conf_unique_id(id, sizeof id, "busy");
  llmsvc_context* a = conf_new_context(t, svc, id, 1, NULL);
  CONF_REQUIRE(t, a != NULL);
  llmsvc_context* b = NULL;
  CONF_STATUS(t, llmsvc_context_open(svc, id, &b), LLMSVC_OK);
  if (b) {
    busy_probe p;
    conf_caller_init(&p.other, b, "Hi", 1, NULL, NULL);
    p.tried = 0;
    llmsvc_call_options o = conf_greedy(3);
    CONF_STATUS(t, llmsvc_call(a, "One, two,", 9, &o, call_other_while_busy, &p, NULL), LLMSVC_OK);
    CONF_CHECK(t, p.tried, "no piece came");
    CONF_CHECK(t, p.other.status == LLMSVC_ERR_BUSY, "the overlapping call gave %s",
               llmsvc_status_name(p.other.status));
    /* Once the first call is over the second handle works. */
    CONF_STATUS(t, llmsvc_call(b, " three", 6, &o, NULL, NULL, NULL), LLMSVC_OK);
    llmsvc_context_close(b);
  }
  conf_close_and_delete(t, svc, a);
  llmsvc_unbind(svc);
}

/* STATUS-10: a callback returning non-zero cancels: CANCELLED, no piece after it, the result
 * written (finish reason CANCELLED), what was generated kept in the context. */
static void cancel_from_callback(conf_t* t) {
  conf_fixture f;
  CONF_REQUIRE(t, conf_setup(t, &f, "cancel-cb", 1));
  conf_text c;
  conf_text_init(&c);
  c.cancel_after = 2;
  /* A slow "stop": through the daemon, tokens are generated while the callback sleeps and the
   * CANCEL is not yet sent; their pieces must not reach the callback. */
  c.cancel_delay_ms = 60;
  llmsvc_call_options o = conf_greedy(64);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  r.finish_reason = -1;
  const char* prompt = "1, 2, 3, 4, 5, 6,";
  CONF_STATUS(t, llmsvc_call(f.ctx, prompt, strlen(prompt), &o, conf_collect, &c, &r), LLMSVC_ERR_CANCELLED);
  CONF_CHECK(t, has_detail());
  /* The callback hears nothing after it said stop, on either transport. */
  CONF_CHECK(t, c.pieces == 2 && c.pieces_after_cancel == 0, "%d pieces, %d after the cancel", c.pieces,
             c.pieces_after_cancel);
  CONF_CHECK(t, r.finish_reason == LLMSVC_FINISH_CANCELLED, "finish reason %d", r.finish_reason);
  CONF_CHECK(t, r.generated_tokens >= 2 && r.generated_tokens < 64, "generated %d", r.generated_tokens);
  llmsvc_context_info info = conf_info(t, f.svc, f.id);
  CONF_CHECK(t, info.tokens == r.context_tokens && r.context_tokens == r.prompt_tokens + r.generated_tokens,
             "context %d, result %d = %d + %d", info.tokens, r.context_tokens, r.prompt_tokens, r.generated_tokens);
  /* The context goes on: the next call is not cancelled. */
  llmsvc_call_options o2 = conf_greedy(2);
  CONF_STATUS(t, llmsvc_call(f.ctx, " 9,", 3, &o2, NULL, NULL, NULL), LLMSVC_OK);
  conf_text_free(&c);
  conf_teardown(t, &f);
}

/* STATUS-11: cancel on an idle context is a no-op that succeeds: the next call runs in full. */
static void cancel_while_idle(conf_t* t) {
  conf_fixture f;
  CONF_REQUIRE(t, conf_setup(t, &f, "cancel-idle", 1));
  CONF_STATUS(t, llmsvc_context_cancel(f.ctx), LLMSVC_OK);
  llmsvc_call_options o = conf_greedy(3);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  CONF_STATUS(t, llmsvc_call(f.ctx, "1, 2, 3,", 8, &o, NULL, NULL, &r), LLMSVC_OK);
  CONF_CHECK(t, r.generated_tokens == 3 && r.finish_reason == LLMSVC_FINISH_LENGTH, "%d tokens, finish %d",
             r.generated_tokens, r.finish_reason);
  conf_teardown(t, &f);
}

/* STATUS-12: unix: where no daemon listens is UNAVAILABLE: a missing path, and a socket file
 * nobody listens on (what a crashed daemon leaves). */
static void unavailable(conf_t* t) {
  char dir[] = "/tmp/llmsvc-conf-XXXXXX";
  CONF_REQUIRE(t, mkdtemp(dir) != NULL);
  char missing[128], stale[96];
  snprintf(missing, sizeof missing, "unix:%s/nobody.sock", dir);
  snprintf(stale, sizeof stale, "%s/stale.sock", dir);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", stale);
  CONF_CHECK(t, fd >= 0 && bind(fd, (struct sockaddr*)&addr, sizeof addr) == 0, "cannot make a stale socket");
  char stale_target[136];
  snprintf(stale_target, sizeof stale_target, "unix:%s", stale);
  const char* targets[] = {missing, stale_target};
  for (int i = 0; i < 2; i++) {
    llmsvc_bind_options bo;
    llmsvc_bind_options_init(&bo);
    bo.target = targets[i];
    llmsvc_service* s = SENTINEL_SVC;
    CONF_STATUS(t, llmsvc_bind(&bo, &s), LLMSVC_ERR_UNAVAILABLE);
    CONF_CHECK(t, has_detail() && s == SENTINEL_SVC, "%s", targets[i]);
  }
  if (fd >= 0) close(fd);
  unlink(stale);
  rmdir(dir);
}

/* STATUS-13: a prompt longer than the context allows is CONTEXT_OVERFLOW; the context is
 * unchanged and takes the next call. The prompt is ~500 tokens more than the service's n_ctx
 * (llmsvc_model_info), and less than any transport's prompt size limit for the default model. */
static void oversized_prompt(conf_t* t) {
  conf_fixture f;
  CONF_REQUIRE(t, conf_setup(t, &f, "overflow", 1));
  llmsvc_model_info mi;
  llmsvc_model_info_init(&mi);
  CONF_STATUS(t, llmsvc_model_info_get(f.svc, &mi), LLMSVC_OK);
  size_t n = (size_t)(mi.n_ctx > 0 ? mi.n_ctx : 8192) + 500;
  char* prompt = malloc(2 * n + 1);
  CONF_REQUIRE(t, prompt != NULL);
  for (size_t i = 0; i < n; i++) memcpy(prompt + 2 * i, " 7", 2);
  prompt[2 * n] = '\0';
  conf_text c;
  conf_text_init(&c);
  llmsvc_call_options o = conf_greedy(2);
  CONF_STATUS(t, llmsvc_call(f.ctx, prompt, 2 * n, &o, conf_collect, &c, NULL), LLMSVC_ERR_CONTEXT_OVERFLOW);
  CONF_CHECK(t, has_detail() && c.pieces == 0);
  llmsvc_context_info info = conf_info(t, f.svc, f.id);
  CONF_CHECK(t, info.tokens == 0, "%d tokens after the refused prompt", info.tokens);
  CONF_STATUS(t, llmsvc_call(f.ctx, "Hi", 2, &o, NULL, NULL, NULL), LLMSVC_OK);
  free(prompt);
  conf_text_free(&c);
  conf_teardown(t, &f);
}

/* STATUS-16: a prompt of hundreds of kilobytes or more is longer than any context allows:
 * CONTEXT_OVERFLOW, whatever transport limits it meets on the way. */
static void huge_prompt(conf_t* t) {
  conf_fixture f;
  CONF_REQUIRE(t, conf_setup(t, &f, "huge", 1));
  const size_t sizes[] = {300u << 10, 1100u << 10};
  char* prompt = malloc(sizes[1]);
  CONF_REQUIRE(t, prompt != NULL);
  for (size_t i = 0; i + 1 < sizes[1]; i += 2) memcpy(prompt + i, " 7", 2);
  for (int k = 0; k < 2; k++) {
    llmsvc_call_options o = conf_greedy(1);
    CONF_STATUS(t, llmsvc_call(f.ctx, prompt, sizes[k], &o, NULL, NULL, NULL), LLMSVC_ERR_CONTEXT_OVERFLOW);
  }
  free(prompt);
  conf_teardown(t, &f);
}

/* STATUS-14: the model path is an embedded field: a missing file is MODEL_NOT_FOUND and a file
 * that is not GGUF is MODEL_INVALID embedded; bound to the daemon the field is ignored. */
static void model_errors(conf_t* t) {
  char dir[] = "/tmp/llmsvc-conf-XXXXXX";
  CONF_REQUIRE(t, mkdtemp(dir) != NULL);
  char missing[128], junk[128];
  snprintf(missing, sizeof missing, "%s/no-such-model.gguf", dir);
  snprintf(junk, sizeof junk, "%s/junk.gguf", dir);
  FILE* f = fopen(junk, "wb");
  CONF_REQUIRE(t, f != NULL);
  for (int i = 0; i < 256; i++) fputs("this is not a GGUF file\n", f);
  fclose(f);
  const char* paths[] = {missing, junk};
  const llmsvc_status embedded_want[] = {LLMSVC_ERR_MODEL_NOT_FOUND, LLMSVC_ERR_MODEL_INVALID};
  for (int i = 0; i < 2; i++) {
    llmsvc_bind_options bo;
    llmsvc_bind_options_init(&bo);
    bo.target = t->env->target;
    bo.model_path = paths[i];
    llmsvc_service* s = SENTINEL_SVC;
    if (t->env->is_unix) {
      CONF_STATUS(t, llmsvc_bind(&bo, &s), LLMSVC_OK);
      if (s != SENTINEL_SVC) llmsvc_unbind(s);
    } else {
      CONF_STATUS(t, llmsvc_bind(&bo, &s), embedded_want[i]);
      CONF_CHECK(t, has_detail() && s == SENTINEL_SVC);
    }
  }
  unlink(junk);
  rmdir(dir);
}

/* STATUS-17: past a per-app quota, QUOTA_EXCEEDED with a detail, and nothing changes. The
 * daemon's quota on the contexts an app holds, named by the runner in
 * $LLMSVC_CONF_QUOTA_CONTEXTS (run_suite.sh configures the daemon with it); embedded has none. */
static int count_id(const char* id, void* user) {
  (void)id;
  ++*(int*)user;
  return 0;
}

static void quota_exceeded(conf_t* t) {
  const char* q = getenv("LLMSVC_CONF_QUOTA_CONTEXTS");
  const int quota = q ? atoi(q) : 0;
  if (!t->env->is_unix || quota <= 0) {
    conf_skip(t, "needs a daemon with quotas.contexts, named in LLMSVC_CONF_QUOTA_CONTEXTS (run_suite.sh daemon)");
    return;
  }
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  int held = 0;
  CONF_STATUS(t, llmsvc_context_list(svc, count_id, &held), LLMSVC_OK);
  CONF_REQUIRE(t, held < quota);
  const int made = quota - held;
  char(*ids)[80] = calloc((size_t)quota + 1, sizeof *ids);
  CONF_REQUIRE(t, ids != NULL);
  for (int i = 0; i <= made; i++) conf_unique_id(ids[i], sizeof ids[i], "quota");
  for (int i = 0; i < made; i++) {
    llmsvc_context* c = conf_new_context(t, svc, ids[i], 1, NULL);
    CONF_CHECK(t, c != NULL, "context %d of %d", i + 1, made);
    llmsvc_context_close(c);
  }
  llmsvc_context_options co;
  llmsvc_context_options_init(&co);
  co.id = ids[made];
  llmsvc_context* over = SENTINEL_CTX;
  CONF_STATUS(t, llmsvc_context_new(svc, &co, &over), LLMSVC_ERR_QUOTA_EXCEEDED);
  CONF_CHECK(t, has_detail() && over == SENTINEL_CTX);
  int now = 0;
  CONF_STATUS(t, llmsvc_context_list(svc, count_id, &now), LLMSVC_OK);
  CONF_CHECK(t, now == quota, "%d contexts held after the refusal, quota %d", now, quota);
  llmsvc_context_info info;
  llmsvc_context_info_init(&info);
  CONF_STATUS(t, llmsvc_context_info_get(svc, ids[made], &info), LLMSVC_ERR_NOT_FOUND);
  /* Deleting one makes room again. */
  CONF_STATUS(t, llmsvc_context_delete(svc, ids[0]), LLMSVC_OK);
  over = conf_new_context(t, svc, ids[made], 1, NULL);
  CONF_CHECK(t, over != NULL);
  llmsvc_context_close(over);
  for (int i = 1; i <= made; i++) CONF_STATUS(t, llmsvc_context_delete(svc, ids[i]), LLMSVC_OK);
  free(ids);
  llmsvc_unbind(svc);
}

/* STATUS-15: llmsvc_last_error is per thread: another thread's failure does not show here. */
static void* fail_in_thread(void* arg) {
  (void)arg;
  llmsvc_context* c = NULL;
  llmsvc_context_open(NULL, "x", &c);
  return (void*)(llmsvc_last_error()[0] != '\0' ? (void*)1 : NULL);
}

static void last_error_per_thread(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  llmsvc_stats s;
  llmsvc_stats_init(&s);
  CONF_STATUS(t, llmsvc_get_stats(svc, &s), LLMSVC_OK);
  CONF_CHECK(t, llmsvc_last_error() != NULL && llmsvc_last_error()[0] == '\0');
  pthread_t th;
  void* other_had_detail = NULL;
  CONF_REQUIRE(t, pthread_create(&th, NULL, fail_in_thread, NULL) == 0);
  pthread_join(th, &other_had_detail);
  CONF_CHECK(t, other_had_detail != NULL, "the failing thread saw no detail");
  CONF_CHECK(t, llmsvc_last_error()[0] == '\0', "another thread's failure shows here: '%s'", llmsvc_last_error());
  CONF_STATUS(t, llmsvc_context_delete(svc, "x y"), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, has_detail());
  CONF_STATUS(t, llmsvc_get_stats(svc, &s), LLMSVC_OK);
  CONF_CHECK(t, llmsvc_last_error()[0] == '\0', "a success clears it: '%s'", llmsvc_last_error());
  llmsvc_unbind(svc);
}

const conf_test conf_status_tests[] = {
    {"STATUS-1", "NULL handles / out pointers: INVALID_ARGUMENT with a detail, out untouched", null_arguments},
    {"STATUS-2", "a prompt that is not UTF-8: INVALID_UTF8, nothing streamed or kept", invalid_utf8_prompt},
    {"STATUS-3", "ids, system prompts, stop strings, targets that are not UTF-8: INVALID_UTF8", invalid_utf8_strings},
    {"STATUS-4", "ids outside 1..64 bytes of [A-Za-z0-9._-] or . / ..: INVALID_ARGUMENT", bad_ids},
    {"STATUS-5", "call option values out of range: INVALID_ARGUMENT; range edges accepted", bad_call_options},
    {"STATUS-6", "a target other than embedded / unix:PATH: INVALID_ARGUMENT", bad_targets},
    {"STATUS-7", "unknown and deleted ids: NOT_FOUND for open, info, delete", unknown_and_deleted_ids},
    {"STATUS-8", "new with an existing id: EXISTS, the context unchanged", existing_id},
    {"STATUS-9", "a call on a context inside another call: BUSY", busy_context},
    {"STATUS-10", "callback returning non-zero: CANCELLED, result written, output kept", cancel_from_callback},
    {"STATUS-11", "cancel while idle succeeds and is a no-op", cancel_while_idle},
    {"STATUS-12", "unix: with nothing listening: UNAVAILABLE", unavailable},
    {"STATUS-13", "a prompt longer than the context: CONTEXT_OVERFLOW, context unchanged", oversized_prompt},
    {"STATUS-14", "model path: MODEL_NOT_FOUND / MODEL_INVALID embedded, ignored by the daemon", model_errors},
    {"STATUS-15", "llmsvc_last_error is per thread and \"\" after a success", last_error_per_thread},
    {"STATUS-16", "a prompt of hundreds of KiB / over a MiB: CONTEXT_OVERFLOW on every transport", huge_prompt},
    {"STATUS-17", "past a per-app quota (the daemon's contexts per app): QUOTA_EXCEEDED, nothing changed", quota_exceeded},
    {NULL, NULL, NULL}};
