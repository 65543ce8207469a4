// SPDX-License-Identifier: Apache-2.0
/* test_model_info.c — INFO-*: llmsvc_model_info_get (the model, the service's n_ctx, readiness)
 * and COUNT-*: llmsvc_count_tokens (what a prompt adds, as llmsvc_call counts it). */
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "tests.h"

/* A NUL-terminated field of `size` bytes that is valid UTF-8. */
static int text_field_ok(const char* s, size_t size) {
  const size_t n = strnlen(s, size);
  return n < size && conf_utf8_valid(s, n);
}

static int get_info(conf_t* t, llmsvc_service* svc, llmsvc_model_info* info) {
  llmsvc_model_info_init(info);
  llmsvc_status st = llmsvc_model_info_get(svc, info);
  if (st != LLMSVC_OK)
    conf_fail_at(t, __FILE__, __LINE__, "model_info_get: %s (%s)", llmsvc_status_name(st), llmsvc_last_error());
  return st == LLMSVC_OK;
}

/* INFO-1: the model as the header describes it: ready, its architecture and name, parameters,
 * trained length, vocabulary, weight types by bytes, the chat template, special tokens (ids in
 * the vocabulary, with their text), and the devices; every string NUL-terminated UTF-8. */
static void describes_model(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  llmsvc_model_info i;
  if (get_info(t, svc, &i)) {
    CONF_CHECK(t, i.struct_size == sizeof i, "struct_size changed to %zu", i.struct_size);
    CONF_CHECK(t, i.ready != 0);
    CONF_CHECK(t, text_field_ok(i.architecture, sizeof i.architecture) && i.architecture[0] != '\0');
    CONF_CHECK(t, text_field_ok(i.name, sizeof i.name));
    CONF_CHECK(t, i.n_params > 1000000, "%llu parameters", (unsigned long long)i.n_params);
    CONF_CHECK(t, i.n_ctx_train > 0 && i.n_ctx > 0, "trained %d, n_ctx %d", i.n_ctx_train, i.n_ctx);
    CONF_CHECK(t, i.n_vocab > 0 && i.n_layer > 0 && i.n_embd > 0 && i.n_head > 0 && i.n_head_kv > 0);
    CONF_CHECK(t, i.n_weight_types >= 1 && i.n_weight_types <= LLMSVC_MAX_WEIGHT_TYPES, "%d types", i.n_weight_types);
    uint64_t bytes = 0;
    for (int k = 0; k < i.n_weight_types && k < LLMSVC_MAX_WEIGHT_TYPES; k++) {
      const llmsvc_weight_type* w = &i.weight_types[k];
      CONF_CHECK(t, text_field_ok(w->name, sizeof w->name) && w->name[0] != '\0');
      CONF_CHECK(t, w->tensors > 0 && w->bytes > 0, "%s: %d tensors, %llu bytes", w->name, w->tensors,
                 (unsigned long long)w->bytes);
      CONF_CHECK(t, k == 0 || w->bytes <= i.weight_types[k - 1].bytes, "%s is not in order of bytes", w->name);
      bytes += w->bytes;
    }
    CONF_CHECK(t, bytes > 0 && bytes <= i.weight_bytes, "types hold %llu of %llu bytes", (unsigned long long)bytes,
               (unsigned long long)i.weight_bytes);
    /* The default model, SmolLM2-Instruct, has a chat template and ends its turns with <|im_end|>. */
    CONF_CHECK(t, i.has_chat_template != 0);
    const llmsvc_special_token* specials[] = {&i.bos, &i.eos, &i.eot};
    for (int k = 0; k < 3; k++) {
      CONF_CHECK(t, specials[k]->id >= -1 && specials[k]->id < i.n_vocab, "special token id %d", specials[k]->id);
      CONF_CHECK(t, text_field_ok(specials[k]->text, sizeof specials[k]->text));
      CONF_CHECK(t, specials[k]->id >= 0 || specials[k]->text[0] == '\0');
    }
    CONF_CHECK(t, i.eos.id >= 0 && i.eos.text[0] != '\0', "eos %d '%s'", i.eos.id, i.eos.text);
    CONF_CHECK(t, text_field_ok(i.devices, sizeof i.devices) && i.devices[0] != '\0');
  }
  llmsvc_unbind(svc);
}

/* INFO-2: by default a context holds the model's trained length (no lower cap); embedded, the
 * bind's n_ctx is the n_ctx reported (the daemon ignores that field). */
static void n_ctx_in_effect(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  llmsvc_model_info i;
  if (get_info(t, svc, &i)) CONF_CHECK(t, i.n_ctx == i.n_ctx_train, "n_ctx %d, trained %d", i.n_ctx, i.n_ctx_train);
  llmsvc_unbind(svc);
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = t->env->target;
  o.device = getenv("LLMSVC_CONF_DEVICES");
  o.n_ctx = 64;
  svc = NULL;
  CONF_STATUS_REQ(t, llmsvc_bind(&o, &svc), LLMSVC_OK);
  if (get_info(t, svc, &i)) {
    const int32_t want = t->env->is_unix ? i.n_ctx_train : 64;
    CONF_CHECK(t, i.n_ctx == want, "n_ctx %d, expected %d", i.n_ctx, want);
  }
  llmsvc_unbind(svc);
}

/* INFO-3: the model is described alike through both transports (--compare-with). */
static void same_across_transports(conf_t* t) {
  if (!t->env->compare_target) {
    conf_skip(t, "no --compare-with target");
    return;
  }
  llmsvc_service* a = conf_bind(t, t->env->target);
  llmsvc_service* b = conf_bind(t, t->env->compare_target);
  llmsvc_model_info x, y;
  if (a && b && get_info(t, a, &x) && get_info(t, b, &y)) {
    CONF_CHECK(t, strcmp(x.architecture, y.architecture) == 0 && strcmp(x.name, y.name) == 0);
    CONF_CHECK(t, x.n_params == y.n_params && x.n_ctx_train == y.n_ctx_train && x.n_vocab == y.n_vocab);
    CONF_CHECK(t, x.n_weight_types == y.n_weight_types &&
                      memcmp(x.weight_types, y.weight_types, sizeof x.weight_types) == 0);
    CONF_CHECK(t, x.bos.id == y.bos.id && x.eos.id == y.eos.id && x.eot.id == y.eot.id);
    CONF_CHECK(t, strcmp(x.eos.text, y.eos.text) == 0 && strcmp(x.eot.text, y.eot.text) == 0);
    CONF_CHECK(t, x.has_chat_template == y.has_chat_template && x.ready == y.ready);
  }
  llmsvc_unbind(a);
  llmsvc_unbind(b);
}

/* INFO-4: NULL service or out: INVALID_ARGUMENT; a struct_size below the first version:
 * INVALID_ARGUMENT, out untouched; a larger one is filled and its tail and struct_size left
 * alone; _init sets struct_size and the special ids to -1; NULL is harmless. */
static void info_bad_input(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  llmsvc_model_info_init(NULL);
  llmsvc_model_info i;
  llmsvc_model_info_init(&i);
  CONF_CHECK(t, i.struct_size == sizeof i && i.bos.id == -1 && i.eos.id == -1 && i.eot.id == -1 && i.ready == 0);
  CONF_STATUS(t, llmsvc_model_info_get(NULL, &i), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_model_info_get(svc, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, llmsvc_last_error()[0] != '\0');
  i.struct_size = 8;
  CONF_STATUS(t, llmsvc_model_info_get(svc, &i), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, i.struct_size == 8 && i.ready == 0 && i.n_vocab == 0, "a refused struct was written");
  struct {
    llmsvc_model_info info;
    unsigned char tail[32];
  } big;
  memset(&big, 0xAB, sizeof big);
  big.info.struct_size = sizeof big;
  CONF_STATUS(t, llmsvc_model_info_get(svc, &big.info), LLMSVC_OK);
  CONF_CHECK(t, big.info.struct_size == sizeof big && big.info.ready != 0 && big.info.n_vocab > 0);
  int tail_kept = 1;
  for (size_t k = 0; k < sizeof big.tail; k++) tail_kept &= big.tail[k] == 0xAB;
  CONF_CHECK(t, tail_kept, "the tail past the library's struct was written");
  llmsvc_unbind(svc);
}

/* The count of `text` with the given options (ids NULL); -1 and a failure when it fails. */
static int32_t count(conf_t* t, llmsvc_service* svc, const char* text, int chat, int first, const char* sys) {
  llmsvc_count_options o;
  llmsvc_count_options_init(&o);
  o.chat = chat;
  o.first_turn = first;
  o.system_prompt = sys;
  int32_t n = -1;
  llmsvc_status st = llmsvc_count_tokens(svc, text, strlen(text), &o, &n);
  if (st != LLMSVC_OK) {
    conf_fail_at(t, __FILE__, __LINE__, "count_tokens('%s'): %s (%s)", text, llmsvc_status_name(st),
                 llmsvc_last_error());
    return -1;
  }
  return n;
}

/* Two calls of `first` then `second` (prefill only) on a fresh context; their prompt_tokens. */
static void call_counts(conf_t* t, llmsvc_service* svc, int raw, const char* sys, const char* first,
                        const char* second, int32_t out[2]) {
  char id[80];
  conf_unique_id(id, sizeof id, "count");
  llmsvc_context* ctx = conf_new_context(t, svc, id, raw, sys);
  out[0] = out[1] = -2;
  if (!ctx) return;
  const char* prompts[] = {first, second};
  for (int k = 0; k < 2; k++) {
    llmsvc_call_options o = conf_greedy(0);
    llmsvc_call_result r;
    llmsvc_call_result_init(&r);
    CONF_STATUS(t, llmsvc_call(ctx, prompts[k], strlen(prompts[k]), &o, NULL, NULL, &r), LLMSVC_OK);
    out[k] = r.prompt_tokens;
  }
  conf_close_and_delete(t, svc, ctx);
}

/* COUNT-1: a raw text counts what a raw context's call adds: with first_turn what its first
 * call reports in prompt_tokens (BOS included where the model adds one), without it a later
 * call's; special-token text is parsed as llmsvc_call parses it in a raw context. */
static void counts_raw(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  const char* a = "The quick brown fox <|im_end|> jumps";
  const char* b = " over the lazy dog, twice: \xe6\x97\xa5\xe6\x9c\xac.";
  int32_t calls[2];
  call_counts(t, svc, 1, NULL, a, b, calls);
  const int32_t first = count(t, svc, a, 0, 1, NULL), later = count(t, svc, b, 0, 0, NULL);
  CONF_CHECK(t, first == calls[0], "first: %d counted, %d by the call", first, calls[0]);
  CONF_CHECK(t, later == calls[1], "later: %d counted, %d by the call", later, calls[1]);
  int32_t n = -1;
  CONF_STATUS(t, llmsvc_count_tokens(svc, NULL, 0, NULL, &n), LLMSVC_OK);
  CONF_CHECK(t, n == 0, "an empty text counts %d", n);
  llmsvc_unbind(svc);
}

/* COUNT-2: a chat text counts the user turn with the chat template's tokens, as a chat
 * context's calls report them: with first_turn the system turn (the given system prompt, or the
 * template's default) opens it; later turns have none. */
static void counts_chat(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  const char* sys = "You answer in one word.";
  const char* a = "What colour is the sky?";
  const char* b = "And at night?";
  int32_t with_sys[2], with_default[2];
  call_counts(t, svc, 0, sys, a, b, with_sys);
  call_counts(t, svc, 0, NULL, a, b, with_default);
  CONF_CHECK(t, count(t, svc, a, 1, 1, sys) == with_sys[0], "%d / %d", count(t, svc, a, 1, 1, sys), with_sys[0]);
  CONF_CHECK(t, count(t, svc, a, 1, 1, NULL) == with_default[0], "%d / %d", count(t, svc, a, 1, 1, NULL),
             with_default[0]);
  CONF_CHECK(t, count(t, svc, b, 1, 0, NULL) == with_sys[1] && with_sys[1] == with_default[1], "%d / %d / %d",
             count(t, svc, b, 1, 0, NULL), with_sys[1], with_default[1]);
  /* The template adds tokens around the text. */
  CONF_CHECK(t, count(t, svc, b, 1, 0, NULL) > count(t, svc, b, 0, 0, NULL));
  llmsvc_unbind(svc);
}

/* COUNT-3: the ids: with room for fewer than the count, exactly that many are written (the
 * first ones) and the count stays whole; they are vocabulary ids, and the same as with room
 * for all. */
static void count_ids(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  llmsvc_model_info info;
  CONF_REQUIRE(t, get_info(t, svc, &info));
  const char* text = "Counting tokens, with ids: \xf0\x9f\x98\x80 and more words to make a few.";
  int32_t all[128], some[8 + 4];
  for (int k = 0; k < 12; k++) some[k] = -7;
  llmsvc_count_options o;
  llmsvc_count_options_init(&o);
  o.first_turn = 1;
  o.ids = all;
  o.ids_capacity = 128;
  int32_t n_all = -1, n_some = -1;
  CONF_STATUS_REQ(t, llmsvc_count_tokens(svc, text, strlen(text), &o, &n_all), LLMSVC_OK);
  CONF_REQUIRE(t, n_all > 8 && n_all <= 128, "%d tokens", n_all);
  for (int k = 0; k < n_all; k++) CONF_CHECK(t, all[k] >= 0 && all[k] < info.n_vocab, "id %d", all[k]);
  o.ids = some;
  o.ids_capacity = 8;
  CONF_STATUS(t, llmsvc_count_tokens(svc, text, strlen(text), &o, &n_some), LLMSVC_OK);
  CONF_CHECK(t, n_some == n_all, "%d with 8 places, %d with all", n_some, n_all);
  CONF_CHECK(t, memcmp(some, all, 8 * sizeof all[0]) == 0 && some[8] == -7, "the first 8 ids differ or more were written");
  llmsvc_unbind(svc);
}

/* COUNT-4: bad input: text not UTF-8 (INVALID_UTF8), NULL service or out_count, NULL ids with
 * a capacity, a struct_size below the first version (INVALID_ARGUMENT), a system prompt that is
 * not UTF-8 (INVALID_UTF8): out_count and the ids untouched. A text of 300 KiB counts embedded;
 * through llmsvcd it is longer than a prompt may be: CONTEXT_OVERFLOW. */
static void count_bad_input(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  llmsvc_count_options_init(NULL);
  llmsvc_count_options o;
  llmsvc_count_options_init(&o);
  CONF_CHECK(t, o.struct_size == sizeof o && o.chat == 0 && o.first_turn == 0 && o.ids == NULL && o.ids_capacity == 0);
  int32_t n = -5, ids[4] = {-5, -5, -5, -5};
  CONF_STATUS(t, llmsvc_count_tokens(svc, "ab\xc3", 3, &o, &n), LLMSVC_ERR_INVALID_UTF8);
  CONF_STATUS(t, llmsvc_count_tokens(NULL, "ab", 2, &o, &n), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_count_tokens(svc, "ab", 2, &o, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_count_tokens(svc, NULL, 2, &o, &n), LLMSVC_ERR_INVALID_ARGUMENT);
  o.ids_capacity = 4;
  CONF_STATUS(t, llmsvc_count_tokens(svc, "ab", 2, &o, &n), LLMSVC_ERR_INVALID_ARGUMENT);
  o.ids = ids;
  o.chat = 1;
  o.first_turn = 1;
  o.system_prompt = "\xed\xa0\x80";  /* a surrogate */
  CONF_STATUS(t, llmsvc_count_tokens(svc, "ab", 2, &o, &n), LLMSVC_ERR_INVALID_UTF8);
  o.system_prompt = NULL;
  o.struct_size = 4;
  CONF_STATUS(t, llmsvc_count_tokens(svc, "ab", 2, &o, &n), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, n == -5 && ids[0] == -5, "a refused count wrote its results");
  const size_t big = 300u << 10;
  char* text = malloc(big);
  CONF_REQUIRE(t, text != NULL);
  for (size_t k = 0; k + 1 < big; k += 2) memcpy(text + k, " 7", 2);
  llmsvc_count_options_init(&o);
  const llmsvc_status st = llmsvc_count_tokens(svc, text, big, &o, &n);
  if (t->env->is_unix) {
    CONF_CHECK(t, st == LLMSVC_ERR_CONTEXT_OVERFLOW && n == -5, "%s, count %d", llmsvc_status_name(st), n);
  } else {
    CONF_CHECK(t, st == LLMSVC_OK && n > 1000, "%s, count %d", llmsvc_status_name(st), n);
  }
  free(text);
  llmsvc_unbind(svc);
}

const conf_test conf_model_info_tests[] = {
    {"INFO-1", "model info: ready, architecture, name, parameters, lengths, vocabulary, weight types, template, special tokens, devices", describes_model},
    {"INFO-2", "n_ctx in effect: the trained length by default; embedded, the bind's n_ctx", n_ctx_in_effect},
    {"INFO-3", "the model is described alike through both transports", same_across_transports},
    {"INFO-4", "model info: NULLs, struct_size too small (untouched) or larger (tail untouched), _init", info_bad_input},
    {"COUNT-1", "a raw text counts what a raw context's first / later call adds", counts_raw},
    {"COUNT-2", "a chat text counts the templated user turn (first: with the system turn), as calls report", counts_chat},
    {"COUNT-3", "ids: the first min(count, capacity) written, the count whole", count_ids},
    {"COUNT-4", "count: bad UTF-8, NULLs, ids without room, struct_size: a clear status, nothing written; 300 KiB", count_bad_input},
    {NULL, NULL, NULL}};
