// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import java.lang.ref.Cleaner;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * An open persistent context ({@code llmsvc_context}): a conversation whose state the service
 * keeps. Closing the handle keeps the context; {@link LLMService#delLLMCtx(LLMContext)} deletes it.
 *
 * <p>Threads: one call at a time per context (a second, from another thread or from inside a
 * listener, is {@link BusyException}); calls on different contexts run concurrently;
 * {@link #cancel()} and {@link #close()} work from any thread at any time, close cancelling a
 * running call and waiting for it to end. A context outlives its service's {@link LLMService#close()}.
 */
public final class LLMContext implements AutoCloseable {
  private final LLMService service;
  private final String id;
  private final HandleGuard guard;
  private final AtomicBoolean inCall = new AtomicBoolean();
  private final Cleaner.Cleanable cleanable;

  LLMContext(LLMService service, long handle) {
    this.service = service;
    this.id = Utf8.decode(Native.contextId(handle));
    this.guard = new HandleGuard(handle, "context '" + id + "'");
    // A context dropped without close() is closed when collected; the action holds no reference to this.
    this.cleanable = LLMService.CLEANER.register(this, new Closer(guard, service.unbindLock));
  }

  /** Cancels the running call (if any), waits for it, frees the native handle. Never touches `this`. */
  private static final class Closer implements Runnable {
    private final HandleGuard guard;
    private final ReentrantReadWriteLock unbindLock;

    Closer(HandleGuard guard, ReentrantReadWriteLock unbindLock) {
      this.guard = guard;
      this.unbindLock = unbindLock;
    }

    @Override
    public void run() {
      long h = guard.close(Native::contextCancel);
      if (h == 0) return;
      unbindLock.readLock().lock(); // never concurrently with the service's unbind (header's rule)
      try {
        Native.contextClose(h);
      } finally {
        unbindLock.readLock().unlock();
      }
    }
  }

  /** The context's id: reopen it with {@link LLMService#openLLMCtx(String)}. Valid after close too. */
  public String id() {
    return id;
  }

  public LLMService service() {
    return service;
  }

  /** The reply to {@code prompt} (the call options' defaults: greedy, up to 256 tokens). */
  public String call(String prompt) {
    return call(prompt, null, null).text();
  }

  public CallResult call(String prompt, CallOptions options) {
    return call(prompt, options, null);
  }

  public CallResult call(String prompt, PieceListener listener) {
    return call(prompt, null, listener);
  }

  /**
   * Appends {@code prompt} to the context (as a user turn unless the context is raw), generates a
   * reply, and streams it to {@code listener} (may be null) on this thread.
   *
   * @throws CancelledException the listener returned false or {@link #cancel()} was called; its
   *     {@link CancelledException#partialResult()} holds what was generated (kept in the context)
   * @throws IllegalStateException the context is closed
   * @throws LLMException any other failure; an exception thrown by the listener is rethrown as is
   */
  public CallResult call(String prompt, CallOptions options, PieceListener listener) {
    return run(prompt, options, new PieceSink(listener));
  }

  /**
   * As {@link #call(String, CallOptions, PieceListener)}, streaming each piece with the ids of its
   * tokens (and with {@link CallOptions#logprobs(boolean)} their log-probabilities) to {@code
   * listener}: over the call its pieces hold every generated token.
   *
   * @throws LLMException {@link Status#UNSUPPORTED} through a daemon older than this (protocol version 4)
   */
  public CallResult callWithTokens(String prompt, CallOptions options, TokenListener listener) {
    return run(prompt, options, new PieceSink(Objects.requireNonNull(listener, "listener")));
  }

  private CallResult run(String prompt, CallOptions options, PieceSink sink) {
    byte[] utf8 = Utf8.encode(Objects.requireNonNull(prompt, "prompt"), "prompt");
    CallOptions o = options != null ? options : new CallOptions();
    byte[][] stop = o.stopBytes();
    long h = guard.acquire();
    try {
      if (!inCall.compareAndSet(false, true)) {
        throw (BusyException) LLMException.of(Status.BUSY.code(), "context '" + id + "' is inside another call");
      }
      try {
        service.unbindLock.readLock().lock();
        try {
          int[] ints = new int[Native.RESULT_INTS];
          double[] doubles = new double[Native.RESULT_DOUBLES];
          try {
            Native.call(h, utf8, o.set, o.seed, o.temperature, o.topK, o.topP, o.minP, o.repeatPenalty, o.repeatLastN,
                o.maxTokens, o.sloTtftRatio, o.sloTpotRatio, stop, sink.wantsTokens(), o.logprobs, sink, ints, doubles);
          } catch (CancelledException e) {
            e.setPartialResult(new CallResult(sink.text(), ints, doubles));
            throw e;
          }
          return new CallResult(sink.text(), ints, doubles);
        } finally {
          service.unbindLock.readLock().unlock();
        }
      } finally {
        inCall.set(false);
      }
    } finally {
      guard.release();
    }
  }

  /** Asks the running call to stop (it ends with {@link CancelledException}); a no-op when idle. Any thread. */
  public void cancel() {
    long h = guard.acquire();
    try {
      Native.contextCancel(h);
    } finally {
      guard.release();
    }
  }

  /** This context as the service describes it (needs the service open). */
  public ContextInfo info() {
    guard.acquire();
    try {
      return service.contextInfo(id);
    } finally {
      guard.release();
    }
  }

  public boolean isOpen() {
    return guard.isOpen();
  }

  /**
   * Closes the handle (the context persists). Idempotent. A call running on another thread is
   * cancelled and waited for. Not allowed from inside this context's own listener.
   */
  @Override
  public void close() {
    guard.checkNotInUseByThisThread();
    cleanable.clean();
  }

  @Override
  public String toString() {
    return "LLMContext{" + id + (isOpen() ? "" : ", closed") + "}";
  }
}
