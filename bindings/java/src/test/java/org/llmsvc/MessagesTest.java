// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/** A chat context's conversation (ABI 1.3): append, generate, truncate, messages. */
class MessagesTest extends BoundService {
  private static final String QUESTION = "What is the capital of France?";

  private static void assertDetail(LLMException e, Status status, String inDetail) {
    assertEquals(status, e.status(), e.toString());
    assertFalse(e.detail().isEmpty(), "the library's last error");
    assertTrue(e.detail().contains(inDetail), e.detail());
  }

  /** The ids of a reply, as the pieces of callWithTokens / generateWithTokens deliver them. */
  private static final class Ids implements TokenListener {
    final List<Integer> ids = new ArrayList<>();
    final StringBuilder text = new StringBuilder();

    @Override
    public boolean onTokens(String piece, int[] tokens, float[] logprobs) {
      text.append(piece);
      for (int t : tokens) ids.add(t);
      return true;
    }
  }

  /** A user message appended, then generate: the very reply of call() with that prompt on a fresh context. */
  @Test
  void appendThenGenerateRepliesAsACallDoes() {
    Ids want = new Ids();
    CallResult called;
    LLMContext ref = TestSupport.newContext(svc, "msg-ref");
    try {
      called = ref.callWithTokens(QUESTION, TestSupport.greedy(10), want);
    } finally {
      TestSupport.dispose(svc, ref);
    }
    LLMContext ctx = TestSupport.newContext(svc, "msg-gen");
    try {
      ctx.append(List.of(Message.user(QUESTION)));
      assertEquals(List.of(Message.user(QUESTION)), ctx.messages(), "appended, not yet answered");
      Ids got = new Ids();
      CallResult r = ctx.generateWithTokens(TestSupport.greedy(10), got);
      assertFalse(want.ids.isEmpty());
      assertEquals(want.ids, got.ids, "the same tokens as the call");
      assertEquals(called.text(), r.text(), "the same text as the call");
      assertEquals(got.text.toString(), r.text());
      assertEquals(0, r.promptTokens(), r.toString());
      assertEquals(called.generatedTokens(), r.generatedTokens(), r.toString());
      assertEquals(called.contextTokens(), r.contextTokens(), "the same tokens in the context");
      assertEquals(List.of(Message.user(QUESTION), Message.assistant(r.text())), ctx.messages());
      assertEquals(1, ctx.info().turns());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** A call's prompt and reply are messages too; generate() without options and the plain overload. */
  @Test
  void callsAreMessagesToo() {
    LLMContext ctx = TestSupport.newContext(svc, "msg-call");
    try {
      CallResult first = ctx.call("Hi", TestSupport.greedy(4));
      assertEquals(List.of(Message.user("Hi"), Message.assistant(first.text())), ctx.messages());
      ctx.append(Message.user("Name a colour."));
      CallResult second = ctx.generate(TestSupport.greedy(4));
      List<Message> all = ctx.messages();
      assertEquals(4, all.size(), all.toString());
      assertEquals(Message.assistant(second.text()), all.get(3));
      assertThrows(UnsupportedOperationException.class, () -> all.add(Message.user("x")), "unmodifiable");
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** A seeded exchange, its streamed reply, then truncate rewinds: fewer tokens, then none. */
  @Test
  void seededExchangeContinuesAndTruncateRewinds() {
    LLMContext ctx = TestSupport.newContext(svc, "msg-seed");
    try {
      ctx.append(Message.user("Remember the number 7."), Message.assistant("I will remember 7."),
          Message.user("Which number?"));
      List<String> pieces = new ArrayList<>();
      CallResult r = ctx.generate(TestSupport.greedy(8), (piece, token) -> pieces.add(piece));
      assertFalse(pieces.isEmpty(), "the reply streamed");
      assertEquals(String.join("", pieces), r.text());
      assertEquals(0, r.promptTokens(), r.toString());

      List<Message> all = ctx.messages();
      assertEquals(4, all.size(), all.toString());
      assertEquals(List.of(Role.USER, Role.ASSISTANT, Role.USER, Role.ASSISTANT),
          List.of(all.get(0).role(), all.get(1).role(), all.get(2).role(), all.get(3).role()));
      assertEquals(Message.user("Remember the number 7."), all.get(0));
      assertEquals(Message.assistant("I will remember 7."), all.get(1));
      assertEquals(Message.user("Which number?"), all.get(2));
      assertEquals(r.text(), all.get(3).content(), "the reply is the last message");
      assertEquals(List.of(all.get(2), all.get(3)), ctx.messages(2));
      assertEquals(List.of(), ctx.messages(4), "from the end: none");
      ContextInfo before = ctx.info();
      assertEquals(2, before.turns());
      assertEquals(r.contextTokens(), before.tokens());

      ctx.truncate(2);
      assertEquals(List.of(Message.user("Remember the number 7."), Message.assistant("I will remember 7.")),
          ctx.messages());
      ContextInfo after = ctx.info();
      assertTrue(after.tokens() > 0 && after.tokens() < before.tokens(), before + " then " + after);
      assertEquals(1, after.turns());
      assertEquals(List.of(Message.assistant("I will remember 7.")), ctx.messages(1));

      ctx.truncate(0);
      assertEquals(List.of(), ctx.messages());
      assertEquals(0, ctx.info().tokens());
      assertEquals(0, ctx.info().turns());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** The conversation is the context's state: a reopened handle reads the same messages. */
  @Test
  void messagesPersistWithTheContext() {
    LLMContext ctx = TestSupport.newContext(svc, "msg-persist");
    String id = ctx.id();
    try {
      ctx.append(Message.user("Héllo 🌍 wörld"), Message.assistant("Ça va? 🙂"));
      ctx.close();
      ctx = svc.openLLMCtx(id);
      assertEquals(List.of(Message.user("Héllo 🌍 wörld"), Message.assistant("Ça va? 🙂")), ctx.messages(),
          "text outside the BMP survives the trip");
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** Mistakes: the binding's exceptions with the library's detail; nothing is changed by them. */
  @Test
  void mistakesRaiseTheMappedExceptions() {
    LLMContext ctx = TestSupport.newContext(svc, "msg-mistakes");
    try {
      assertDetail(assertThrows(InvalidArgumentException.class, () -> ctx.append(Message.assistant("Hi."))),
          Status.INVALID_ARGUMENT, "message 0");
      assertDetail(assertThrows(InvalidArgumentException.class, () -> ctx.generate(TestSupport.greedy(4))),
          Status.INVALID_ARGUMENT, "nothing to reply to");
      assertDetail(assertThrows(InvalidArgumentException.class, () -> ctx.append(Message.of(Role.SYSTEM, "Be terse."))),
          Status.INVALID_ARGUMENT, "system prompt");
      LLMException tool = assertThrows(LLMException.class, () -> ctx.append(Message.of(Role.TOOL, "{}")));
      assertDetail(tool, Status.INVALID_ARGUMENT, "message 0");
      // All or none: the good first message of a bad list is not kept either.
      assertDetail(assertThrows(InvalidArgumentException.class,
          () -> ctx.append(Message.user("One."), Message.user("Two."))), Status.INVALID_ARGUMENT, "message 1");
      assertEquals(List.of(), ctx.messages());
      assertEquals(0, ctx.info().tokens(), "refused messages leave the context untouched");

      assertDetail(assertThrows(InvalidArgumentException.class, () -> ctx.truncate(3)), Status.INVALID_ARGUMENT,
          "not 3");
      assertThrows(InvalidArgumentException.class, () -> ctx.truncate(-1), "refused by the binding");
      assertThrows(InvalidArgumentException.class, () -> ctx.messages(-1), "refused by the binding");
      assertThrows(InvalidArgumentException.class, () -> ctx.append(Message.of(Role.UNKNOWN, "?")));
      assertThrows(InvalidUtf8Exception.class, () -> ctx.append(Message.user("bad \uD83D here")));
      assertThrows(NullPointerException.class, () -> ctx.append((List<Message>) null));

      ctx.append(Message.user("Hello."));
      assertDetail(assertThrows(InvalidArgumentException.class, () -> ctx.call("Again?", TestSupport.greedy(2))),
          Status.INVALID_ARGUMENT, "without its reply");
      // Inside a call, from its own listener: busy, and the call goes on.
      List<LLMException> inside = new ArrayList<>();
      CallResult r = ctx.generate(TestSupport.greedy(3), (piece, token) -> {
        inside.add(assertThrows(BusyException.class, () -> ctx.append(Message.user("Now?"))));
        inside.add(assertThrows(BusyException.class, ctx::messages));
        return true;
      });
      assertFalse(inside.isEmpty());
      assertEquals(2, ctx.messages().size());
      assertEquals(Message.assistant(r.text()), ctx.messages().get(1));
    } finally {
      TestSupport.dispose(svc, ctx);
    }
    LLMContext raw = TestSupport.newRawContext(svc, "msg-raw");
    try {
      assertDetail(assertThrows(InvalidArgumentException.class, raw::messages), Status.INVALID_ARGUMENT, "");
      assertThrows(InvalidArgumentException.class, () -> raw.append(Message.user("Hi")));
      assertThrows(InvalidArgumentException.class, () -> raw.truncate(0));
    } finally {
      TestSupport.dispose(svc, raw);
    }
  }

  /** More than the context holds: overflow embedded, the app's quota (or overflow) through the daemon. */
  @Test
  void tooMuchDoesNotFit() {
    LLMContext ctx = TestSupport.newContext(svc, "msg-overflow");
    try {
      String text = "word ".repeat(svc.modelInfo().contextLength() + 500);
      LLMException e = assertThrows(LLMException.class, () -> ctx.append(Message.user(text)));
      assertTrue(e instanceof ContextOverflowException || e instanceof QuotaExceededException, e.toString());
      assertEquals(0, ctx.info().tokens());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  @Test
  void messageIsAValue() {
    Message a = Message.user("Hi");
    assertEquals(a, new Message(Role.USER, "Hi"));
    assertEquals(a.hashCode(), Message.of(Role.USER, "Hi").hashCode());
    assertNotEquals(a, Message.assistant("Hi"));
    assertNotEquals(a, Message.user("Hi!"));
    assertEquals("Message{role=USER, content='Hi'}", a.toString());
    assertThrows(NullPointerException.class, () -> new Message(null, "x"));
    assertThrows(NullPointerException.class, () -> Message.user(null));
    for (Role r : Role.values()) assertEquals(r, Role.of(r.code()));
    assertEquals(Role.UNKNOWN, Role.of(42));
    assertEquals(2, Role.ASSISTANT.code());
  }
}
