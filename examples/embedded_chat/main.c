// SPDX-License-Identifier: Apache-2.0
/*
 * embedded_chat: a multi-turn chat with the model running inside this process.
 *
 *   embedded_chat [--context ID] [--max-tokens N] [--model PATH]
 *
 * Every line of standard input is one user turn; the reply streams to standard output
 * piece by piece as the model generates it. --context ID keeps the conversation in the
 * persistent context ID (created on first use, resumed by a later run); without it the
 * conversation is deleted on exit. The model is the default one (tools/scripts/fetch_model.sh)
 * unless --model names another GGUF file; contexts live in $LLMSVC_STATE_DIR (or the XDG
 * state directory).
 *
 * Build against an installed llmsvc:
 *   cc -std=c11 main.c $(pkg-config --cflags --libs llmsvc) -o embedded_chat
 * or with CMake: find_package(llmsvc), this folder's CMakeLists.txt.
 */
#define _POSIX_C_SOURCE 200809L /* getline */

#include <llmsvc/llmsvc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints why an llmsvc_ function failed. The status name is read before llmsvc_last_error():
 * the detail is only valid until the next llmsvc_ call. */
static int report(const char* what, llmsvc_status status) {
  const char* name = llmsvc_status_name(status);
  const char* detail = llmsvc_last_error();
  fprintf(stderr, "embedded_chat: %s: %s%s%s\n", what, name, *detail ? ": " : "", detail);
  return 1;
}

/* The llmsvc_call callback: each piece is valid UTF-8, not NUL-terminated. */
static int print_piece(const char* piece, size_t len, int32_t token, void* user) {
  (void)token;
  (void)user;
  fwrite(piece, 1, len, stdout);
  fflush(stdout); /* show the reply as it is generated */
  return 0;       /* non-zero would cancel the call */
}

/* The persistent context `id`, resumed if it exists and created if not; NULL `id`: a fresh
 * context with a generated id. */
static llmsvc_status open_context(llmsvc_service* service, const char* id, llmsvc_context** out) {
  if (id) {
    llmsvc_status status = llmsvc_context_open(service, id, out);
    if (status != LLMSVC_ERR_NOT_FOUND) return status;
  }
  llmsvc_context_options options;
  llmsvc_context_options_init(&options);
  options.id = id;
  return llmsvc_context_new(service, &options, out);
}

/* One turn per input line until the end of input; 0, or 1 after a failed call. */
static int converse(llmsvc_context* context, const llmsvc_call_options* options) {
  char* line = NULL;
  size_t capacity = 0;
  ssize_t n;
  int exit_code = 0;
  while ((n = getline(&line, &capacity, stdin)) >= 0) {
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    if (n == 0) continue;
    llmsvc_status status = llmsvc_call(context, line, (size_t)n, options, print_piece, NULL, NULL);
    fputc('\n', stdout);
    if (status != LLMSVC_OK) {
      exit_code = report("call", status);
      break;
    }
  }
  free(line);
  return exit_code;
}

static int usage(void) {
  fprintf(stderr, "usage: embedded_chat [--context ID] [--max-tokens N] [--model PATH] < turns.txt\n");
  return 2;
}

int main(int argc, char** argv) {
  const char* context_id = NULL;
  const char* model = NULL;
  int max_tokens = 128;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && strcmp(argv[i], "--context") == 0) {
      context_id = argv[++i];
    } else if (i + 1 < argc && strcmp(argv[i], "--model") == 0) {
      model = argv[++i];
    } else if (i + 1 < argc && strcmp(argv[i], "--max-tokens") == 0) {
      max_tokens = atoi(argv[++i]);
    } else {
      return usage();
    }
  }
  /* The library must be the major version this program was compiled against. */
  if ((llmsvc_abi_version() >> 16) != LLMSVC_ABI_VERSION_MAJOR) {
    fprintf(stderr, "embedded_chat: libllmsvc ABI %u.%u, built for %d.x\n", (unsigned)(llmsvc_abi_version() >> 16),
            (unsigned)(llmsvc_abi_version() & 0xffff), LLMSVC_ABI_VERSION_MAJOR);
    return 1;
  }

  llmsvc_bind_options bind;
  llmsvc_bind_options_init(&bind);
  bind.target = "embedded"; /* in this process, whatever $LLMSVC_TARGET says */
  bind.model_path = model;  /* NULL: the default model */
  llmsvc_service* service = NULL;
  llmsvc_status status = llmsvc_bind(&bind, &service);
  if (status != LLMSVC_OK) return report("bind", status);

  llmsvc_context* context = NULL;
  status = open_context(service, context_id, &context);
  if (status != LLMSVC_OK) {
    llmsvc_unbind(service);
    return report("context", status);
  }

  llmsvc_call_options call;
  llmsvc_call_options_init(&call);
  call.max_tokens = max_tokens;
  int exit_code = converse(context, &call);

  /* A context without --context was only for this session: delete it once closed. */
  char fresh_id[65] = "";
  if (!context_id) snprintf(fresh_id, sizeof fresh_id, "%s", llmsvc_context_id(context));
  llmsvc_context_close(context);
  if (fresh_id[0] && (status = llmsvc_context_delete(service, fresh_id)) != LLMSVC_OK)
    exit_code = report("delete", status);
  llmsvc_unbind(service);
  return exit_code;
}
