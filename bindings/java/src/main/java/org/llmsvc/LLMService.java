// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import java.lang.ref.Cleaner;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * A bound llmsvc service ({@code llmsvc_service}): the LLMS service interface in Java.
 *
 * <pre>{@code
 * try (LLMService svc = LLMService.bind();                  // bindService: embedded, or $LLMSVC_TARGET
 *      LLMContext ctx = svc.newLLMCtx("You are terse.")) {  // newLLMCtx(systemPrompt)
 *   String reply = svc.callLLM(ctx, "Hello!");              // callLLM
 *   svc.delLLMCtx(ctx);                                     // delLLMCtx
 * }
 * }</pre>
 *
 * <p>Threads: every method may be called from several threads at once. {@link #close()} waits
 * for calls running on this service's contexts; contexts still open stay usable after it (the
 * engine lives until the last one closes), but this object's methods throw
 * {@link IllegalStateException}.
 */
public final class LLMService implements AutoCloseable {
  /** Closes handles dropped without close() (one daemon thread for the whole binding). */
  static final Cleaner CLEANER = Cleaner.create();

  /**
   * Held shared by every native call on a context, exclusively by unbind: the header allows
   * unbind only while no call runs.
   */
  final ReentrantReadWriteLock unbindLock = new ReentrantReadWriteLock();

  private final HandleGuard guard;
  private final Cleaner.Cleanable cleanable;

  private LLMService(long handle) {
    this.guard = new HandleGuard(handle, "service");
    this.cleanable = CLEANER.register(this, new Unbinder(guard, unbindLock));
  }

  /** Unbinds once no call runs. Never touches the LLMService. */
  private static final class Unbinder implements Runnable {
    private final HandleGuard guard;
    private final ReentrantReadWriteLock unbindLock;

    Unbinder(HandleGuard guard, ReentrantReadWriteLock unbindLock) {
      this.guard = guard;
      this.unbindLock = unbindLock;
    }

    @Override
    public void run() {
      long h = guard.close(null);
      if (h == 0) return;
      unbindLock.writeLock().lock();
      try {
        Native.unbind(h);
      } finally {
        unbindLock.writeLock().unlock();
      }
    }
  }

  /** Binds with the defaults: {@code $LLMSVC_TARGET}, else embedded with the default model. */
  public static LLMService bind() {
    return bind(null);
  }

  /**
   * Binds to the service (bindService). Embedded, this loads the model.
   *
   * @throws UnavailableException no daemon answers on the unix: target
   * @throws ModelNotFoundException embedded, and the model file is missing
   */
  public static LLMService bind(BindOptions options) {
    BindOptions o = options != null ? options : new BindOptions();
    long h = Native.bind(Utf8.cString(o.target, "target"), Utf8.cString(o.modelPath, "model path"),
        Utf8.cString(o.stateDir, "state dir"), o.set, o.threads, o.contextLength, o.chunkTokens,
        o.recomputeOnModelChange, o.kvBudgetBytes, o.kvRatio, adapters(o));
    return new LLMService(h);
  }

  private static byte[] adapters(BindOptions o) {
    byte[] a = Utf8.cString(o.adapters, "adapters");
    if (a != null && Native.abiVersion() < Native.ADAPTERS_ABI) {
      throw LLMException.of(Status.UNSUPPORTED.code(), "the loaded libllmsvc is older than LoRA adapters (ABI 1.6)");
    }
    return a;
  }

  /** The loaded library's ABI version: (major << 16) | minor. */
  public static int abiVersion() {
    return Native.abiVersion();
  }

  /** The C name of a status code, e.g. "LLMSVC_ERR_NOT_FOUND". */
  public static String statusName(int status) {
    return Native.statusName(status);
  }

  /** A new context with a generated id and the template's default system prompt. */
  public LLMContext newLLMCtx() {
    return newLLMCtx(new ContextOptions());
  }

  /** newLLMCtx(systemPrompt): a new context with a generated id. */
  public LLMContext newLLMCtx(String systemPrompt) {
    return newLLMCtx(new ContextOptions().systemPrompt(systemPrompt));
  }

  /** A new context: {@link AlreadyExistsException} when its id is taken. */
  public LLMContext newLLMCtx(ContextOptions options) {
    ContextOptions o = options != null ? options : new ContextOptions();
    byte[] id = Utf8.cString(o.id, "id");
    byte[] system = Utf8.cString(o.systemPrompt, "system prompt");
    byte[] tools = Utf8.cString(o.toolsJson, "tools");
    if (tools != null && Native.abiVersion() < Native.FORK_ABI) {
      throw LLMException.of(Status.UNSUPPORTED.code(), "the loaded libllmsvc is older than tools (ABI 1.4)");
    }
    byte[] adapter = Utf8.cString(o.adapter, "adapter");
    if (adapter != null && Native.abiVersion() < Native.ADAPTERS_ABI) {
      throw LLMException.of(Status.UNSUPPORTED.code(), "the loaded libllmsvc is older than LoRA adapters (ABI 1.6)");
    }
    long s = guard.acquire();
    try {
      return wrap(Native.contextNew(s, id, system, o.raw, tools, adapter));
    } finally {
      guard.release();
    }
  }

  /** Reopens a persistent context by id, with its history: {@link NotFoundException} when there is none. */
  public LLMContext openLLMCtx(String id) {
    byte[] utf8 = Utf8.cString(Objects.requireNonNull(id, "id"), "id");
    long s = guard.acquire();
    try {
      return wrap(Native.contextOpen(s, utf8));
    } finally {
      guard.release();
    }
  }

  /** Wraps a context handle the library opened through this service (a fork). */
  LLMContext adopt(long context) {
    return wrap(context);
  }

  private LLMContext wrap(long context) {
    try {
      return new LLMContext(this, context);
    } catch (RuntimeException | Error e) {
      Native.contextClose(context);
      throw e;
    }
  }

  /** callLLM: the reply to {@code prompt} in {@code ctx}. */
  public String callLLM(LLMContext ctx, String prompt) {
    return callLLM(ctx, prompt, null, null).text();
  }

  public CallResult callLLM(LLMContext ctx, String prompt, CallOptions options) {
    return callLLM(ctx, prompt, options, null);
  }

  /** callLLM, streamed: each piece goes to {@code listener}, which may cancel the call. */
  public CallResult callLLM(LLMContext ctx, String prompt, PieceListener listener) {
    return callLLM(ctx, prompt, null, listener);
  }

  /** callLLM in full: see {@link LLMContext#call(String, CallOptions, PieceListener)}. */
  public CallResult callLLM(LLMContext ctx, String prompt, CallOptions options, PieceListener listener) {
    mine(ctx);
    return ctx.call(prompt, options, listener);
  }

  /** delLLMCtx: closes {@code ctx} and deletes the context and its state. */
  public void delLLMCtx(LLMContext ctx) {
    mine(ctx);
    ctx.close();
    delLLMCtx(ctx.id());
  }

  /** delLLMCtx by id: {@link NotFoundException} when there is none, {@link BusyException} while a handle to it is open. */
  public void delLLMCtx(String id) {
    byte[] utf8 = Utf8.cString(Objects.requireNonNull(id, "id"), "id");
    long s = guard.acquire();
    try {
      Native.contextDelete(s, utf8);
    } finally {
      guard.release();
    }
  }

  /**
   * The LoRA adapters the service offers, by name (ABI 1.6; embedded: {@link
   * BindOptions#adapter(String, String)}; through llmsvcd: its configuration's).
   */
  public List<String> adapters() {
    if (Native.abiVersion() < Native.ADAPTERS_ABI) {
      throw LLMException.of(Status.UNSUPPORTED.code(), "the loaded libllmsvc is older than LoRA adapters (ABI 1.6)");
    }
    return names(Native::adapterList);
  }

  /** The ids of the contexts the service holds for this app (open or not). */
  public List<String> listContexts() {
    return names(Native::contextList);
  }

  /** A native name list (ids, adapter names) of this service, decoded. */
  private List<String> names(java.util.function.LongFunction<byte[][]> list) {
    byte[][] names;
    long s = guard.acquire();
    try {
      names = list.apply(s);
    } finally {
      guard.release();
    }
    List<String> out = new ArrayList<>(names.length);
    for (byte[] n : names) out.add(Utf8.decode(n));
    return Collections.unmodifiableList(out);
  }

  /** Describes the context {@code id}, open or not. */
  public ContextInfo contextInfo(String id) {
    byte[] utf8 = Utf8.cString(Objects.requireNonNull(id, "id"), "id");
    int[] ints = new int[Native.INFO_INTS];
    long[] longs = new long[Native.INFO_LONGS];
    long s = guard.acquire();
    try {
      Native.contextInfo(s, utf8, ints, longs);
    } finally {
      guard.release();
    }
    return new ContextInfo(id, ints, longs);
  }

  public ServiceStats stats() {
    long[] longs = new long[Native.STATS_LONGS];
    long s = guard.acquire();
    try {
      Native.stats(s, longs);
    } finally {
      guard.release();
    }
    return new ServiceStats(longs);
  }

  /**
   * The service's model and whether it is ready (the readiness query): architecture, name, sizes,
   * trained and effective context length, weight types, special tokens, devices.
   *
   * @throws LLMException {@link Status#UNAVAILABLE} when the daemon cannot be reached, {@link
   *     Status#UNSUPPORTED} through a daemon older than this (protocol version 4)
   */
  public ModelInfo modelInfo() {
    int[] ints = new int[Native.MODEL_INTS];
    long[] longs = new long[Native.MODEL_LONGS];
    int[] typeTensors = new int[Native.MODEL_MAX_WEIGHT_TYPES];
    long[] typeBytes = new long[Native.MODEL_MAX_WEIGHT_TYPES];
    byte[][] raw;
    long s = guard.acquire();
    try {
      raw = Native.modelInfo(s, ints, longs, typeTensors, typeBytes);
    } finally {
      guard.release();
    }
    String[] strings = new String[Native.MODEL_STRINGS];
    for (int i = 0; i < strings.length; i++) strings[i] = Utf8.decode(raw[i]);
    List<ModelInfo.WeightType> types = new ArrayList<>();
    for (int i = 0; i < ints[Native.MODEL_N_WEIGHT_TYPES]; i++) {
      types.add(new ModelInfo.WeightType(Utf8.decode(raw[Native.MODEL_STRINGS + i]), typeTensors[i], typeBytes[i]));
    }
    return new ModelInfo(ints, longs, strings, types);
  }

  /** The tokens {@code text} adds to a raw context (not its first prompt). */
  public int countTokens(String text) {
    return tokenIds(text, false, false, null).length;
  }

  /**
   * The ids of the tokens {@code text} adds as a prompt, as a call counts them: {@code chat}, as
   * a user turn with the chat template's tokens; {@code firstTurn}, as a new context's first
   * prompt (BOS, and for chat the system turn of {@code systemPrompt}, null: the template's).
   */
  public int[] tokenIds(String text, boolean chat, boolean firstTurn, String systemPrompt) {
    byte[] utf8 = Utf8.encode(Objects.requireNonNull(text, "text"), "text");
    byte[] system = systemPrompt == null ? null : Utf8.cString(systemPrompt, "system prompt");
    long s = guard.acquire();
    try {
      return Native.countTokens(s, utf8, null, null, chat, firstTurn, system);
    } finally {
      guard.release();
    }
  }

  /**
   * The tokens {@link LLMContext#append(List)} stores for {@code messages} in a chat context (ABI
   * 1.3): with {@code firstTurn}, appended to a new context with {@code systemPrompt} (null: the
   * template's default; BOS and the system turn included), else after an assistant message.
   *
   * @throws InvalidArgumentException messages out of turn order (e.g. an assistant message first of
   *     a new conversation: the detail names the message), a {@link Role#SYSTEM} message
   * @throws LLMException {@link Status#UNSUPPORTED} for a {@link Role#TOOL} message, a daemon or
   *     library older than this
   */
  public int countTokens(List<Message> messages, boolean firstTurn, String systemPrompt) {
    return tokenIds(messages, firstTurn, systemPrompt).length;
  }

  /** The ids of the tokens {@link #countTokens(List, boolean, String)} counts, in order. */
  public int[] tokenIds(List<Message> messages, boolean firstTurn, String systemPrompt) {
    MessageArrays m = MessageArrays.of(messages);
    byte[] system = systemPrompt == null ? null : Utf8.cString(systemPrompt, "system prompt");
    LLMContext.requireAbi13("counting messages");
    long s = guard.acquire();
    try {
      return Native.countTokens(s, null, m.roles, m.contents, true, firstTurn, system);
    } finally {
      guard.release();
    }
  }

  public boolean isOpen() {
    return guard.isOpen();
  }

  /**
   * Unbinds. Idempotent. Waits for calls running on this service's contexts; refused from inside
   * one of them (a listener), which would wait for itself.
   */
  @Override
  public void close() {
    guard.checkNotInUseByThisThread();
    if (unbindLock.getReadHoldCount() > 0) {
      throw new IllegalStateException("cannot close the service from inside a call on one of its contexts");
    }
    cleanable.clean();
  }

  private void mine(LLMContext ctx) {
    Objects.requireNonNull(ctx, "ctx");
    if (!guard.isOpen()) throw new IllegalStateException("service is closed");
    if (ctx.service() != this) throw new IllegalArgumentException("context '" + ctx.id() + "' belongs to another service");
  }
}
