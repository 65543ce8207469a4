// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

/**
 * ABI 1.4: LLMContext.fork (shared memory, the parent's conversation, each going on alone,
 * refusals), and tools as far as the default model shows them.
 */
class ForkTest extends BoundService {
  private static final String DOC = "The lighthouse keeper wrote in his log every evening: the wind, the colour "
      + "of the sea, the ships that passed. Over forty years the log grew to twelve volumes. Summarise it.";

  @Test
  void aForkSharesMemoryAnswersAsItsTwinAndOutlivesItsParent() {
    LLMContext parent = TestSupport.newContext(svc, "fork-parent");
    LLMContext a = null;
    LLMContext b = null;
    try {
      parent.call(DOC, TestSupport.greedy(6));
      long before = svc.stats().kvBytes();
      a = parent.fork();
      String bId = TestSupport.uniqueId("fork-b");
      b = parent.fork(bId);
      assertEquals(bId, b.id());
      assertNotEquals(parent.id(), a.id());
      assertEquals(parent.messages(), a.messages());
      ContextInfo info = a.info();
      assertEquals(parent.info().tokens(), info.tokens());
      assertTrue(info.chunksShared() > 0, info.toString());
      assertEquals(before, svc.stats().kvBytes(), "shared chunks count once");
      String ra = a.call("In one word?", TestSupport.greedy(5)).text();
      String rb = b.call("In one word?", TestSupport.greedy(5)).text();
      assertEquals(ra, rb, "twin forks answer alike");
      assertTrue(parent.info().tokens() < a.info().tokens(), "the parent did not grow with its forks");
      TestSupport.dispose(svc, parent);
      parent = null;
      assertTrue(a.call("Who kept it?", TestSupport.greedy(4)).generatedTokens() > 0, "the fork outlives its parent");
    } finally {
      TestSupport.dispose(svc, parent);
      TestSupport.dispose(svc, a);
      TestSupport.dispose(svc, b);
    }
  }

  @Test
  void refusals() {
    LLMContext parent = TestSupport.newContext(svc, "fork-bad");
    try {
      parent.call("Hello.", TestSupport.greedy(2));
      int n = svc.listContexts().size();
      assertThrows(AlreadyExistsException.class, () -> parent.fork(parent.id()));
      assertThrows(InvalidArgumentException.class, () -> parent.fork("../escape"));
      // Inside a call on the same handle: busy before reaching the library.
      AtomicReference<RuntimeException> inside = new AtomicReference<>();
      parent.call("Again.", TestSupport.greedy(3), (piece, token) -> {
        if (inside.get() == null) {
          try {
            parent.fork().close();
            inside.set(new IllegalStateException("forked inside a call"));
          } catch (BusyException e) {
            inside.set(e);
          }
        }
        return true;
      });
      assertTrue(inside.get() instanceof BusyException, String.valueOf(inside.get()));
      assertEquals(n, svc.listContexts().size(), "nothing made by a refusal");
    } finally {
      TestSupport.dispose(svc, parent);
    }
  }

  @Test
  void toolsAreCheckedAndAContextWithoutThemRefusesToolMessages() {
    LLMException bad = assertThrows(InvalidArgumentException.class, () -> svc.newLLMCtx(new ContextOptions()
        .toolsJson("[{\"type\": \"function\", \"function\": {\"name\": \"bad name\"}}]")));
    assertTrue(bad.detail().contains("tools[0]"), bad.detail());
    String weather = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}]";
    try {
      LLMContext taken = svc.newLLMCtx(new ContextOptions().toolsJson(weather));
      TestSupport.dispose(svc, taken);
    } catch (LLMException e) { // the default model's template renders no tools: refused, never ignored
      assertEquals(Status.UNSUPPORTED, e.status(), e.toString());
    }
    LLMContext ctx = svc.newLLMCtx(new ContextOptions().id(TestSupport.uniqueId("tools")).toolsJson("[]"));
    try {
      CallResult r = ctx.call("Hello.", TestSupport.greedy(3));
      assertEquals(0, r.toolCalls());
      assertEquals(0, r.toolCallErrors());
      for (Message m : ctx.messages()) assertEquals(null, m.toolCalls(), m.toString());
      assertThrows(InvalidArgumentException.class, () -> ctx.append(Message.of(Role.TOOL, "{}")));
      String call = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{}\"}}]";
      LLMException noTools = assertThrows(InvalidArgumentException.class,
          () -> ctx.append(Message.user("Weather?"), Message.assistant("", call)));
      assertTrue(noTools.detail().contains("no tools"), noTools.detail());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }
}
