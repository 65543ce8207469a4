// SPDX-License-Identifier: Apache-2.0
/* tests.h — the test tables, one per test_*.c file (each ends with an entry whose id is NULL). */
#ifndef LLMSVC_CONFORMANCE_TESTS_H
#define LLMSVC_CONFORMANCE_TESTS_H

#include "runner.h"

extern const conf_test conf_lifecycle_tests[];   /* LIFE-*    test_lifecycle.c */
extern const conf_test conf_status_tests[];      /* STATUS-*  test_status.c */
extern const conf_test conf_struct_size_tests[]; /* SIZE-*    test_struct_size.c */
extern const conf_test conf_stream_tests[];      /* STREAM-*  test_stream.c */
extern const conf_test conf_determinism_tests[]; /* DET-*     test_determinism.c */
extern const conf_test conf_stats_tests[];       /* STATS-*   test_stats.c */
extern const conf_test conf_persist_tests[];     /* PERSIST-* test_persist.c */
extern const conf_test conf_thread_tests[];      /* THREAD-*  test_threads.c */
extern const conf_test conf_isolation_tests[];   /* ISO-*     test_isolation.c */
extern const conf_test conf_model_info_tests[];  /* INFO-*, COUNT-* test_model_info.c */
extern const conf_test conf_token_stream_tests[]; /* TOKS-*    test_token_stream.c */
extern const conf_test conf_messages_tests[];    /* MSG-*     test_messages.c */
extern const conf_test conf_structured_tests[];  /* JSON-*    test_structured.c */
extern const conf_test conf_fork_tests[];        /* FORK-*    test_fork.c */
extern const conf_test conf_tools_tests[];       /* TOOL-*    test_tools.c */
extern const conf_test conf_level_tests[];       /* LEVEL-*   test_level.c */
extern const conf_test conf_keep_tests[];        /* KEEP-*    test_keep.c */
extern const conf_test conf_adapter_tests[];     /* ADAPTER-* test_adapter.c */

#endif /* LLMSVC_CONFORMANCE_TESTS_H */
