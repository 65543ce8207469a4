// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.api.Test;

/** Status codes as exceptions: the subclass, the code, and the library's detail. */
class ErrorsTest extends BoundService {
  private static void assertDetail(LLMException e, Status status) {
    assertEquals(status, e.status());
    assertEquals(status.code(), e.code());
    assertFalse(e.detail().isEmpty(), "the library's last error");
    assertTrue(e.getMessage().startsWith(LLMService.statusName(status.code()) + ": "), e.getMessage());
  }

  @Test
  void unknownIdIsNotFound() {
    String id = TestSupport.uniqueId("never-made");
    assertDetail(assertThrows(NotFoundException.class, () -> svc.openLLMCtx(id)), Status.NOT_FOUND);
    assertDetail(assertThrows(NotFoundException.class, () -> svc.delLLMCtx(id)), Status.NOT_FOUND);
    assertDetail(assertThrows(NotFoundException.class, () -> svc.contextInfo(id)), Status.NOT_FOUND);
  }

  @Test
  void badIdsAreInvalidArguments() {
    for (String id : new String[] {"has space", "slash/id", "..", "x".repeat(65), ""}) {
      assertDetail(assertThrows(InvalidArgumentException.class, () -> svc.newLLMCtx(new ContextOptions().id(id))),
          Status.INVALID_ARGUMENT);
      assertDetail(assertThrows(InvalidArgumentException.class, () -> svc.openLLMCtx(id)), Status.INVALID_ARGUMENT);
    }
  }

  /** The library validates option values; the binding passes them through unchanged. */
  @Test
  void badCallOptionsAreInvalidArguments() {
    LLMContext ctx = TestSupport.newContext(svc, "bad-options");
    try {
      assertDetail(assertThrows(InvalidArgumentException.class, () -> ctx.call("Hi", new CallOptions().topP(2f))),
          Status.INVALID_ARGUMENT);
      assertDetail(assertThrows(InvalidArgumentException.class, () -> ctx.call("Hi", new CallOptions().repeatPenalty(0f))),
          Status.INVALID_ARGUMENT);
      String[] seventeen = new String[17];
      java.util.Arrays.fill(seventeen, "stop");
      assertDetail(assertThrows(InvalidArgumentException.class, () -> ctx.call("Hi", new CallOptions().stop(seventeen))),
          Status.INVALID_ARGUMENT);
      assertEquals(0, ctx.info().tokens(), "refused calls leave the context untouched");
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** What C cannot receive is refused by the binding, with the status the library would give. */
  @Test
  void bindingRefusesWhatCCannotCarry() {
    // A NUL would cut a C string short: "ok\0evil" must not become the id "ok".
    assertDetail(assertThrows(InvalidArgumentException.class, () -> svc.openLLMCtx("ok\0evil")), Status.INVALID_ARGUMENT);
    // A lone surrogate has no UTF-8 form (String.getBytes would silently make it '?').
    LLMContext ctx = TestSupport.newContext(svc, "surrogate");
    try {
      assertDetail(assertThrows(InvalidUtf8Exception.class, () -> ctx.call("bad \uD83D here")), Status.INVALID_UTF8);
      assertDetail(assertThrows(InvalidUtf8Exception.class, () -> ctx.call("\uDE00")), Status.INVALID_UTF8);
      assertThrows(InvalidArgumentException.class, () -> svc.newLLMCtx("system \uDFFF"), "a subclass of InvalidArgument");
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  @Test
  void duplicateIdExists() {
    LLMContext ctx = TestSupport.newContext(svc, "dup");
    try {
      assertDetail(assertThrows(AlreadyExistsException.class, () -> svc.newLLMCtx(new ContextOptions().id(ctx.id()))),
          Status.EXISTS);
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  @Test
  void deleteWhileOpenIsBusy() {
    LLMContext ctx = TestSupport.newContext(svc, "busy");
    try {
      assertDetail(assertThrows(BusyException.class, () -> svc.delLLMCtx(ctx.id())), Status.BUSY);
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** Longer than any context holds (the service's n_ctx, from its model information, and more). */
  @Test
  void overlongPromptOverflows() {
    LLMContext ctx = TestSupport.newContext(svc, "overflow");
    try {
      String prompt = "word ".repeat(svc.modelInfo().contextLength() + 500);
      assertDetail(assertThrows(ContextOverflowException.class, () -> ctx.call(prompt, TestSupport.greedy(1))),
          Status.CONTEXT_OVERFLOW);
      assertEquals(0, ctx.info().tokens());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** The bind options reach the library: a 64-token context overflows where the default would not. */
  @Test
  void bindOptionsReachTheLibrary() {
    assumeTrue(TestSupport.embedded(), "the daemon has its own context length");
    try (LLMService small = LLMService.bind(TestSupport.options().contextLength(64).chunkTokens(16).kvRatio(-1f))) {
      LLMContext ctx = TestSupport.newContext(small, "small");
      try {
        assertDetail(assertThrows(ContextOverflowException.class, () -> ctx.call("word ".repeat(80), TestSupport.greedy(1))),
            Status.CONTEXT_OVERFLOW);
      } finally {
        TestSupport.dispose(small, ctx);
      }
    }
    assertDetail(assertThrows(InvalidArgumentException.class, () -> LLMService.bind(TestSupport.options().threads(-3))),
        Status.INVALID_ARGUMENT);
    assertDetail(assertThrows(InvalidArgumentException.class, () -> TestSupport.options().kvBudgetBytes(-1)),
        Status.INVALID_ARGUMENT);
  }

  @Test
  void noDaemonIsUnavailable() {
    assertDetail(assertThrows(UnavailableException.class,
        () -> LLMService.bind(new BindOptions().target("unix:/nonexistent/llmsvc-java-test.sock"))), Status.UNAVAILABLE);
  }

  @Test
  void missingModelIsModelNotFound() {
    assumeTrue(TestSupport.embedded(), "the model path applies to embedded binds only");
    assertDetail(assertThrows(ModelNotFoundException.class,
        () -> LLMService.bind(TestSupport.options().modelPath("/nonexistent/model.gguf"))), Status.MODEL_NOT_FOUND);
  }

  @Test
  void badTargetIsInvalidArgument() {
    assertDetail(assertThrows(InvalidArgumentException.class, () -> LLMService.bind(new BindOptions().target("tcp:1.2.3.4"))),
        Status.INVALID_ARGUMENT);
  }
}
