// SPDX-License-Identifier: Apache-2.0
/* main.c — llmsvc_conformance: the black-box suite's command line.
 *
 *   llmsvc_conformance [TARGET] [--compare-with TARGET] [--restart-cmd CMD] [--only IDS] [--list]
 *
 * TARGET: "embedded" or "unix:PATH"; default $LLMSVC_TARGET, else embedded. --restart-cmd
 * (or $LLMSVC_CONF_RESTART_CMD) restarts the daemon behind a unix: target, for the restart
 * tests. --only runs the given ids (comma-separated; "STATUS-*" for a prefix). Exit status:
 * 0 when every test passed or was skipped, 1 otherwise, 2 on a usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "tests.h"

static const conf_group kGroups[] = {
    {conf_lifecycle_tests}, {conf_status_tests},  {conf_struct_size_tests}, {conf_stream_tests},
    {conf_determinism_tests}, {conf_stats_tests}, {conf_persist_tests},     {conf_thread_tests},
    {conf_isolation_tests},   {conf_model_info_tests}, {conf_token_stream_tests},
    {conf_messages_tests}, {conf_structured_tests}, {conf_fork_tests}, {conf_tools_tests},
    {conf_level_tests},
    {conf_keep_tests},
    {conf_adapter_tests},
};

static int usage(const char* argv0) {
  fprintf(stderr, "usage: %s [embedded|unix:PATH] [--compare-with TARGET] [--restart-cmd CMD] [--only IDS] [--list]\n",
          argv0);
  return 2;
}

int main(int argc, char** argv) {
  conf_env env;
  memset(&env, 0, sizeof env);
  const char* only = NULL;
  int list = 0;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    if (strcmp(a, "--compare-with") == 0 && i + 1 < argc) env.compare_target = argv[++i];
    else if (strcmp(a, "--restart-cmd") == 0 && i + 1 < argc) env.restart_cmd = argv[++i];
    else if (strcmp(a, "--only") == 0 && i + 1 < argc) only = argv[++i];
    else if (strcmp(a, "--list") == 0) list = 1;
    else if (a[0] != '-' && !env.target) env.target = a;
    else return usage(argv[0]);
  }
  const size_t n_groups = sizeof kGroups / sizeof kGroups[0];
  if (list) {
    conf_list(kGroups, n_groups);
    return 0;
  }
  if (!env.target) env.target = getenv("LLMSVC_TARGET");
  if (!env.target || !*env.target) env.target = "embedded";
  if (!env.restart_cmd) env.restart_cmd = getenv("LLMSVC_CONF_RESTART_CMD");
  if (env.restart_cmd && !*env.restart_cmd) env.restart_cmd = NULL;
  env.is_unix = strncmp(env.target, "unix:", 5) == 0;
  /* LIFE-4 checks that bind(NULL) follows $LLMSVC_TARGET: point it at the target under test
   * (before any thread exists: setenv is not thread-safe). */
  if (setenv("LLMSVC_TARGET", env.target, 1) != 0) return 2;
  return conf_run(&env, kGroups, n_groups, only) == 0 ? 0 : 1;
}
