// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Persistent contexts: reopening by id keeps the history; listing; deleting. */
class PersistenceTest {
  @Test
  void reopenByIdKeepsHistory() {
    String id = TestSupport.uniqueId("reopen");
    int tokens;
    try (LLMService svc = TestSupport.bind()) {
      try (LLMContext ctx = svc.newLLMCtx(new ContextOptions().id(id).systemPrompt("Remember what you are told."))) {
        assertEquals(id, ctx.id());
        tokens = ctx.call("My name is Ada.", TestSupport.greedy(4)).contextTokens();
      }
      ContextInfo closed = svc.contextInfo(id);
      assertEquals(tokens, closed.tokens(), "info of a closed context");
      assertEquals(1, closed.turns());
      try (LLMContext ctx = svc.openLLMCtx(id)) {
        assertEquals(tokens, ctx.info().tokens(), "reopened in the same service");
      }
    }
    // A new service (embedded: a new engine reading the state directory) sees the same history.
    try (LLMService svc = TestSupport.bind()) {
      try (LLMContext ctx = svc.openLLMCtx(id)) {
        ContextInfo info = ctx.info();
        assertEquals(tokens, info.tokens(), "reopened after a re-bind");
        assertEquals(1, info.turns());
        CallResult r = ctx.call("What is my name?", TestSupport.greedy(4));
        assertTrue(r.contextTokens() > tokens, "the new turn goes after the old ones");
        assertEquals(2, ctx.info().turns());
      }
      svc.delLLMCtx(id);
    }
  }

  @Test
  void listAndDelete() {
    try (LLMService svc = TestSupport.bind()) {
      LLMContext a = TestSupport.newContext(svc, "list-a");
      LLMContext b = TestSupport.newContext(svc, "list-b");
      String idA = a.id();
      String idB = b.id();
      assertTrue(svc.listContexts().containsAll(java.util.List.of(idA, idB)), svc.listContexts().toString());

      svc.delLLMCtx(a); // closes the handle, then deletes
      assertFalse(a.isOpen());
      assertFalse(svc.listContexts().contains(idA));
      assertThrows(NotFoundException.class, () -> svc.openLLMCtx(idA));
      assertThrows(NotFoundException.class, () -> svc.delLLMCtx(idA));

      b.close();
      svc.delLLMCtx(idB); // by id, once no handle is open
      assertFalse(svc.listContexts().contains(idB));
      assertThrows(NotFoundException.class, () -> svc.contextInfo(idB));
    }
  }

  @Test
  void rawFlagPersists() {
    try (LLMService svc = TestSupport.bind()) {
      LLMContext ctx = TestSupport.newRawContext(svc, "raw");
      try {
        assertTrue(ctx.info().raw());
      } finally {
        TestSupport.dispose(svc, ctx);
      }
    }
  }
}
