// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.Test;

/** ABI 1.3: structured output (CallOptions.jsonSchema / grammar) and counting a message list. */
class StructuredOutputTest extends BoundService {
  private static void assertDetail(LLMException e, String inDetail) {
    assertEquals(Status.INVALID_ARGUMENT, e.status(), e.toString());
    assertTrue(e.detail().contains(inDetail), e.detail());
  }

  /** An enum schema: exactly one of its JSON strings, quotes included, ended by EOS. */
  @Test
  void enumSchemaGivesOneOfItsValues() {
    LLMContext ctx = TestSupport.newContext(svc, "so-enum");
    try {
      CallOptions o = TestSupport.greedy(16).jsonSchema("{\"enum\": [\"red\", \"green\", \"blue\"]}");
      CallResult r = ctx.call("Name a colour.", o);
      assertTrue(Set.of("\"red\"", "\"green\"", "\"blue\"").contains(r.text()), r.toString());
      assertEquals(FinishReason.EOS, r.finishReason(), r.toString());
      assertTrue(r.constrainMs() > 0, "constrainMs " + r.constrainMs());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** A GBNF grammar, through generate() as well as call(); a call without one has no constraint time. */
  @Test
  void grammarGivesYesOrNo() {
    LLMContext ctx = TestSupport.newContext(svc, "so-gbnf");
    try {
      CallOptions o = TestSupport.greedy(4).grammar("root ::= (\"yes\" | \"no\")");
      CallResult r = ctx.call("Is the sky blue? Answer yes or no.", o);
      assertTrue(Set.of("yes", "no").contains(r.text()), r.toString());
      assertEquals(FinishReason.EOS, r.finishReason(), r.toString());
      ctx.append(Message.user("And is grass red?"));
      CallResult g = ctx.generate(o);
      assertTrue(Set.of("yes", "no").contains(g.text()), g.toString());
      assertEquals(0.0, ctx.call("Hi", TestSupport.greedy(2)).constrainMs(), "unconstrained");
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** Schemas and grammars the library cannot compile, and both at once: InvalidArgumentException. */
  @Test
  void badConstraintsAreInvalidArguments() {
    LLMContext ctx = TestSupport.newContext(svc, "so-bad");
    try {
      assertDetail(assertThrows(InvalidArgumentException.class,
          () -> ctx.call("Hi", TestSupport.greedy(4).jsonSchema("{not json"))), "json_schema");
      assertThrows(InvalidArgumentException.class,
          () -> ctx.call("Hi", TestSupport.greedy(4).grammar("root ::= (")));
      assertThrows(InvalidArgumentException.class,
          () -> ctx.call("Hi", TestSupport.greedy(4).jsonSchema("{\"type\": \"string\"}").grammar("root ::= \"x\"")));
      assertThrows(InvalidArgumentException.class,
          () -> ctx.call("Hi", TestSupport.greedy(4).jsonSchema("{\"enum\": [\"a\0b\"]}")), "NUL refused by the binding");
      assertEquals(0, ctx.info().tokens(), "refused calls leave the context untouched");
      // null clears: the call runs unconstrained.
      CallResult r = ctx.call("Hi", TestSupport.greedy(2).jsonSchema("{not json").jsonSchema(null));
      assertEquals(0.0, r.constrainMs());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** A message list counts exactly the tokens append() stores in a new context with that system prompt. */
  @Test
  void messageListCountsWhatAppendStores() {
    String system = "Be brief.";
    List<Message> messages = List.of(Message.user("Remember the number 7."), Message.assistant("I will remember 7."),
        Message.user("Which number?"));
    int counted = svc.countTokens(messages, true, system);
    assertTrue(counted > 0);
    int[] ids = svc.tokenIds(messages, true, system);
    assertEquals(counted, ids.length);
    LLMContext ctx = svc.newLLMCtx(new ContextOptions().id(TestSupport.uniqueId("so-count")).systemPrompt(system));
    try {
      ctx.append(messages);
      assertEquals(counted, ctx.info().tokens(), "the tokens the context holds after append");
      // Not the first turn: what appending after an assistant message stores.
      ctx.append(Message.assistant("Seven."));
      int before = ctx.info().tokens();
      List<Message> more = List.of(Message.user("And the next one?"));
      int next = svc.countTokens(more, false, null);
      ctx.append(more);
      assertEquals(before + next, ctx.info().tokens());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
    assertTrue(svc.countTokens(messages, true, null) > 0, "the template's default system prompt");
  }

  /** An assistant-first list is out of turn; unknown roles, lone surrogates and nulls are refused too. */
  @Test
  void badMessageListsAreRefused() {
    assertDetail(assertThrows(InvalidArgumentException.class,
        () -> svc.countTokens(List.of(Message.assistant("Hi."), Message.user("Hello.")), true, null)), "message 0");
    assertThrows(InvalidArgumentException.class,
        () -> svc.countTokens(List.of(Message.user("One."), Message.user("Two.")), true, null));
    assertThrows(InvalidArgumentException.class, () -> svc.countTokens(List.of(Message.of(Role.UNKNOWN, "?")), true, null));
    assertThrows(InvalidUtf8Exception.class, () -> svc.countTokens(List.of(Message.user("bad \uD83D")), true, null));
    assertThrows(NullPointerException.class, () -> svc.countTokens((List<Message>) null, true, null));
  }
}
