// SPDX-License-Identifier: Apache-2.0
/* test_tools.c — TOOL-*: llmsvc_context_options.tools_json, LLMSVC_ROLE_TOOL messages and the
 * call result's tool figures (since ABI 1.4), as far as the suite's model shows them: tools it
 * cannot take are refused with a clear status and nothing made; a context without tools
 * refuses tool messages and reports no calls. (The calls themselves need a model whose chat
 * template renders tools: tests/model/engine_tools_test.cpp runs them on real templates.) */
#include <string.h>

#include "support.h"
#include "tests.h"

static const char kWeather[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}]";

/* A context_new with `tools` (raw or chat); its handle closed and deleted when made. */
static llmsvc_status new_with_tools(conf_t* t, llmsvc_service* svc, const char* tools, int raw) {
  char id[80];
  conf_unique_id(id, sizeof id, "tools");
  llmsvc_context_options o;
  llmsvc_context_options_init(&o);
  o.id = id;
  o.raw = raw;
  o.tools_json = tools;
  llmsvc_context* ctx = NULL;
  llmsvc_status st = llmsvc_context_new(svc, &o, &ctx);
  if (ctx) conf_close_and_delete(t, svc, ctx);
  return st;
}

/* TOOL-1: tools that are not a list of functions are INVALID_ARGUMENT on any model, naming
 * the tool; not UTF-8: INVALID_UTF8; tools on a raw context: INVALID_ARGUMENT; nothing made. */
static void bad_tools(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  const int n0 = conf_count_contexts(t, svc);
  CONF_STATUS(t, new_with_tools(t, svc, "{\"name\": \"get_weather\"}", 0), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, new_with_tools(t, svc, "[{\"type\": \"function\", \"function\": {\"name\": \"bad name\"}}]", 0),
              LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, strstr(llmsvc_last_error(), "tools[0]") != NULL, "last error: %s", llmsvc_last_error());
  CONF_STATUS(t, new_with_tools(t, svc, "[{\"name\": \"a\"}, {\"name\": \"a\"}]", 0), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, new_with_tools(t, svc, "[{\"name\": \"a\", \"parameters\": 3}]", 0), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, new_with_tools(t, svc, "[not json", 0), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, new_with_tools(t, svc, "[{\"name\": \"caf\xc3\"}]", 0), LLMSVC_ERR_INVALID_UTF8);
  CONF_STATUS(t, new_with_tools(t, svc, kWeather, 1), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, conf_count_contexts(t, svc) == n0, "%d contexts, %d before", conf_count_contexts(t, svc), n0);
  llmsvc_unbind(svc);
}

/* TOOL-2: valid tools are taken, or refused UNSUPPORTED where the model's chat template
 * renders none (nothing made then); "[]" declares none: a context as any other. */
static void tools_taken_or_unsupported(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  const int n0 = conf_count_contexts(t, svc);
  llmsvc_status st = new_with_tools(t, svc, kWeather, 0);
  CONF_CHECK(t, st == LLMSVC_OK || st == LLMSVC_ERR_UNSUPPORTED, "tools gave %s", llmsvc_status_name(st));
  if (st == LLMSVC_ERR_UNSUPPORTED)
    CONF_CHECK(t, strstr(llmsvc_last_error(), "tools") != NULL, "last error: %s", llmsvc_last_error());
  CONF_STATUS(t, new_with_tools(t, svc, "[]", 0), LLMSVC_OK);
  CONF_STATUS(t, new_with_tools(t, svc, NULL, 0), LLMSVC_OK);
  CONF_CHECK(t, conf_count_contexts(t, svc) == n0, "%d contexts, %d before", conf_count_contexts(t, svc), n0);
  llmsvc_unbind(svc);
}

static int last_tool_calls(const llmsvc_message* m, void* user) {
  int* out = user;
  out[0] = m->tool_calls != NULL || m->tool_calls_len != 0;
  out[1] = (int)m->struct_size >= (int)(offsetof(llmsvc_message, tool_calls_len) + sizeof(size_t));
  return 0;
}

/* TOOL-3: a context without tools: a tool message is INVALID_ARGUMENT (nothing appended), a
 * call's result reports no tool calls, and its messages carry none (tool_calls NULL, 0). */
static void no_tools_no_calls(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "tool3", 0)) return;
  conf_text out;
  conf_text_init(&out);
  llmsvc_call_options o = conf_greedy(6);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  r.tool_calls = r.tool_call_errors = -1;
  CONF_STATUS(t, llmsvc_call(f.ctx, "Call a tool.", 12, &o, conf_collect, &out, &r), LLMSVC_OK);
  CONF_CHECK(t, r.tool_calls == 0 && r.tool_call_errors == 0, "tool_calls %d, errors %d", r.tool_calls,
             r.tool_call_errors);
  conf_text_free(&out);
  llmsvc_message m;
  llmsvc_message_init(&m);
  m.role = LLMSVC_ROLE_TOOL;
  m.content = "{\"t\": 21}";
  m.content_len = strlen(m.content);
  const int tokens = conf_info(t, f.svc, f.id).tokens;
  CONF_STATUS(t, llmsvc_context_append(f.ctx, &m, 1), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, strstr(llmsvc_last_error(), "tools") != NULL, "last error: %s", llmsvc_last_error());
  CONF_CHECK(t, conf_info(t, f.svc, f.id).tokens == tokens, "the context changed");
  int seen[2] = {-1, -1};
  CONF_STATUS(t, llmsvc_context_messages(f.ctx, 1, last_tool_calls, seen), LLMSVC_OK);
  CONF_CHECK(t, seen[1] == 1, "the library's llmsvc_message has no tool_calls");
  CONF_CHECK(t, seen[0] == 0, "a reply of a context without tools carries tool calls");
  conf_teardown(t, &f);
}

const conf_test conf_tools_tests[] = {
    {"TOOL-1", "tools that are not a list of functions: INVALID_ARGUMENT naming the tool, nothing made", bad_tools},
    {"TOOL-2", "valid tools taken, or UNSUPPORTED where the template renders none; [] declares none",
     tools_taken_or_unsupported},
    {"TOOL-3", "without tools: tool messages refused, no calls in results or messages", no_tools_no_calls},
    {NULL, NULL, NULL},
};
