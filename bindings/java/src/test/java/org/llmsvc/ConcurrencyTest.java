// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/** The header's threading rules, as the binding keeps them. */
class ConcurrencyTest extends BoundService {
  private static final String PROMPT = "List three fruits.";

  private static String greedyReply(String prefix) {
    LLMContext ctx = TestSupport.newContext(svc, prefix);
    try {
      return ctx.call(PROMPT, TestSupport.greedy(12)).text();
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** Two threads, two contexts, at once: each gets the reply it gets alone. */
  @Test
  void twoThreadsOnDifferentContexts() throws Exception {
    String alone = greedyReply("alone");
    assertFalse(alone.isEmpty());
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      CountDownLatch start = new CountDownLatch(1);
      List<Future<String>> replies = new ArrayList<>();
      for (int i = 0; i < 2; i++) {
        String prefix = "thread" + i;
        replies.add(pool.submit(() -> {
          start.await();
          return greedyReply(prefix);
        }));
      }
      start.countDown();
      for (Future<String> f : replies) assertEquals(alone, f.get(120, TimeUnit.SECONDS));
    } finally {
      pool.shutdownNow();
    }
  }

  /** A second call on a context that is inside a call, from another thread, is BUSY. */
  @Test
  void secondThreadOnSameContextIsBusy() throws Exception {
    LLMContext ctx = TestSupport.newContext(svc, "same");
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      CountDownLatch inCall = new CountDownLatch(1);
      CountDownLatch tried = new CountDownLatch(1);
      Future<CallResult> first = pool.submit(() -> ctx.call("Hello", TestSupport.greedy(4), (piece, token) -> {
        inCall.countDown();
        try {
          return tried.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          return false;
        }
      }));
      assertTrue(inCall.await(60, TimeUnit.SECONDS));
      try {
        assertThrows(BusyException.class, () -> ctx.call("Me too"));
      } finally {
        tried.countDown();
      }
      assertFalse(first.get(60, TimeUnit.SECONDS).text().isEmpty(), "the first call is unaffected");
    } finally {
      pool.shutdownNow();
      TestSupport.dispose(svc, ctx);
    }
  }

  /** close() from another thread cancels the running call, waits for it, and then frees the handle. */
  @Test
  void closeCancelsARunningCall() throws Exception {
    LLMContext ctx = TestSupport.newRawContext(svc, "close-running");
    String id = ctx.id();
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      CountDownLatch inCall = new CountDownLatch(1);
      CountDownLatch closing = new CountDownLatch(1);
      java.util.concurrent.atomic.AtomicInteger pieces = new java.util.concurrent.atomic.AtomicInteger();
      Future<CallResult> call = pool.submit(() -> ctx.call("1, 2, 3, 4, 5, 6,", TestSupport.greedy(200), (piece, token) -> {
        pieces.incrementAndGet();
        inCall.countDown();
        try {
          closing.await(30, TimeUnit.SECONDS);
          Thread.sleep(20); // give close() time to cancel; the call must not outrun it
        } catch (InterruptedException e) {
          return false;
        }
        return true;
      }));
      assertTrue(inCall.await(60, TimeUnit.SECONDS));
      closing.countDown();
      ctx.close();
      int seen = pieces.get(); // close returned: the native call has ended, no piece comes after
      java.util.concurrent.ExecutionException e =
          assertThrows(java.util.concurrent.ExecutionException.class, () -> call.get(60, TimeUnit.SECONDS));
      assertTrue(e.getCause() instanceof CancelledException, e.getCause().toString());
      assertEquals(seen, pieces.get(), "a piece arrived after close() returned");
      CallResult partial = ((CancelledException) e.getCause()).partialResult();
      assertTrue(partial.generatedTokens() >= seen && partial.generatedTokens() < 200, partial.toString());
      assertThrows(IllegalStateException.class, () -> ctx.call("after"));
    } finally {
      pool.shutdownNow();
      svc.delLLMCtx(id);
    }
  }

  /** close() of the service waits for calls in flight on its contexts (the header's rule for unbind). */
  @Test
  void serviceCloseWaitsForCallsInFlight() throws Exception {
    LLMService own = TestSupport.bind();
    LLMContext ctx = TestSupport.newContext(own, "svc-wait");
    String id = ctx.id();
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      CountDownLatch inCall = new CountDownLatch(1);
      CountDownLatch release = new CountDownLatch(1);
      Future<CallResult> call = pool.submit(() -> ctx.call("Hello", TestSupport.greedy(4), (piece, token) -> {
        inCall.countDown();
        try {
          return release.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          return false;
        }
      }));
      assertTrue(inCall.await(60, TimeUnit.SECONDS));
      Thread closer = new Thread(own::close);
      closer.start();
      closer.join(300);
      assertTrue(closer.isAlive(), "close waits while a call runs");
      release.countDown();
      closer.join(60_000);
      assertFalse(closer.isAlive());
      assertFalse(call.get(60, TimeUnit.SECONDS).text().isEmpty());
    } finally {
      pool.shutdownNow();
      ctx.close();
      svc.delLLMCtx(id);
    }
  }
}
