// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/** callLLM with a listener: pieces, cancelling (from the listener, from another thread), listener failures. */
class StreamingTest extends BoundService {
  /**
   * Pieces arrive on the calling thread and concatenate to the result's text; with -Xcheck:jni
   * (run_junit.sh) a reply of many pieces also shows the callback frees each piece's reference.
   */
  @Test
  void piecesConcatenateToTheText() {
    LLMContext ctx = TestSupport.newContext(svc, "pieces");
    try {
      List<String> pieces = new ArrayList<>();
      Thread caller = Thread.currentThread();
      CallResult r = svc.callLLM(ctx, "Write a sentence about the sea.", TestSupport.greedy(40), (piece, token) -> {
        assertSame(caller, Thread.currentThread());
        pieces.add(piece);
        return true;
      });
      assertTrue(pieces.size() > 16, "more pieces than JNI's 16 default local references: " + pieces.size());
      assertEquals(String.join("", pieces), r.text());
      assertTrue(pieces.size() <= r.generatedTokens(), "at most one piece per token");
      LLMContext again = TestSupport.newContext(svc, "pieces-again");
      try {
        assertEquals(r.text(), again.call("Write a sentence about the sea.", TestSupport.greedy(40)).text(),
            "the same reply without a listener");
      } finally {
        TestSupport.dispose(svc, again);
      }
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  @Test
  void listenerReturningFalseCancels() {
    LLMContext ctx = TestSupport.newContext(svc, "cancel");
    try {
      List<String> pieces = new ArrayList<>();
      CancelledException e = assertThrows(CancelledException.class,
          () -> ctx.call("Count from one to twenty.", TestSupport.greedy(16), (piece, token) -> {
            pieces.add(piece);
            return pieces.size() < 3;
          }));
      assertEquals(Status.CANCELLED, e.status());
      assertEquals(3, pieces.size(), "no piece after the cancel (through the daemon too)");
      CallResult partial = e.partialResult();
      assertNotNull(partial);
      assertEquals(String.join("", pieces), partial.text());
      assertEquals(FinishReason.CANCELLED, partial.finishReason());
      assertEquals(partial.contextTokens(), ctx.info().tokens(), "what was generated stays in the context");
      assertFalse(ctx.call("And now?", TestSupport.greedy(2)).text().isEmpty(), "the context is usable after a cancel");
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /**
   * Cancelling on the last piece still cancels, though the reply was complete (through the
   * daemon the call has often finished before the cancel reaches it).
   */
  @Test
  void cancelOnTheLastPieceStillCancels() {
    LLMContext ctx = TestSupport.newContext(svc, "cancel-last");
    try {
      int[] calls = {0};
      CancelledException e = assertThrows(CancelledException.class, () -> ctx.call("Hi", TestSupport.greedy(1), (piece, token) -> {
        calls[0]++;
        return false;
      }));
      assertEquals(1, calls[0]);
      assertEquals(1, e.partialResult().generatedTokens());
      assertFalse(e.partialResult().text().isEmpty());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  @Test
  void cancelFromAnotherThread() throws Exception {
    LLMContext ctx = TestSupport.newRawContext(svc, "cancel-thread");
    try {
      CountDownLatch firstPiece = new CountDownLatch(1);
      CountDownLatch cancelled = new CountDownLatch(1);
      Thread canceller = new Thread(() -> {
        try {
          firstPiece.await();
          ctx.cancel();
          cancelled.countDown();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      });
      canceller.start();
      assertThrows(CancelledException.class, () -> ctx.call("1, 2, 3, 4, 5, 6,", TestSupport.greedy(200), (piece, token) -> {
        firstPiece.countDown();
        try {
          return cancelled.await(10, TimeUnit.SECONDS); // then carry on: the cancel alone must end the call
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return false;
        }
      }));
      canceller.join();
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** A listener's exception cancels the call and comes out of callLLM as the same object. */
  @Test
  void listenerExceptionPropagates() {
    LLMContext ctx = TestSupport.newContext(svc, "throws");
    try {
      IllegalStateException thrown = new IllegalStateException("listener failed");
      int[] calls = {0};
      IllegalStateException e = assertThrows(IllegalStateException.class,
          () -> ctx.call("Tell me a story.", TestSupport.greedy(16), (piece, token) -> {
            calls[0]++;
            if (calls[0] == 2) throw thrown;
            return true;
          }));
      assertSame(thrown, e);
      assertEquals(2, calls[0], "no piece after the exception");
      AssertionError error = new AssertionError("an Error too");
      assertSame(error, assertThrows(AssertionError.class, () -> ctx.call("Again.", TestSupport.greedy(4), (piece, token) -> {
        throw error;
      })));
      assertFalse(ctx.call("Still there?", TestSupport.greedy(2)).text().isEmpty(), "the context is usable after");
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** A call on the same context from inside its own listener is BUSY (one call at a time per context). */
  @Test
  void nestedCallOnSameContextIsBusy() {
    LLMContext ctx = TestSupport.newContext(svc, "nested");
    try {
      List<LLMException> seen = new ArrayList<>();
      ctx.call("Hi", TestSupport.greedy(2), (piece, token) -> {
        try {
          ctx.call("nested");
        } catch (BusyException e) {
          seen.add(e);
        }
        return true;
      });
      assertFalse(seen.isEmpty());
      assertEquals(Status.BUSY, seen.get(0).status());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }
}
