// SPDX-License-Identifier: Apache-2.0
/* test_threads.c — THREAD-*: what the header promises about threads: one service handle from
 * several threads at once, concurrent calls on different contexts, cancel from any thread. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "support.h"
#include "tests.h"

enum { kThreads = 3 };

static const char* const kPrompts[kThreads] = {"The capital of Italy is", "Water boils at", "The largest planet is"};

/* THREAD-1: calls on different contexts from several threads at once all succeed and give
 * what each gives alone. */
static void concurrent_calls(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  conf_text alone[kThreads];
  for (int i = 0; i < kThreads; i++) CONF_STATUS(t, conf_call_fresh(t, svc, kPrompts[i], 1, 8, &alone[i], NULL), LLMSVC_OK);
  conf_caller c[kThreads];
  conf_text text[kThreads];
  pthread_t th[kThreads];
  int started[kThreads] = {0};
  for (int i = 0; i < kThreads; i++) {
    char id[80];
    conf_unique_id(id, sizeof id, "thread");
    conf_text_init(&text[i]);
    conf_caller_init(&c[i], conf_new_context(t, svc, id, 1, NULL), kPrompts[i], 8, conf_collect, &text[i]);
  }
  for (int i = 0; i < kThreads; i++)
    if (c[i].ctx) started[i] = pthread_create(&th[i], NULL, conf_call_thread, &c[i]) == 0;
  for (int i = 0; i < kThreads; i++)
    if (started[i]) pthread_join(th[i], NULL);
  for (int i = 0; i < kThreads; i++) {
    CONF_CHECK(t, started[i] && c[i].status == LLMSVC_OK, "thread %d: %s", i, llmsvc_status_name(c[i].status));
    CONF_CHECK(t, conf_same_tokens(&text[i], &alone[i]), "thread %d: '%s', alone '%s'", i, text[i].data,
               alone[i].data);
    conf_close_and_delete(t, svc, c[i].ctx);
    conf_text_free(&text[i]);
    conf_text_free(&alone[i]);
  }
  llmsvc_unbind(svc);
}

typedef struct worker {
  llmsvc_service* svc;
  int failures;
  char first[256];
} worker;

static void note(worker* w, const char* what, llmsvc_status st) {
  if (w->failures++ == 0)
    snprintf(w->first, sizeof w->first, "%s: %s (%s)", what, llmsvc_status_name(st), llmsvc_last_error());
}

static int count_cb(const char* id, void* user) {
  (void)id;
  (*(int*)user)++;
  return 0;
}

/* Creates, describes, lists and deletes contexts on the shared handle, over and over. */
static void* service_worker(void* arg) {
  worker* w = arg;
  for (int k = 0; k < 6; k++) {
    char id[80];
    conf_unique_id(id, sizeof id, "shared");
    llmsvc_context_options o;
    llmsvc_context_options_init(&o);
    o.id = id;
    o.raw = 1;
    llmsvc_context* ctx = NULL;
    llmsvc_status st = llmsvc_context_new(w->svc, &o, &ctx);
    if (st != LLMSVC_OK) {
      note(w, "new", st);
      continue;
    }
    llmsvc_context_info info;
    llmsvc_context_info_init(&info);
    if ((st = llmsvc_context_info_get(w->svc, id, &info)) != LLMSVC_OK || strcmp(info.id, id) != 0) note(w, "info", st);
    int n = 0;
    if ((st = llmsvc_context_list(w->svc, count_cb, &n)) != LLMSVC_OK || n < 1) note(w, "list", st);
    llmsvc_stats s;
    llmsvc_stats_init(&s);
    if ((st = llmsvc_get_stats(w->svc, &s)) != LLMSVC_OK || s.open_contexts < 1) note(w, "stats", st);
    llmsvc_context_close(ctx);
    if ((st = llmsvc_context_delete(w->svc, id)) != LLMSVC_OK) note(w, "delete", st);
  }
  return NULL;
}

/* THREAD-2: one service handle used from several threads at once. */
static void shared_service_handle(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  enum { kWorkers = 4 };
  worker w[kWorkers];
  pthread_t th[kWorkers];
  int started[kWorkers];
  for (int i = 0; i < kWorkers; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].svc = svc;
    started[i] = pthread_create(&th[i], NULL, service_worker, &w[i]) == 0;
  }
  for (int i = 0; i < kWorkers; i++) {
    if (started[i]) pthread_join(th[i], NULL);
    CONF_CHECK(t, started[i] && w[i].failures == 0, "worker %d: %d failures, first: %s", i, w[i].failures, w[i].first);
  }
  llmsvc_stats s;
  llmsvc_stats_init(&s);
  CONF_STATUS(t, llmsvc_get_stats(svc, &s), LLMSVC_OK);
  CONF_CHECK(t, s.open_contexts == 0, "%d handles still counted open", s.open_contexts);
  llmsvc_unbind(svc);
}

/* The call in THREAD-3 tells the main thread it is running, then waits for the cancel. */
typedef struct cancel_sync {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int running, cancelled;
  conf_text text;
} cancel_sync;

static int wait_for_cancel(const char* piece, size_t len, int32_t token, void* user) {
  cancel_sync* s = user;
  conf_collect(piece, len, token, &s->text);
  pthread_mutex_lock(&s->mu);
  s->running = 1;
  pthread_cond_broadcast(&s->cv);
  while (!s->cancelled) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
  return 0; /* the cancel, not the callback, ends the call */
}

/* THREAD-3: llmsvc_context_cancel from another thread ends a running call: CANCELLED, finish
 * reason CANCELLED, well before max_tokens. */
static void cancel_from_another_thread(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  char id[80];
  conf_unique_id(id, sizeof id, "cancel-thread");
  llmsvc_context* ctx = conf_new_context(t, svc, id, 1, NULL);
  CONF_REQUIRE(t, ctx != NULL);
  cancel_sync s;
  memset(&s, 0, sizeof s);
  pthread_mutex_init(&s.mu, NULL);
  pthread_cond_init(&s.cv, NULL);
  conf_text_init(&s.text);
  /* Counting on: no end of turn for the model to reach before max_tokens. */
  conf_caller c;
  conf_caller_init(&c, ctx, "1, 2, 3, 4, 5, 6, 7, 8,", 200, wait_for_cancel, &s);
  pthread_t th;
  CONF_REQUIRE(t, pthread_create(&th, NULL, conf_call_thread, &c) == 0);
  pthread_mutex_lock(&s.mu);
  while (!s.running) pthread_cond_wait(&s.cv, &s.mu);
  pthread_mutex_unlock(&s.mu);
  CONF_STATUS(t, llmsvc_context_cancel(ctx), LLMSVC_OK);
  pthread_mutex_lock(&s.mu);
  s.cancelled = 1;
  pthread_cond_broadcast(&s.cv);
  pthread_mutex_unlock(&s.mu);
  pthread_join(th, NULL);
  CONF_CHECK(t, c.status == LLMSVC_ERR_CANCELLED, "the call gave %s", llmsvc_status_name(c.status));
  CONF_CHECK(t, c.result.finish_reason == LLMSVC_FINISH_CANCELLED && c.result.generated_tokens < 200,
             "finish %d after %d tokens", c.result.finish_reason, c.result.generated_tokens);
  /* The cancel was for that call only. */
  llmsvc_call_options o = conf_greedy(2);
  CONF_STATUS(t, llmsvc_call(ctx, " 9,", 3, &o, NULL, NULL, NULL), LLMSVC_OK);
  conf_close_and_delete(t, svc, ctx);
  conf_text_free(&s.text);
  pthread_cond_destroy(&s.cv);
  pthread_mutex_destroy(&s.mu);
  llmsvc_unbind(svc);
}

const conf_test conf_thread_tests[] = {
    {"THREAD-1", "concurrent calls on different contexts: each as if alone", concurrent_calls},
    {"THREAD-2", "one service handle used from several threads at once", shared_service_handle},
    {"THREAD-3", "cancel from another thread ends the running call", cancel_from_another_thread},
    {NULL, NULL, NULL}};
