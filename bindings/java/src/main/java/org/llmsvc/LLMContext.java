// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import java.lang.ref.Cleaner;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * An open persistent context ({@code llmsvc_context}): a conversation whose state the service
 * keeps. Closing the handle keeps the context; {@link LLMService#delLLMCtx(LLMContext)} deletes it.
 *
 * <p>A chat context's conversation is a list of {@link Message}s (ABI 1.3): each {@link #call}
 * adds its prompt as a user message and its reply as an assistant message; {@link #append(List)}
 * seeds it from the app's own data, {@link #generate(CallOptions)} replies to it, {@link
 * #truncate(int)} rewinds it and {@link #messages()} reads it back.
 *
 * <p>Threads: one call (or other conversation operation) at a time per context (a second, from another thread or from inside a
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
    return run(Objects.requireNonNull(prompt, "prompt"), options, new PieceSink(listener));
  }

  /**
   * As {@link #call(String, CallOptions, PieceListener)}, streaming each piece with the ids of its
   * tokens (and with {@link CallOptions#logprobs(boolean)} their log-probabilities) to {@code
   * listener}: over the call its pieces hold every generated token.
   *
   * @throws LLMException {@link Status#UNSUPPORTED} through a daemon older than this (protocol version 4)
   */
  public CallResult callWithTokens(String prompt, CallOptions options, TokenListener listener) {
    Objects.requireNonNull(prompt, "prompt");
    return run(prompt, options, new PieceSink(Objects.requireNonNull(listener, "listener")));
  }

  // ------------------------------------------------------------------ the conversation (ABI 1.3)

  /**
   * Appends {@code messages} to the conversation without generating: user and assistant messages
   * in turn, continuing it (the first of a new conversation is a user message). All or none are
   * appended. Their tokens are stored when this returns; their KV is computed by the next
   * {@link #generate(CallOptions)} or {@link #call(String)}.
   *
   * @throws InvalidArgumentException out of turn order (the detail names the message), a
   *     {@link Role#SYSTEM} message (the system prompt is a context option), a raw context
   * @throws ContextOverflowException they do not fit ({@link QuotaExceededException} through llmsvcd)
   * @throws LLMException {@link Status#UNSUPPORTED} for a {@link Role#TOOL} message, a context
   *     made before ABI 1.3, a daemon or library older than messages
   */
  public void append(List<Message> messages) {
    MessageArrays m = MessageArrays.of(messages);
    conversation(h -> {
      Native.contextAppend(h, m.roles, m.contents, m.toolCalls);
      return null;
    });
  }

  /** {@link #append(List)} of these messages. */
  public void append(Message... messages) {
    append(Arrays.asList(Objects.requireNonNull(messages, "messages")));
  }

  /** The reply to the conversation with the call options' defaults (greedy, up to 256 tokens). */
  public CallResult generate() {
    return generate(null, null);
  }

  public CallResult generate(CallOptions options) {
    return generate(options, null);
  }

  public CallResult generate(PieceListener listener) {
    return generate(null, listener);
  }

  /**
   * Generates the assistant's reply to the conversation, which must end with a user message, as
   * {@link #call(String, CallOptions, PieceListener)} does without a prompt: the same options,
   * streaming, cancelling and {@link CallResult} ({@link CallResult#promptTokens()} is 0). The
   * reply becomes the conversation's next message.
   *
   * @throws InvalidArgumentException the conversation does not end with a user message (nothing
   *     to reply to), or the context is raw
   * @throws CancelledException as for a call
   * @throws LLMException {@link Status#UNSUPPORTED} through a daemon or library older than messages
   */
  public CallResult generate(CallOptions options, PieceListener listener) {
    requireMessages();
    return run(null, options, new PieceSink(listener));
  }

  /** As {@link #generate(CallOptions, PieceListener)}, streaming the token ids as {@link #callWithTokens} does. */
  public CallResult generateWithTokens(CallOptions options, TokenListener listener) {
    requireMessages();
    return run(null, options, new PieceSink(Objects.requireNonNull(listener, "listener")));
  }

  /**
   * Rewinds the conversation to its first {@code nMessages} messages: the later ones and their
   * tokens are dropped, the KV of the earlier ones kept. Stored when it returns.
   *
   * @throws InvalidArgumentException the conversation holds fewer messages, {@code nMessages} is
   *     negative, or the context is raw
   */
  public void truncate(int nMessages) {
    if (nMessages < 0) {
      throw (InvalidArgumentException) LLMException.of(Status.INVALID_ARGUMENT.code(),
          "nMessages is negative: " + nMessages);
    }
    conversation(h -> {
      Native.contextTruncate(h, nMessages);
      return null;
    });
  }

  /** The conversation's messages, oldest first (an unmodifiable list). */
  public List<Message> messages() {
    return messages(0);
  }

  /**
   * The conversation's messages from index {@code first} (an unmodifiable list; empty past the end).
   *
   * @throws InvalidArgumentException a raw context (it holds no messages), {@code first} negative
   */
  public List<Message> messages(int first) {
    if (first < 0) {
      throw (InvalidArgumentException) LLMException.of(Status.INVALID_ARGUMENT.code(), "first is negative: " + first);
    }
    Object[] raw = conversation(h -> Native.contextMessages(h, first));
    int[] roles = (int[]) raw[0];
    byte[][] contents = (byte[][]) raw[1];
    byte[][] calls = (byte[][]) raw[2];
    List<Message> out = new ArrayList<>(roles.length);
    for (int i = 0; i < roles.length; i++) {
      out.add(new Message(Role.of(roles[i]), Utf8.decode(contents[i]), calls[i] == null ? null : Utf8.decode(calls[i])));
    }
    return Collections.unmodifiableList(out);
  }

  /** {@link #fork(String)} with a fresh id. */
  public LLMContext fork() {
    return fork(null);
  }

  /**
   * Forks this context: a new one, opened, with its mode, system prompt, tokens and conversation
   * ({@code id} null: a fresh id). It shares this context's KV memory in the service until
   * either goes on; then each goes on alone, and deleting one leaves the other intact.
   *
   * @throws BusyException this context is inside a call (through any handle)
   * @throws AlreadyExistsException {@code id} names a context already
   * @throws InvalidArgumentException {@code id} is not a valid context id
   */
  public LLMContext fork(String id) {
    if (Native.abiVersion() < Native.FORK_ABI) {
      throw LLMException.of(Status.UNSUPPORTED.code(), "the loaded libllmsvc is older than fork (ABI 1.4)");
    }
    byte[] utf8 = Utf8.cString(id, "id");
    long child = exclusive("is inside a call", h -> Native.contextFork(h, utf8));
    return service.adopt(child);
  }

  /** A native operation on the handle. */
  @FunctionalInterface
  private interface NativeOp<T> {
    T apply(long handle);
  }

  /** Runs a conversation operation as a call runs (see {@link #exclusive}). */
  private <T> T conversation(NativeOp<T> op) {
    requireMessages();
    return exclusive("is inside a call", op);
  }

  /**
   * Runs {@code op} with the handle held, as the one operation on this context ({@link
   * BusyException}, "context '...' {@code busy}", while another runs, from a listener too), never
   * during unbind.
   */
  private <T> T exclusive(String busy, NativeOp<T> op) {
    long h = guard.acquire();
    try {
      if (!inCall.compareAndSet(false, true)) {
        throw (BusyException) LLMException.of(Status.BUSY.code(), "context '" + id + "' " + busy);
      }
      try {
        service.unbindLock.readLock().lock();
        try {
          return op.apply(h);
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

  /** A library older than ABI 1.3 lacks the functions: refused before calling them. */
  private static void requireMessages() {
    requireAbi13("messages");
  }

  /**
   * A library older than ABI 1.3 lacks {@code what} (its option structs are shorter, and would
   * silently ignore the new fields): refused before calling it.
   */
  static void requireAbi13(String what) {
    if (Native.abiVersion() < Native.MESSAGES_ABI) {
      throw LLMException.of(Status.UNSUPPORTED.code(), "the loaded libllmsvc is older than " + what + " (ABI 1.3)");
    }
  }

  /** A call ({@code prompt} non-null) or the reply to the conversation ({@code prompt} null). */
  private CallResult run(String prompt, CallOptions options, PieceSink sink) {
    byte[] utf8 = prompt == null ? null : Utf8.encode(prompt, "prompt");
    CallOptions o = options != null ? options : new CallOptions();
    byte[][] stop = o.stopBytes();
    byte[] jsonSchema = Utf8.cString(o.jsonSchema, "json schema");
    byte[] grammar = Utf8.cString(o.grammar, "grammar");
    if (o.constrained()) {
      requireAbi13("structured output (json schema, grammar)");
    }
    if (o.levelPercent != 0 && Native.abiVersion() < Native.LEVELS_ABI) {
      // An older library would ignore the field and run its own level.
      throw LLMException.of(Status.UNSUPPORTED.code(), "the loaded libllmsvc is older than elastic levels (ABI 1.5)");
    }
    if ((o.set & Native.CALL_KEEP) != 0 && o.promptKeep != 0 && Native.abiVersion() < Native.KEEP_ABI) {
      throw LLMException.of(Status.UNSUPPORTED.code(), "the loaded libllmsvc is older than prompt compression (ABI 1.7)");
    }
    byte[] adapter = Utf8.cString(o.adapter, "adapter");
    if (adapter != null && Native.abiVersion() < Native.ADAPTERS_ABI) {
      throw LLMException.of(Status.UNSUPPORTED.code(), "the loaded libllmsvc is older than LoRA adapters (ABI 1.6)");
    }
    return exclusive("is inside another call", h -> {
      int[] ints = new int[Native.RESULT_INTS];
      double[] doubles = new double[Native.RESULT_DOUBLES];
      try {
        Native.call(h, utf8, o.set, o.seed, o.temperature, o.topK, o.topP, o.minP, o.repeatPenalty, o.repeatLastN,
            o.maxTokens, o.sloTtftRatio, o.sloTpotRatio, o.levelPercent, o.promptKeep, adapter, stop, jsonSchema, grammar,
            sink.wantsTokens(), o.logprobs, sink, ints, doubles);
      } catch (CancelledException e) {
        e.setPartialResult(new CallResult(sink.text(), ints, doubles));
        throw e;
      }
      return new CallResult(sink.text(), ints, doubles);
    });
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
