// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** newLLMCtx + callLLM: replies, their figures, greedy determinism, options. */
class CallTest extends BoundService {
  @Test
  void callReturnsText() {
    LLMContext ctx = svc.newLLMCtx(new ContextOptions().id(TestSupport.uniqueId("call")).systemPrompt("You are terse."));
    try {
      CallResult r = svc.callLLM(ctx, "What is the capital of France?", TestSupport.greedy(8));
      assertFalse(r.text().isBlank(), "a reply");
      assertTrue(r.generatedTokens() > 0 && r.generatedTokens() <= 8, r.toString());
      assertTrue(r.promptTokens() > 0, r.toString());
      assertTrue(r.finishReason() == FinishReason.LENGTH || r.finishReason() == FinishReason.EOS, r.toString());
      assertTrue(r.ttftMs() > 0, r.toString());
      assertEquals(r.contextTokens(), ctx.info().tokens(), "the info and the result agree");
      assertTrue(r.contextTokens() >= r.promptTokens() + r.generatedTokens(), r.toString());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** The mirror of the LLMS interface: newLLMCtx(systemPrompt) + callLLM(ctx, prompt) returning the text. */
  @Test
  void llmsShape() {
    LLMContext ctx = svc.newLLMCtx("You are a helpful assistant.");
    try {
      assertFalse(ctx.id().isEmpty(), "a generated id");
      String reply = svc.callLLM(ctx, "Say hello.");
      assertFalse(reply.isEmpty());
    } finally {
      svc.delLLMCtx(ctx);
    }
  }

  @Test
  void greedyIsDeterministic() {
    String prompt = "Name three colours.";
    String first;
    String second;
    LLMContext a = TestSupport.newContext(svc, "greedy-a");
    LLMContext b = TestSupport.newContext(svc, "greedy-b");
    try {
      first = a.call(prompt, TestSupport.greedy(12)).text();
      second = b.call(prompt, TestSupport.greedy(12)).text();
    } finally {
      TestSupport.dispose(svc, a);
      TestSupport.dispose(svc, b);
    }
    assertFalse(first.isEmpty());
    assertEquals(first, second, "temperature 0 twice, in two fresh contexts");
  }

  @Test
  void maxTokensZeroOnlyPrefills() {
    LLMContext ctx = TestSupport.newContext(svc, "prefill");
    try {
      CallResult r = ctx.call("Remember the number 42.", TestSupport.greedy(0));
      assertEquals("", r.text());
      assertEquals(0, r.generatedTokens());
      assertTrue(r.promptTokens() > 0);
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** A stop string ends the reply and is not part of it: the greedy reply cut at its second character. */
  @Test
  void stopStringCutsTheReply() {
    String full;
    LLMContext a = TestSupport.newRawContext(svc, "stop-a");
    LLMContext b = TestSupport.newRawContext(svc, "stop-b");
    try {
      full = a.call("The alphabet: A B C D", TestSupport.greedy(8)).text();
      assertTrue(full.length() >= 3, "reply: '" + full + "'");
      String stop = full.substring(1, 3);
      CallResult r = b.call("The alphabet: A B C D", TestSupport.greedy(8).stop(stop));
      assertEquals(FinishReason.STOP, r.finishReason(), r.toString());
      assertEquals(full.substring(0, full.indexOf(stop)), r.text());
    } finally {
      TestSupport.dispose(svc, a);
      TestSupport.dispose(svc, b);
    }
  }

  /**
   * The elastic level (ABI 1.5): the suite's model is plain, so its one level is 100: a call
   * without a level or at 100 reports 100 and gives the same reply; a level it lacks (50), or one
   * outside 0..100, is refused naming its levels, the context unchanged.
   */
  @Test
  void elasticLevelIsReportedAndChecked() {
    LLMContext a = TestSupport.newContext(svc, "level-a");
    LLMContext b = TestSupport.newContext(svc, "level-b");
    try {
      CallResult chosen = a.call("Name a colour.", TestSupport.greedy(6));
      assertEquals(100, chosen.levelPercent(), chosen.toString());
      int tokens = b.info().tokens();
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> b.call("Name a colour.", TestSupport.greedy(6).levelPercent(50)));
      assertTrue(e.detail().contains("level_percent 50"), e.detail());
      assertTrue(e.detail().contains("100"), e.detail());
      assertThrows(InvalidArgumentException.class, () -> b.call("Name a colour.", TestSupport.greedy(6).levelPercent(101)));
      assertThrows(InvalidArgumentException.class, () -> b.call("Name a colour.", TestSupport.greedy(6).levelPercent(-1)));
      assertEquals(tokens, b.info().tokens(), "nothing added by the refused calls");
      CallResult full = b.call("Name a colour.", TestSupport.greedy(6).levelPercent(100));
      assertEquals(100, full.levelPercent(), full.toString());
      assertEquals(chosen.text(), full.text(), "level 100 is the level chosen for the plain model");
      assertFalse(full.sloMissed(), full.toString());
      // SLO ratios: the plain model's one level cannot take half the full model's time per token.
      CallResult missed = b.call("One more?", TestSupport.greedy(2).sloTpotRatio(0.5f));
      assertEquals(100, missed.levelPercent(), missed.toString());
      assertTrue(missed.sloMissed(), missed.toString());
    } finally {
      TestSupport.dispose(svc, a);
      TestSupport.dispose(svc, b);
    }
  }

  /**
   * Prompt compression: a call's own share is kept (its least informative words dropped) and
   * reported; a call without one keeps the whole prompt; a share outside [0, 1] is refused.
   */
  @Test
  void promptCompressionKeepsAShareAndReportsIt() {
    String text = "The river runs past the old mill, under the stone bridge and through the meadow where the village"
        + " children play in summer. In winter it freezes and the wheel stands still. Where does it run?";
    LLMContext c = TestSupport.newContext(svc, "keep");
    try {
      CallResult whole = c.call(text, TestSupport.greedy(1));
      assertEquals(1.0, whole.promptKept(), whole.toString());
      CallResult half = c.call(text, TestSupport.greedy(1).promptKeep(0.5f));
      assertTrue(half.promptKept() > 0 && half.promptKept() <= 0.6, half.toString());
      assertTrue(half.promptTokens() < whole.promptTokens(), half.toString());
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> c.call(text, TestSupport.greedy(1).promptKeep(1.5f)));
      assertTrue(e.detail().contains("prompt_keep"), e.detail());
    } finally {
      TestSupport.dispose(svc, c);
    }
  }

  /** Adapters the service does not offer are refused, for a context and for a call, changing nothing. */
  @Test
  void unknownAdaptersAreRefused() {
    for (String name : svc.adapters()) assertFalse(name.isEmpty());
    String id = TestSupport.uniqueId("adapter");
    InvalidArgumentException made = assertThrows(InvalidArgumentException.class,
        () -> svc.newLLMCtx(new ContextOptions().id(id).adapter("no-such-adapter")));
    assertTrue(made.detail().contains("no-such-adapter"), made.detail());
    assertFalse(svc.listContexts().contains(id), "no context was made");
    LLMContext ctx = TestSupport.newContext(svc, "adapter-call");
    try {
      ctx.call("Name a colour.", TestSupport.greedy(2));
      int tokens = ctx.info().tokens();
      assertThrows(InvalidArgumentException.class,
          () -> ctx.call("Name a colour.", TestSupport.greedy(2).adapter("no-such-adapter")));
      assertEquals(tokens, ctx.info().tokens(), "nothing added by the refused call");
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  @Test
  void statsCountCalls() {
    ServiceStats before = svc.stats();
    LLMContext ctx = TestSupport.newContext(svc, "stats");
    try {
      CallResult r = ctx.call("Hi", TestSupport.greedy(3));
      ServiceStats after = svc.stats();
      assertEquals(before.calls() + 1, after.calls(), after.toString());
      assertEquals(before.generatedTokens() + r.generatedTokens(), after.generatedTokens(), after.toString());
      assertTrue(after.openContexts() >= 1, after.toString());
      assertTrue(after.knownContexts() >= 1, after.toString());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }
}
