// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Binding, closing, and what a closed handle does: bindService and the handles' lifetimes. */
class LifecycleTest {
  @Test
  void abiVersionAndStatusNames() {
    assertEquals(1, LLMService.abiVersion() >>> 16, "major ABI version");
    assertEquals("LLMSVC_ERR_NOT_FOUND", LLMService.statusName(Status.NOT_FOUND.code()));
    for (Status s : Status.values()) {
      if (s != Status.UNKNOWN) assertEquals(LLMService.statusName(s.code()), LLMException.name(s.code()));
    }
  }

  @Test
  void bindAndCloseTwice() {
    LLMService svc = TestSupport.bind();
    assertTrue(svc.isOpen());
    assertTrue(svc.stats().weightBytes() > 0, "the model is loaded");
    svc.close();
    assertFalse(svc.isOpen());
    svc.close(); // idempotent
  }

  /** LLMService.bind() with no options: $LLMSVC_TARGET (run_junit.sh sets it to this run's target). */
  @Test
  void bindWithDefaults() {
    try (LLMService svc = LLMService.bind()) {
      LLMContext ctx = TestSupport.newContext(svc, "defaults");
      try {
        assertFalse(svc.callLLM(ctx, "Hi", TestSupport.greedy(2)).text().isEmpty());
      } finally {
        TestSupport.dispose(svc, ctx);
      }
    }
  }

  @Test
  void serviceUseAfterCloseThrows() {
    LLMService svc = TestSupport.bind();
    LLMContext ctx = TestSupport.newContext(svc, "svc-closed");
    String id = ctx.id();
    ctx.close();
    svc.close();
    assertThrows(IllegalStateException.class, svc::newLLMCtx);
    assertThrows(IllegalStateException.class, () -> svc.openLLMCtx(id));
    assertThrows(IllegalStateException.class, () -> svc.callLLM(ctx, "Hi"));
    assertThrows(IllegalStateException.class, svc::listContexts);
    assertThrows(IllegalStateException.class, () -> svc.contextInfo(id));
    assertThrows(IllegalStateException.class, svc::stats);
    assertThrows(IllegalStateException.class, () -> svc.delLLMCtx(id));
    try (LLMService again = TestSupport.bind()) {
      again.delLLMCtx(id);
    }
  }

  @Test
  void contextUseAfterCloseThrows() {
    try (LLMService svc = TestSupport.bind()) {
      LLMContext ctx = TestSupport.newContext(svc, "ctx-closed");
      ctx.close();
      assertFalse(ctx.isOpen());
      ctx.close(); // idempotent
      assertThrows(IllegalStateException.class, () -> ctx.call("Hi"));
      assertThrows(IllegalStateException.class, () -> svc.callLLM(ctx, "Hi", TestSupport.greedy(1)));
      assertThrows(IllegalStateException.class, ctx::cancel);
      assertThrows(IllegalStateException.class, ctx::info);
      assertFalse(ctx.id().isEmpty(), "the id stays readable");
      svc.delLLMCtx(ctx.id());
    }
  }

  /** As in C: a context handle stays usable after its service is closed, and keeps the engine alive. */
  @Test
  void contextOutlivesItsService() {
    LLMService svc = TestSupport.bind();
    LLMContext ctx = TestSupport.newContext(svc, "outlives");
    String id = ctx.id();
    svc.close();
    assertFalse(ctx.call("Hi", TestSupport.greedy(2)).text().isEmpty());
    ctx.close();
    try (LLMService again = TestSupport.bind()) {
      again.delLLMCtx(id);
    }
  }

  @Test
  void closeFromInsideOwnCallIsRefused() {
    LLMService svc = TestSupport.bind();
    try {
      LLMContext ctx = TestSupport.newContext(svc, "close-inside");
      try {
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> ctx.call("Hi", TestSupport.greedy(4),
            (piece, token) -> {
              ctx.close();
              return true;
            }));
        assertTrue(e.getMessage().contains("inside"), e.getMessage());
        assertThrows(IllegalStateException.class, () -> ctx.call("Hi", TestSupport.greedy(4), (piece, token) -> {
          svc.close();
          return true;
        }));
        assertTrue(ctx.isOpen() && svc.isOpen(), "neither was closed");
      } finally {
        TestSupport.dispose(svc, ctx);
      }
    } finally {
      svc.close();
    }
  }

  @Test
  void contextFromAnotherServiceIsRefused() {
    try (LLMService a = TestSupport.bind(); LLMService b = TestSupport.bind()) {
      LLMContext ctx = TestSupport.newContext(a, "foreign");
      try {
        assertThrows(IllegalArgumentException.class, () -> b.callLLM(ctx, "Hi"));
      } finally {
        TestSupport.dispose(a, ctx);
      }
    }
  }
}
