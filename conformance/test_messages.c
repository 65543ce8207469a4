// SPDX-License-Identifier: Apache-2.0
/* test_messages.c — MSG-*: a context's conversation (llmsvc_context_append, _generate,
 * _truncate, _messages): calls become messages, a seeded user message replies as a call does,
 * rewinding keeps the state before the cut, the turn order, raw contexts, persistence, bad input. */
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "tests.h"

#define MAX_MSGS 16

/* A conversation as read back. */
typedef struct conf_msgs {
  int n;
  int roles[MAX_MSGS];
  char* text[MAX_MSGS];
  int stop_after; /* > 0: the callback stops after this many */
} conf_msgs;

static int collect_msg(const llmsvc_message* m, void* user) {
  conf_msgs* c = user;
  if (c->n < MAX_MSGS) {
    c->roles[c->n] = m->role;
    c->text[c->n] = malloc(m->content_len + 1);
    if (c->text[c->n]) {
      if (m->content_len) memcpy(c->text[c->n], m->content, m->content_len);
      c->text[c->n][m->content_len] = '\0';
    }
  }
  c->n++;
  return c->stop_after > 0 && c->n >= c->stop_after;
}

static void msgs_free(conf_msgs* c) {
  for (int k = 0; k < c->n && k < MAX_MSGS; k++) free(c->text[k]);
  memset(c, 0, sizeof *c);
}

/* The conversation of `ctx` from `first`; a failure if reading it fails. */
static conf_msgs read_msgs(conf_t* t, llmsvc_context* ctx, size_t first) {
  conf_msgs c;
  memset(&c, 0, sizeof c);
  CONF_STATUS(t, llmsvc_context_messages(ctx, first, collect_msg, &c), LLMSVC_OK);
  return c;
}

static llmsvc_message msg(int role, const char* text) {
  llmsvc_message m;
  llmsvc_message_init(&m);
  m.role = role;
  m.content = text;
  m.content_len = text ? strlen(text) : 0;
  return m;
}

/* One greedy call (prompt NULL: llmsvc_context_generate) collecting its pieces. */
static llmsvc_status say(llmsvc_context* ctx, const char* prompt, int32_t max_tokens, conf_text* out,
                         llmsvc_call_result* r) {
  conf_text_init(out);
  llmsvc_call_options o = conf_greedy(max_tokens);
  llmsvc_call_result_init(r);
  if (!prompt) return llmsvc_context_generate(ctx, &o, conf_collect, out, r);
  return llmsvc_call(ctx, prompt, strlen(prompt), &o, conf_collect, out, r);
}

/* MSG-1: each call adds its prompt as a user message and its streamed reply as an assistant
 * message; turns counts the user messages. */
static void calls_become_messages(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "msg1", 0)) return;
  conf_text r1, r2;
  llmsvc_call_result res;
  CONF_STATUS(t, say(f.ctx, "Name a fruit.", 8, &r1, &res), LLMSVC_OK);
  CONF_STATUS(t, say(f.ctx, "And a color?", 8, &r2, &res), LLMSVC_OK);
  conf_msgs m = read_msgs(t, f.ctx, 0);
  CONF_CHECK(t, m.n == 4, "%d messages", m.n);
  if (m.n == 4) {
    CONF_CHECK(t, m.roles[0] == LLMSVC_ROLE_USER && m.roles[1] == LLMSVC_ROLE_ASSISTANT &&
                      m.roles[2] == LLMSVC_ROLE_USER && m.roles[3] == LLMSVC_ROLE_ASSISTANT);
    CONF_CHECK(t, strcmp(m.text[0], "Name a fruit.") == 0 && strcmp(m.text[2], "And a color?") == 0);
    CONF_CHECK(t, strcmp(m.text[1], r1.data) == 0, "reply '%s', streamed '%s'", m.text[1], r1.data);
    CONF_CHECK(t, strcmp(m.text[3], r2.data) == 0, "reply '%s', streamed '%s'", m.text[3], r2.data);
  }
  msgs_free(&m);
  m = read_msgs(t, f.ctx, 3);  /* from an index */
  CONF_CHECK(t, m.n == 1 && m.roles[0] == LLMSVC_ROLE_ASSISTANT, "%d from index 3", m.n);
  msgs_free(&m);
  m = read_msgs(t, f.ctx, 9);  /* past the end: none */
  CONF_CHECK(t, m.n == 0);
  msgs_free(&m);
  memset(&m, 0, sizeof m);
  m.stop_after = 2;
  CONF_STATUS(t, llmsvc_context_messages(f.ctx, 0, collect_msg, &m), LLMSVC_OK);
  CONF_CHECK(t, m.n == 2, "the callback stopped after 2, it was called %d times", m.n);
  msgs_free(&m);
  const llmsvc_context_info info = conf_info(t, f.svc, f.id);
  CONF_CHECK(t, info.turns == 2, "turns %d", info.turns);
  conf_text_free(&r1);
  conf_text_free(&r2);
  conf_teardown(t, &f);
}

/* MSG-2: a user message appended and then replied to by llmsvc_context_generate gives the
 * tokens llmsvc_call gives for the same prompt; generate adds no prompt tokens; a conversation
 * seeded with a whole exchange continues from it. */
static void append_then_generate(conf_t* t) {
  const char* prompt = "What is the capital of France?";
  conf_text want, got;
  llmsvc_call_result rw, rg;
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  CONF_STATUS(t, conf_call_fresh(t, svc, prompt, 0, 12, &want, &rw), LLMSVC_OK);
  conf_fixture f;
  llmsvc_unbind(svc);
  if (!conf_setup(t, &f, "msg2", 0)) {
    conf_text_free(&want);
    return;
  }
  const llmsvc_message user = msg(LLMSVC_ROLE_USER, prompt);
  CONF_STATUS(t, llmsvc_context_append(f.ctx, &user, 1), LLMSVC_OK);
  llmsvc_context_info info = conf_info(t, f.svc, f.id);
  CONF_CHECK(t, info.tokens == rw.prompt_tokens, "append stored %d tokens, the call's prompt %d", info.tokens,
             rw.prompt_tokens);
  CONF_STATUS(t, say(f.ctx, NULL, 12, &got, &rg), LLMSVC_OK);
  CONF_CHECK(t, rg.prompt_tokens == 0, "generate's prompt_tokens %d", rg.prompt_tokens);
  CONF_CHECK(t, conf_same_tokens(&want, &got), "'%s' against the call's '%s'", got.data, want.data);
  CONF_CHECK(t, rg.context_tokens == rw.context_tokens, "context %d against %d", rg.context_tokens, rw.context_tokens);
  conf_msgs m = read_msgs(t, f.ctx, 0);
  CONF_CHECK(t, m.n == 2 && m.roles[1] == LLMSVC_ROLE_ASSISTANT && strcmp(m.text[1], got.data) == 0);
  msgs_free(&m);
  conf_text_free(&got);
  /* A seeded exchange, then a new user message: the reply follows it. */
  const llmsvc_message more[] = {msg(LLMSVC_ROLE_USER, "Remember the number 7."),
                                 msg(LLMSVC_ROLE_ASSISTANT, "I will remember 7."),
                                 msg(LLMSVC_ROLE_USER, "Which number?")};
  CONF_STATUS(t, llmsvc_context_append(f.ctx, more, 3), LLMSVC_OK);
  CONF_STATUS(t, say(f.ctx, NULL, 12, &got, &rg), LLMSVC_OK);
  CONF_CHECK(t, rg.generated_tokens > 0);
  m = read_msgs(t, f.ctx, 0);
  CONF_CHECK(t, m.n == 6, "%d messages", m.n);
  if (m.n == 6) CONF_CHECK(t, strcmp(m.text[3], "I will remember 7.") == 0 && m.roles[5] == LLMSVC_ROLE_ASSISTANT);
  msgs_free(&m);
  conf_text_free(&got);
  conf_text_free(&want);
  conf_teardown(t, &f);
}

/* MSG-3: truncating rewinds: the messages and tokens after the cut go, the rest answers as
 * before (a call repeated after the cut starts with the same token: the KV kept is the one
 * the first answer used, though the new prompt's micro-batches differ, so later tokens may
 * round apart); 0 empties it, and the first call then gives its very tokens again; more than
 * it holds is INVALID_ARGUMENT and changes nothing. */
static void truncate_rewinds(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "msg3", 0)) return;
  conf_text a, b, again;
  llmsvc_call_result r1, r2, r3;
  CONF_STATUS(t, say(f.ctx, "Say hello.", 6, &a, &r1), LLMSVC_OK);
  CONF_STATUS(t, say(f.ctx, "Count to three.", 10, &b, &r2), LLMSVC_OK);
  CONF_STATUS(t, llmsvc_context_truncate(f.ctx, 5), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, conf_info(t, f.svc, f.id).tokens == r2.context_tokens, "a refused truncate changed the context");
  CONF_STATUS(t, llmsvc_context_truncate(f.ctx, 2), LLMSVC_OK);
  llmsvc_context_info info = conf_info(t, f.svc, f.id);
  CONF_CHECK(t, info.tokens == r1.context_tokens, "%d tokens after the cut, %d after the first call", info.tokens,
             r1.context_tokens);
  CONF_CHECK(t, info.turns == 1, "turns %d", info.turns);
  conf_msgs m = read_msgs(t, f.ctx, 0);
  CONF_CHECK(t, m.n == 2, "%d messages", m.n);
  msgs_free(&m);
  CONF_STATUS(t, say(f.ctx, "Count to three.", 10, &again, &r3), LLMSVC_OK);
  CONF_CHECK(t, again.pieces > 0 && b.pieces > 0 && again.tokens[0] == b.tokens[0],
             "after the cut '%s', before it '%s'", again.data, b.data);
  CONF_STATUS(t, llmsvc_context_truncate(f.ctx, 4), LLMSVC_OK);  /* all of it: nothing changes */
  CONF_STATUS(t, llmsvc_context_truncate(f.ctx, 0), LLMSVC_OK);
  info = conf_info(t, f.svc, f.id);
  CONF_CHECK(t, info.tokens == 0 && info.turns == 0, "%d tokens, %d turns", info.tokens, info.turns);
  m = read_msgs(t, f.ctx, 0);
  CONF_CHECK(t, m.n == 0);
  msgs_free(&m);
  conf_text_free(&again);
  CONF_STATUS(t, say(f.ctx, "Say hello.", 6, &again, &r3), LLMSVC_OK);
  CONF_CHECK(t, conf_same_tokens(&a, &again), "from empty '%s', at first '%s'", again.data, a.data);
  conf_text_free(&a);
  conf_text_free(&b);
  conf_text_free(&again);
  conf_teardown(t, &f);
}

/* MSG-4: the turn order: user and assistant alternate from a user message. Out of order, a
 * system message: INVALID_ARGUMENT naming the message, nothing appended; a tool message (no
 * reply called a tool): INVALID_ARGUMENT; generate without a user message to answer and a call after an unanswered one:
 * INVALID_ARGUMENT. */
static void turn_order(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "msg4", 0)) return;
  const llmsvc_message assistant_first = msg(LLMSVC_ROLE_ASSISTANT, "Hi.");
  CONF_STATUS(t, llmsvc_context_append(f.ctx, &assistant_first, 1), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, strstr(llmsvc_last_error(), "message 0") != NULL, "detail: %s", llmsvc_last_error());
  const llmsvc_message two_users[] = {msg(LLMSVC_ROLE_USER, "One."), msg(LLMSVC_ROLE_USER, "Two.")};
  CONF_STATUS(t, llmsvc_context_append(f.ctx, two_users, 2), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, strstr(llmsvc_last_error(), "message 1") != NULL, "detail: %s", llmsvc_last_error());
  const llmsvc_message sys = msg(LLMSVC_ROLE_SYSTEM, "Be brief.");
  CONF_STATUS(t, llmsvc_context_append(f.ctx, &sys, 1), LLMSVC_ERR_INVALID_ARGUMENT);
  const llmsvc_message tool = msg(LLMSVC_ROLE_TOOL, "{}");
  CONF_STATUS(t, llmsvc_context_append(f.ctx, &tool, 1), LLMSVC_ERR_INVALID_ARGUMENT);
  llmsvc_context_info info = conf_info(t, f.svc, f.id);
  CONF_CHECK(t, info.tokens == 0, "refused appends left %d tokens", info.tokens);
  conf_text out;
  llmsvc_call_result r;
  CONF_STATUS(t, say(f.ctx, NULL, 4, &out, &r), LLMSVC_ERR_INVALID_ARGUMENT);  /* nothing to answer */
  conf_text_free(&out);
  CONF_STATUS(t, llmsvc_context_append(f.ctx, two_users, 1), LLMSVC_OK);
  CONF_STATUS(t, say(f.ctx, "Another.", 4, &out, &r), LLMSVC_ERR_INVALID_ARGUMENT);  /* unanswered user */
  conf_text_free(&out);
  CONF_STATUS(t, llmsvc_context_append(f.ctx, two_users, 1), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, say(f.ctx, NULL, 4, &out, &r), LLMSVC_OK);
  conf_text_free(&out);
  CONF_STATUS(t, say(f.ctx, NULL, 4, &out, &r), LLMSVC_ERR_INVALID_ARGUMENT);  /* answered already */
  conf_text_free(&out);
  conf_msgs m = read_msgs(t, f.ctx, 0);
  CONF_CHECK(t, m.n == 2, "%d messages", m.n);
  msgs_free(&m);
  conf_teardown(t, &f);
}

/* MSG-5: a raw context holds text, not messages: append, generate and messages are
 * INVALID_ARGUMENT; truncate too. */
static void raw_has_no_messages(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "msg5", 1)) return;
  const llmsvc_message user = msg(LLMSVC_ROLE_USER, "Hello");
  CONF_STATUS(t, llmsvc_context_append(f.ctx, &user, 1), LLMSVC_ERR_INVALID_ARGUMENT);
  conf_text out;
  llmsvc_call_result r;
  CONF_STATUS(t, say(f.ctx, NULL, 4, &out, &r), LLMSVC_ERR_INVALID_ARGUMENT);
  conf_text_free(&out);
  conf_msgs m;
  memset(&m, 0, sizeof m);
  CONF_STATUS(t, llmsvc_context_messages(f.ctx, 0, collect_msg, &m), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_truncate(f.ctx, 0), LLMSVC_ERR_INVALID_ARGUMENT);
  conf_teardown(t, &f);
}

/* MSG-6: the conversation persists: reopened from a new binding it reads the same, and a cut
 * made before the close holds after it. */
static void persists(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "msg6", 0)) return;
  const llmsvc_message seed[] = {msg(LLMSVC_ROLE_USER, "Caf\xc3\xa9?"), msg(LLMSVC_ROLE_ASSISTANT, "Oui."),
                                 msg(LLMSVC_ROLE_USER, "Merci.")};
  CONF_STATUS(t, llmsvc_context_append(f.ctx, seed, 3), LLMSVC_OK);
  conf_text out;
  llmsvc_call_result r;
  CONF_STATUS(t, say(f.ctx, NULL, 6, &out, &r), LLMSVC_OK);
  CONF_STATUS(t, llmsvc_context_truncate(f.ctx, 2), LLMSVC_OK);
  const int tokens = conf_info(t, f.svc, f.id).tokens;
  llmsvc_context_close(f.ctx);
  llmsvc_unbind(f.svc);
  f.svc = conf_bind(t, t->env->target);
  f.ctx = NULL;
  CONF_REQUIRE(t, f.svc != NULL);
  CONF_STATUS_REQ(t, llmsvc_context_open(f.svc, f.id, &f.ctx), LLMSVC_OK);
  conf_msgs m = read_msgs(t, f.ctx, 0);
  CONF_CHECK(t, m.n == 2, "%d messages after reopening", m.n);
  if (m.n == 2) CONF_CHECK(t, strcmp(m.text[0], "Caf\xc3\xa9?") == 0 && strcmp(m.text[1], "Oui.") == 0);
  msgs_free(&m);
  CONF_CHECK(t, conf_info(t, f.svc, f.id).tokens == tokens);
  conf_text_free(&out);
  conf_teardown(t, &f);
}

/* MSG-7: bad input: NULL context, messages or fn; struct_size below the first version or
 * differing within the array; a role outside llmsvc_role; content not UTF-8 (INVALID_UTF8):
 * a clear status, nothing appended. No messages (n 0) is OK. A message longer than any
 * context holds: CONTEXT_OVERFLOW. */
static void messages_bad_input(conf_t* t) {
  conf_fixture f;
  if (!conf_setup(t, &f, "msg7", 0)) return;
  llmsvc_message m = msg(LLMSVC_ROLE_USER, "Hi");
  CONF_STATUS(t, llmsvc_context_append(NULL, &m, 1), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_append(f.ctx, NULL, 1), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_append(f.ctx, NULL, 0), LLMSVC_OK);
  CONF_STATUS(t, llmsvc_context_generate(NULL, NULL, NULL, NULL, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_truncate(NULL, 0), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_messages(NULL, 0, collect_msg, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_STATUS(t, llmsvc_context_messages(f.ctx, 0, NULL, NULL), LLMSVC_ERR_INVALID_ARGUMENT);
  llmsvc_message small = m;
  small.struct_size = sizeof(size_t);
  CONF_STATUS(t, llmsvc_context_append(f.ctx, &small, 1), LLMSVC_ERR_INVALID_ARGUMENT);
  llmsvc_message mixed[2] = {m, msg(LLMSVC_ROLE_ASSISTANT, "Hello")};
  mixed[1].struct_size = sizeof(llmsvc_message) - 1;
  CONF_STATUS(t, llmsvc_context_append(f.ctx, mixed, 2), LLMSVC_ERR_INVALID_ARGUMENT);
  llmsvc_message bad_role = m;
  bad_role.role = 7;
  CONF_STATUS(t, llmsvc_context_append(f.ctx, &bad_role, 1), LLMSVC_ERR_INVALID_ARGUMENT);
  llmsvc_message bad_text = m;
  bad_text.content = "\xff\xfe";
  bad_text.content_len = 2;
  CONF_STATUS(t, llmsvc_context_append(f.ctx, &bad_text, 1), LLMSVC_ERR_INVALID_UTF8);
  llmsvc_message no_text = m;
  no_text.content = NULL;
  no_text.content_len = 3;
  CONF_STATUS(t, llmsvc_context_append(f.ctx, &no_text, 1), LLMSVC_ERR_INVALID_ARGUMENT);
  const size_t big = 300u << 10;
  char* text = malloc(big);
  CONF_REQUIRE(t, text != NULL);
  for (size_t k = 0; k + 1 < big; k += 2) memcpy(text + k, " 7", 2);
  llmsvc_message huge = msg(LLMSVC_ROLE_USER, NULL);
  huge.content = text;
  huge.content_len = big;
  CONF_STATUS(t, llmsvc_context_append(f.ctx, &huge, 1), LLMSVC_ERR_CONTEXT_OVERFLOW);
  free(text);
  CONF_CHECK(t, conf_info(t, f.svc, f.id).tokens == 0, "a refused append left tokens");
  conf_teardown(t, &f);
}

/* Counts `messages` (chat) with llmsvc_count_tokens; -1 (and a failure) when it fails. */
static int32_t count_messages(conf_t* t, llmsvc_service* svc, const llmsvc_message* m, size_t n, int first_turn,
                              const char* system_prompt, llmsvc_status want) {
  llmsvc_count_options o;
  llmsvc_count_options_init(&o);
  o.chat = 1;
  o.first_turn = first_turn;
  o.system_prompt = system_prompt;
  o.messages = m;
  o.n_messages = n;
  int32_t count = -1;
  CONF_STATUS(t, llmsvc_count_tokens(svc, NULL, 0, &o, &count), want);
  return count;
}

/* COUNT-5: a message list counts what llmsvc_context_append stores for it: first_turn on a new
 * context with the system prompt, otherwise after an assistant message (a seeded exchange
 * counted whole equals its parts); the turn order's errors as append's; text and messages
 * together, or messages without chat: INVALID_ARGUMENT. */
static void counts_messages(conf_t* t) {
  llmsvc_service* svc = conf_bind(t, t->env->target);
  CONF_REQUIRE(t, svc != NULL);
  const llmsvc_message seed[] = {msg(LLMSVC_ROLE_USER, "Remember the number 7."),
                                 msg(LLMSVC_ROLE_ASSISTANT, "I will remember 7."),
                                 msg(LLMSVC_ROLE_USER, "Which number?")};
  const char* sys = "You are terse.";
  const int32_t whole = count_messages(t, svc, seed, 3, 1, sys, LLMSVC_OK);
  char id[80];
  conf_unique_id(id, sizeof id, "count5");
  llmsvc_context* ctx = conf_new_context(t, svc, id, 0, sys);
  CONF_REQUIRE(t, ctx != NULL);
  CONF_STATUS(t, llmsvc_context_append(ctx, seed, 3), LLMSVC_OK);
  CONF_CHECK(t, whole == conf_info(t, svc, id).tokens, "counted %d, append stored %d", whole, conf_info(t, svc, id).tokens);
  const int32_t first = count_messages(t, svc, seed, 2, 1, sys, LLMSVC_OK);
  const int32_t later = count_messages(t, svc, seed + 2, 1, 0, NULL, LLMSVC_OK);
  CONF_CHECK(t, first > 0 && later > 0 && first + later == whole, "%d + %d against %d", first, later, whole);
  conf_close_and_delete(t, svc, ctx);
  count_messages(t, svc, seed + 1, 2, 1, NULL, LLMSVC_ERR_INVALID_ARGUMENT);  /* an assistant first */
  llmsvc_count_options o;
  llmsvc_count_options_init(&o);
  o.chat = 1;
  o.messages = seed;
  o.n_messages = 1;
  int32_t n = -7;
  CONF_STATUS(t, llmsvc_count_tokens(svc, "text", 4, &o, &n), LLMSVC_ERR_INVALID_ARGUMENT);
  o.chat = 0;
  CONF_STATUS(t, llmsvc_count_tokens(svc, NULL, 0, &o, &n), LLMSVC_ERR_INVALID_ARGUMENT);
  CONF_CHECK(t, n == -7, "a refused count wrote its result");
  llmsvc_unbind(svc);
}

const conf_test conf_messages_tests[] = {
    {"MSG-1", "calls become messages: the prompt as user, the streamed reply as assistant; read from an index", calls_become_messages},
    {"MSG-2", "append(user) + generate gives the call's tokens; a seeded exchange continues", append_then_generate},
    {"MSG-3", "truncate rewinds: the rest answers as before; 0 empties; past the end refused", truncate_rewinds},
    {"MSG-4", "turn order: alternation from a user message; system, tool, nothing to answer refused", turn_order},
    {"MSG-5", "raw contexts hold no messages", raw_has_no_messages},
    {"MSG-6", "the conversation and its cuts persist across a new binding", persists},
    {"MSG-7", "messages: NULLs, struct_size, roles, UTF-8, a message longer than any context", messages_bad_input},
    {"COUNT-5", "a message list counts what append stores; its parts add up; order and argument errors", counts_messages},
    {NULL, NULL, NULL}};
