// SPDX-License-Identifier: Apache-2.0
/*
 * daemon_client: one streamed call through the llmsvcd daemon, then the call's and the
 * service's figures.
 *
 *   daemon_client [--target unix:PATH] [--max-tokens N] PROMPT
 *
 * The daemon is --target, else $LLMSVC_TARGET (e.g. unix:/run/llmsvc/llmsvc.sock). The reply
 * streams to standard output; the figures go to standard error. The call runs in a fresh
 * context of the daemon, deleted at the end.
 *
 * Build against an installed llmsvc:
 *   cc -std=c11 main.c $(pkg-config --cflags --libs llmsvc) -o daemon_client
 * or with CMake: find_package(llmsvc), this folder's CMakeLists.txt.
 */
#include <llmsvc/llmsvc.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints why an llmsvc_ function failed. The status name is read before llmsvc_last_error():
 * the detail is only valid until the next llmsvc_ call. */
static void report(const char* what, llmsvc_status status) {
  const char* name = llmsvc_status_name(status);
  const char* detail = llmsvc_last_error();
  fprintf(stderr, "daemon_client: %s: %s%s%s\n", what, name, *detail ? ": " : "", detail);
}

/* The llmsvc_call callback: each piece is valid UTF-8, not NUL-terminated. */
static int print_piece(const char* piece, size_t len, int32_t token, void* user) {
  (void)token;
  (void)user;
  fwrite(piece, 1, len, stdout);
  fflush(stdout); /* show the reply as it arrives */
  return 0;       /* non-zero would cancel the call */
}

static const char* finish_name(int32_t reason) {
  switch (reason) {
    case LLMSVC_FINISH_EOS: return "end of turn";
    case LLMSVC_FINISH_LENGTH: return "max tokens";
    case LLMSVC_FINISH_STOP: return "stop string";
    case LLMSVC_FINISH_CANCELLED: return "cancelled";
    case LLMSVC_FINISH_CONTEXT_FULL: return "context full";
    default: return "none";
  }
}

/* What the daemon reports for this app; 0 or 1. */
static int print_stats(llmsvc_service* service) {
  llmsvc_stats stats;
  llmsvc_stats_init(&stats);
  llmsvc_status status = llmsvc_get_stats(service, &stats);
  if (status != LLMSVC_OK) {
    report("stats", status);
    return 1;
  }
  fprintf(stderr,
          "service: %" PRIu64 " calls, %" PRIu64 " prompt tokens, %" PRIu64 " generated, %d contexts; "
          "%" PRIu64 " bytes of weights, %" PRIu64 " bytes of KV cache (peak %" PRIu64 ")\n",
          stats.calls, stats.prompt_tokens, stats.generated_tokens, stats.known_contexts, stats.weight_bytes,
          stats.kv_bytes, stats.kv_peak_bytes);
  return 0;
}

/* The call on a fresh context of `service`, then the call's and the service's figures on
 * stderr; 0 or 1. */
static int call_once(llmsvc_service* service, const char* prompt, int max_tokens) {
  llmsvc_context* context = NULL;
  llmsvc_status status = llmsvc_context_new(service, NULL, &context);
  if (status != LLMSVC_OK) {
    report("context", status);
    return 1;
  }
  llmsvc_call_options options;
  llmsvc_call_options_init(&options);
  options.max_tokens = max_tokens;
  llmsvc_call_result result;
  llmsvc_call_result_init(&result);
  status = llmsvc_call(context, prompt, strlen(prompt), &options, print_piece, NULL, &result);
  fputc('\n', stdout);
  int exit_code = 0;
  if (status == LLMSVC_OK) {
    fprintf(stderr, "call: %d prompt tokens, %d generated (%s), %.1f ms to the first token, %.2f ms per token\n",
            result.prompt_tokens, result.generated_tokens, finish_name(result.finish_reason), result.ttft_ms,
            result.tpot_ms);
  } else {
    report("call", status);
    exit_code = 1;
  }
  if (print_stats(service) != 0) exit_code = 1;

  /* The context was only for this call; the daemon keeps contexts until they are deleted. */
  char id[65];
  snprintf(id, sizeof id, "%s", llmsvc_context_id(context));
  llmsvc_context_close(context);
  if ((status = llmsvc_context_delete(service, id)) != LLMSVC_OK) {
    report("delete", status);
    exit_code = 1;
  }
  return exit_code;
}

static int usage(void) {
  fprintf(stderr, "usage: daemon_client [--target unix:PATH] [--max-tokens N] PROMPT\n");
  return 2;
}

int main(int argc, char** argv) {
  const char* target = getenv("LLMSVC_TARGET");
  const char* prompt = NULL;
  int max_tokens = 64;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && strcmp(argv[i], "--target") == 0) {
      target = argv[++i];
    } else if (i + 1 < argc && strcmp(argv[i], "--max-tokens") == 0) {
      max_tokens = atoi(argv[++i]);
    } else if (!prompt && argv[i][0] != '-') {
      prompt = argv[i];
    } else {
      return usage();
    }
  }
  if (!prompt) return usage();
  /* A NULL or "embedded" target would load the model in this process instead. */
  if (!target || strncmp(target, "unix:", 5) != 0) {
    fprintf(stderr, "daemon_client: no daemon to talk to: give --target unix:PATH or set LLMSVC_TARGET\n");
    return 2;
  }

  llmsvc_bind_options bind;
  llmsvc_bind_options_init(&bind);
  bind.target = target;
  llmsvc_service* service = NULL;
  llmsvc_status status = llmsvc_bind(&bind, &service);
  if (status != LLMSVC_OK) {
    report("bind", status);
    if (status == LLMSVC_ERR_UNAVAILABLE) fprintf(stderr, "daemon_client: is llmsvcd listening on %s?\n", target + 5);
    return 1;
  }
  int exit_code = call_once(service, prompt, max_tokens);
  llmsvc_unbind(service);
  return exit_code;
}
