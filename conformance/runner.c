// SPDX-License-Identifier: Apache-2.0
/* runner.c — runs the test table and prints TAP version 13. */
#include "runner.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void conf_fail_at(conf_t* t, const char* file, int line, const char* fmt, ...) {
  t->failures++;
  /* Only the file's base name: the build directory's path says nothing useful. */
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t room = sizeof t->diag - t->diag_len;
  if (room <= 1) return;
  int n = snprintf(t->diag + t->diag_len, room, "# %s:%d: %s\n", base, line, msg);
  if (n > 0) t->diag_len += (size_t)n < room ? (size_t)n : room - 1;
}

void conf_skip(conf_t* t, const char* fmt, ...) {
  t->skipped = 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->skip_reason, sizeof t->skip_reason, fmt, ap);
  va_end(ap);
}

void conf_todo(conf_t* t, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->todo, sizeof t->todo, fmt, ap);
  va_end(ap);
}

/* `only`: comma-separated ids, or prefixes ending in '*'. */
static int selected(const char* id, const char* only) {
  if (only == NULL || *only == '\0') return 1;
  const char* p = only;
  while (*p) {
    const char* end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n > 0 && p[n - 1] == '*') {
      if (strncmp(id, p, n - 1) == 0) return 1;
    } else if (strlen(id) == n && strncmp(id, p, n) == 0) {
      return 1;
    }
    p += n;
    if (*p == ',') p++;
  }
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void conf_list(const conf_group* groups, size_t n_groups) {
  for (size_t g = 0; g < n_groups; g++)
    for (const conf_test* c = groups[g].tests; c->id; c++) printf("%s\t%s\n", c->id, c->title);
}

int conf_run(const conf_env* env, const conf_group* groups, size_t n_groups, const char* only) {
  size_t planned = 0;
  for (size_t g = 0; g < n_groups; g++)
    for (const conf_test* c = groups[g].tests; c->id; c++) planned += selected(c->id, only);
  printf("TAP version 13\n1..%zu\n", planned);
  printf("# target: %s%s%s\n", env->target, env->compare_target ? ", compared with " : "",
         env->compare_target ? env->compare_target : "");
  fflush(stdout);
  size_t n = 0, passed = 0, failed = 0, skipped = 0, known = 0;
  for (size_t g = 0; g < n_groups; g++) {
    for (const conf_test* c = groups[g].tests; c->id; c++) {
      if (!selected(c->id, only)) continue;
      conf_t t;
      memset(&t, 0, sizeof t);
      t.env = env;
      const double t0 = now_s();
      c->fn(&t);
      const double took = now_s() - t0;
      n++;
      /* A test that failed before deciding to skip still fails. */
      if (t.failures > 0 && t.todo[0]) {
        known++;
        printf("not ok %zu - %s %s # TODO %s\n%s", n, c->id, c->title, t.todo, t.diag);
      } else if (t.failures > 0) {
        failed++;
        printf("not ok %zu - %s %s\n%s", n, c->id, c->title, t.diag);
      } else if (t.skipped) {
        skipped++;
        passed++;
        printf("ok %zu - %s %s # SKIP %s\n", n, c->id, c->title, t.skip_reason);
      } else if (t.todo[0]) {
        passed++;
        printf("ok %zu - %s %s # TODO %s (passes now: fixed?)\n", n, c->id, c->title, t.todo);
      } else {
        passed++;
        printf("ok %zu - %s %s\n", n, c->id, c->title);
      }
      /* Each test's wall time: where a slow device's run spends it. */
      printf("# %s took %.2f s\n", c->id, took);
      fflush(stdout);
    }
  }
  if (skipped) printf("# %zu of the passed were skipped\n", skipped);
  if (known) printf("# %zu known library bugs failed as TODO (not counted as failed)\n", known);
  printf("%zu passed, %zu failed\n", passed, failed);
  fflush(stdout);
  return (int)failed;
}
