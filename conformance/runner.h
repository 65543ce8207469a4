// SPDX-License-Identifier: Apache-2.0
/* runner.h — the conformance suite's tiny test runner: a table of tests with stable
 * requirement ids, checks that record a diagnostic and go on, TAP version 13 output. */
#ifndef LLMSVC_CONFORMANCE_RUNNER_H
#define LLMSVC_CONFORMANCE_RUNNER_H

#include <stddef.h>

#include "llmsvc/llmsvc.h"

/* What the whole run is pointed at (set once by main, read by every test). */
typedef struct conf_env {
  const char* target;         /* "embedded" or "unix:PATH" */
  const char* compare_target; /* a second target greedy output is compared with, or NULL */
  const char* restart_cmd;    /* shell command restarting the daemon behind target, or NULL */
  int is_unix;                /* target names a daemon */
} conf_env;

/* One test's state while it runs. */
typedef struct conf_t {
  const conf_env* env;
  int failures;
  int skipped;
  char skip_reason[256];
  char todo[256]; /* non-empty: a known library bug; a failure is reported as TAP TODO */
  char diag[4096]; /* "# file:line: message" lines */
  size_t diag_len;
} conf_t;

typedef void (*conf_fn)(conf_t* t);

typedef struct conf_test {
  const char* id;    /* stable requirement id, e.g. "STATUS-3" */
  const char* title; /* the promise, in a few words */
  conf_fn fn;
} conf_test;

/* A group of tests (one test_*.c file), terminated by an entry with id NULL. */
typedef struct conf_group {
  const conf_test* tests;
} conf_group;

void conf_fail_at(conf_t* t, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
void conf_skip(conf_t* t, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* Marks the test as exposing a known, reported library bug: it still runs and still fails,
 * but as "not ok ... # TODO reason", which does not fail the run (TAP semantics). */
void conf_todo(conf_t* t, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* Runs the tests of `groups` whose id matches `only` (NULL: all; else a comma-separated list
 * of ids or id prefixes ending in '*'); prints TAP. Returns the number of failed tests. */
int conf_run(const conf_env* env, const conf_group* groups, size_t n_groups, const char* only);
/* Prints "ID<TAB>title" for every test. */
void conf_list(const conf_group* groups, size_t n_groups);

/* A failed check records where and why and lets the test go on; REQUIRE ends the test. */
#define CONF_CHECK(t, cond, ...)                                                      \
  do {                                                                                \
    if (!(cond)) conf_fail_at((t), __FILE__, __LINE__, "check failed: " #cond " " __VA_ARGS__); \
  } while (0)
#define CONF_REQUIRE(t, cond, ...)                                                    \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      conf_fail_at((t), __FILE__, __LINE__, "requirement failed: " #cond " " __VA_ARGS__); \
      return;                                                                         \
    }                                                                                 \
  } while (0)
/* A status check whose diagnostic names both codes and the library's last error. */
#define CONF_STATUS(t, expr, want)                                                         \
  do {                                                                                     \
    llmsvc_status conf_got_ = (expr);                                                      \
    if (conf_got_ != (want))                                                               \
      conf_fail_at((t), __FILE__, __LINE__, "%s gave %s, expected %s (last error: %s)", #expr, \
                   llmsvc_status_name(conf_got_), llmsvc_status_name(want), llmsvc_last_error()); \
  } while (0)
#define CONF_STATUS_REQ(t, expr, want)                                                     \
  do {                                                                                     \
    llmsvc_status conf_got_ = (expr);                                                      \
    if (conf_got_ != (want)) {                                                             \
      conf_fail_at((t), __FILE__, __LINE__, "%s gave %s, expected %s (last error: %s)", #expr, \
                   llmsvc_status_name(conf_got_), llmsvc_status_name(want), llmsvc_last_error()); \
      return;                                                                              \
    }                                                                                      \
  } while (0)

#endif /* LLMSVC_CONFORMANCE_RUNNER_H */
