// SPDX-License-Identifier: Apache-2.0
/* test_structured.c — JSON-*: structured output (llmsvc_call_options.json_schema and .grammar):
 * the reply is what the schema or grammar allows, complete, and a bad one is a clear error. */
#include <ctype.h>
#include <string.h>

#include "support.h"
#include "tests.h"

/* One greedy chat call with a constraint; the text in `out`, the result in `r`. */
static llmsvc_status constrained(conf_t* t, llmsvc_service* svc, const char* prompt, const char* schema,
                                 const char* grammar, int32_t max_tokens, conf_text* out, llmsvc_call_result* r) {
  conf_text_init(out);
  char id[80];
  conf_unique_id(id, sizeof id, "json");
  llmsvc_context* ctx = conf_new_context(t, svc, id, 0, NULL);
  if (!ctx) return LLMSVC_ERR_INTERNAL;
  llmsvc_call_options o = conf_greedy(max_tokens);
  o.json_schema = schema;
  o.grammar = grammar;
  llmsvc_call_result_init(r);
  const llmsvc_status st = llmsvc_call(ctx, prompt, strlen(prompt), &o, conf_collect, out, r);
  conf_close_and_delete(t, svc, ctx);
  return st;
}

/* JSON-1: an enum schema: the reply is exactly one of its values (a JSON string), ended by the
 * model (EOS) once complete; constrain_ms is reported. */
static void enum_schema(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  conf_text out;
  llmsvc_call_result r;
  CONF_STATUS(t, constrained(t, svc, "What color is the sky?", "{\"enum\": [\"red\", \"green\", \"blue\"]}", NULL, 16, &out, &r),
              LLMSVC_OK);
  CONF_CHECK(t, strcmp(out.data, "\"red\"") == 0 || strcmp(out.data, "\"green\"") == 0 || strcmp(out.data, "\"blue\"") == 0,
             "reply '%s'", out.data);
  CONF_CHECK(t, r.finish_reason == LLMSVC_FINISH_EOS, "finish %d", r.finish_reason);
  CONF_CHECK(t, r.constrain_ms > 0.0, "constrain_ms %f", r.constrain_ms);
  conf_text_free(&out);
  llmsvc_unbind(svc);
}

/* Skips JSON whitespace. */
static const char* ws(const char* p) {
  while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
  return p;
}

/* JSON-2: an object schema with a string and an integer, both required and no others: the
 * reply is that object (checked by a strict little parser of exactly this shape, keys in any
 * order), complete within max_tokens. */
static void object_schema(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  const char* schema =
      "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 20}, "
      "\"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 150}}, \"required\": [\"name\", \"age\"], "
      "\"additionalProperties\": false}";
  conf_text out;
  llmsvc_call_result r;
  CONF_STATUS(t, constrained(t, svc, "Describe a person called Ada who is 36, as JSON.", schema, NULL, 48, &out, &r),
              LLMSVC_OK);
  const char* p = ws(out.data);
  int ok = *p == '{', seen_name = 0, seen_age = 0;
  if (ok) p = ws(p + 1);
  for (int k = 0; ok && k < 2; k++) {
    if (strncmp(p, "\"name\"", 6) == 0 && !seen_name) {
      p = ws(p + 6);
      ok = *p == ':';
      p = ws(p + 1);
      ok = ok && *p == '"';
      for (p++; ok && *p && *p != '"'; p++)
        if (*p == '\\') p++;
      ok = ok && *p == '"';
      p = ws(p + 1);
      seen_name = 1;
    } else if (strncmp(p, "\"age\"", 5) == 0 && !seen_age) {
      p = ws(p + 5);
      ok = *p == ':';
      p = ws(p + 1);
      ok = ok && isdigit((unsigned char)*p);
      while (isdigit((unsigned char)*p)) p++;
      p = ws(p);
      seen_age = 1;
    } else {
      ok = 0;
    }
    if (ok && k == 0) {
      ok = *p == ',';
      p = ws(p + 1);
    }
  }
  ok = ok && *p == '}' && *ws(p + 1) == '\0';
  CONF_CHECK(t, ok && seen_name && seen_age, "reply '%s' is not the schema's object", out.data);
  CONF_CHECK(t, r.finish_reason == LLMSVC_FINISH_EOS, "finish %d ('%s')", r.finish_reason, out.data);
  conf_text_free(&out);
  llmsvc_unbind(svc);
}

/* JSON-3: a GBNF grammar: the reply is one of its sentences. */
static void gbnf_grammar(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  conf_text out;
  llmsvc_call_result r;
  CONF_STATUS(t, constrained(t, svc, "Is water wet? Answer yes or no.", NULL, "root ::= (\"yes\" | \"no\") \".\"", 8, &out, &r),
              LLMSVC_OK);
  CONF_CHECK(t, strcmp(out.data, "yes.") == 0 || strcmp(out.data, "no.") == 0, "reply '%s'", out.data);
  conf_text_free(&out);
  llmsvc_unbind(svc);
}

/* JSON-4: a schema that is not JSON, a grammar that does not parse, both at once: INVALID_ARGUMENT
 * naming json_schema / grammar; not UTF-8: INVALID_UTF8; nothing added to the context. */
static void bad_constraints(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "json4", 0)) return;
  llmsvc_call_options o = conf_greedy(8);
  const char* prompt = "Hello";
  o.json_schema = "{\"type\": ";
  CONF_STATUS(t, llmsvc_call(f.ctx, prompt, strlen(prompt), &o, NULL, NULL, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, strstr(llmsvc_last_error(), "json_schema") != NULL, "detail: %s", llmsvc_last_error());
  o.json_schema = NULL;
  o.grammar = "root ::= (";
  CONF_STATUS(t, llmsvc_call(f.ctx, prompt, strlen(prompt), &o, NULL, NULL, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, strstr(llmsvc_last_error(), "grammar") != NULL, "detail: %s", llmsvc_last_error());
  o.json_schema = "{\"type\": \"string\"}";
  o.grammar = "root ::= \"a\"";
  CONF_STATUS(t, llmsvc_call(f.ctx, prompt, strlen(prompt), &o, NULL, NULL, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  o.grammar = NULL;
  o.json_schema = "{\"enum\": [\"\xff\"]}";
  CONF_STATUS(t, llmsvc_call(f.ctx, prompt, strlen(prompt), &o, NULL, NULL, NULL), LLMSVC_ERR_INVALID_UTF8);
  CONF_CHECK(t, conf_info(t, f.svc, f.id).tokens == 0, "a refused call left tokens");
  conf_teardown(t, &f);
}

const conf_test conf_structured_tests[] = {
    {"JSON-1", "an enum schema: the reply is one of its values, ended by the model; constrain_ms reported", enum_schema},
    {"JSON-2", "an object schema: the reply is that object, complete", object_schema},
    {"JSON-3", "a GBNF grammar: the reply is one of its sentences", gbnf_grammar},
    {"JSON-4", "a bad schema or grammar, both at once, not UTF-8: a clear status, the context unchanged", bad_constraints},
    {NULL, NULL, NULL}};
