// SPDX-License-Identifier: Apache-2.0
/* test_isolation.c — ISO-*: through the daemon, contexts live in the calling user's own
 * namespace. As root, forked children drop to two unprivileged uids and bind to the daemon;
 * each child's exit code is 0 or the number of the check that failed. */
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"
#include "tests.h"

enum { kAlice = 65534, kBob = 65533 };

/* Runs body(target, id) in a child as `uid`; its exit code, or 200 + signal / 100 when it
 * could not become `uid`. */
static int as_user(uid_t uid, int (*body)(const char*, const char*), const char* target, const char* id) {
  fflush(stdout); /* the child must not print the parent's buffered TAP again */
  pid_t pid = fork();
  if (pid < 0) return 99;
  if (pid == 0) {
    if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(100);
    _exit(body(target, id));
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 98;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static llmsvc_service* bind_quiet(const char* target) {
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = target;
  llmsvc_service* svc = NULL;
  return llmsvc_bind(&o, &svc) == LLMSVC_OK ? svc : NULL;
}

/* A new chat context named `id`; NULL when that fails. */
static llmsvc_context* new_named(llmsvc_service* svc, const char* id) {
  llmsvc_context_options o;
  llmsvc_context_options_init(&o);
  o.id = id;
  llmsvc_context* ctx = NULL;
  return llmsvc_context_new(svc, &o, &ctx) == LLMSVC_OK ? ctx : NULL;
}

static int listed_cb(const char* id, void* user) {
  const char** want = user;
  if (strcmp(id, *want) == 0) *want = NULL; /* found */
  return 0;
}

/* 1 when `id` is in the caller's list, 0 when not, -1 when the list fails. */
static int is_listed(llmsvc_service* svc, const char* id) {
  const char* want = id;
  if (llmsvc_context_list(svc, listed_cb, &want) != LLMSVC_OK) return -1;
  return want == NULL;
}

/* Alice makes `id` with one turn. */
static int alice_creates(const char* target, const char* id) {
  llmsvc_service* svc = bind_quiet(target);
  if (!svc) return 1;
  llmsvc_context* ctx = new_named(svc, id);
  if (!ctx) return 2;
  llmsvc_call_options co = conf_greedy(2);
  if (llmsvc_call(ctx, "My PIN is 1234.", 15, &co, NULL, NULL, NULL) != LLMSVC_OK) return 3;
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
  return 0;
}

/* Bob cannot see, open, describe or delete Alice's `id`. */
static int bob_cannot_reach(const char* target, const char* id) {
  llmsvc_service* svc = bind_quiet(target);
  if (!svc) return 1;
  if (is_listed(svc, id) != 0) return 2;
  llmsvc_context* ctx = NULL;
  if (llmsvc_context_open(svc, id, &ctx) != LLMSVC_ERR_NOT_FOUND || ctx != NULL) return 3;
  llmsvc_context_info info;
  llmsvc_context_info_init(&info);
  if (llmsvc_context_info_get(svc, id, &info) != LLMSVC_ERR_NOT_FOUND) return 4;
  if (llmsvc_context_delete(svc, id) != LLMSVC_ERR_NOT_FOUND) return 5;
  /* The detail must not name another app's storage. */
  if (strstr(llmsvc_last_error(), "uid-") != NULL || strstr(llmsvc_last_error(), "65534") != NULL) return 6;
  llmsvc_unbind(svc);
  return 0;
}

/* Bob makes his own `id`: a context of his, which he then deletes. */
static int bob_same_id(const char* target, const char* id) {
  llmsvc_service* svc = bind_quiet(target);
  if (!svc) return 1;
  llmsvc_context* ctx = new_named(svc, id);
  if (!ctx) return 2;
  llmsvc_context_info info;
  llmsvc_context_info_init(&info);
  if (llmsvc_context_info_get(svc, id, &info) != LLMSVC_OK || info.tokens != 0 || info.turns != 0) return 3;
  llmsvc_context_close(ctx);
  if (is_listed(svc, id) != 1) return 4;
  if (llmsvc_context_delete(svc, id) != LLMSVC_OK) return 5;
  llmsvc_unbind(svc);
  return 0;
}

/* Alice's `id` is as she left it (one turn); she deletes it. */
static int alice_finds_and_deletes(const char* target, const char* id) {
  llmsvc_service* svc = bind_quiet(target);
  if (!svc) return 1;
  if (is_listed(svc, id) != 1) return 2;
  llmsvc_context_info info;
  llmsvc_context_info_init(&info);
  if (llmsvc_context_info_get(svc, id, &info) != LLMSVC_OK || info.turns != 1) return 3;
  if (llmsvc_context_delete(svc, id) != LLMSVC_OK) return 4;
  llmsvc_unbind(svc);
  return 0;
}

static int can_run(conf_t* t) {
  if (!t->env->is_unix) {
    conf_skip(t, "embedded: contexts are the process's own, no per-uid namespaces");
    return 0;
  }
  if (geteuid() != 0) {
    conf_skip(t, "needs root to fork children as two unprivileged uids");
    return 0;
  }
  return 1;
}

/* ISO-1: another uid cannot list, open, describe or delete a context; nor can the runner's
 * own uid (root is an app like any other). */
static void other_uid_cannot_reach(conf_t* t) {
  if (!can_run(t)) return;
  char id[80];
  conf_unique_id(id, sizeof id, "secret");
  int rc = as_user(kAlice, alice_creates, t->env->target, id);
  CONF_REQUIRE(t, rc == 0, "uid %d making its context: check %d (100: could not switch uid)", kAlice, rc);
  rc = as_user(kBob, bob_cannot_reach, t->env->target, id);
  CONF_CHECK(t, rc == 0, "uid %d reaching uid %d's context: check %d", kBob, kAlice, rc);
  CONF_CHECK(t, bob_cannot_reach(t->env->target, id) == 0, "the runner's uid reached uid %d's context", kAlice);
  rc = as_user(kAlice, alice_finds_and_deletes, t->env->target, id);
  CONF_CHECK(t, rc == 0, "uid %d finding its context untouched: check %d", kAlice, rc);
}

/* ISO-2: the same id in two uids names two contexts: one's new, use and delete leave the
 * other's as it was. */
static void same_id_two_uids(conf_t* t) {
  if (!can_run(t)) return;
  char id[80];
  conf_unique_id(id, sizeof id, "shared-name");
  int rc = as_user(kAlice, alice_creates, t->env->target, id);
  CONF_REQUIRE(t, rc == 0, "uid %d making its context: check %d", kAlice, rc);
  rc = as_user(kBob, bob_same_id, t->env->target, id);
  CONF_CHECK(t, rc == 0, "uid %d with the same id: check %d", kBob, rc);
  rc = as_user(kAlice, alice_finds_and_deletes, t->env->target, id);
  CONF_CHECK(t, rc == 0, "uid %d finding its context untouched: check %d", kAlice, rc);
}

const conf_test conf_isolation_tests[] = {
    {"ISO-1", "daemon: another uid cannot list, open, info or delete a context", other_uid_cannot_reach},
    {"ISO-2", "daemon: the same id in two uids is two contexts", same_id_two_uids},
    {NULL, NULL, NULL}};
