// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/**
 * How to bind ({@code llmsvc_bind_options}). A field left unset keeps the library's default.
 * The fields marked "embedded" are ignored through the daemon (it has its own model and state).
 * A builder for one thread; {@link LLMService#bind(BindOptions)} reads it once.
 */
public final class BindOptions {
  String target;
  String modelPath;
  String stateDir;
  int set;
  int threads;
  int contextLength;
  int chunkTokens;
  boolean recomputeOnModelChange;
  long kvBudgetBytes;
  float kvRatio;
  String adapters;

  /**
   * {@code "embedded"} (the engine in this process) or {@code "unix:PATH"} (the llmsvcd daemon on
   * the Unix socket PATH). Unset or empty: {@code $LLMSVC_TARGET}, else embedded.
   */
  public BindOptions target(String target) {
    this.target = target;
    return this;
  }

  /** Embedded: the GGUF model file. Unset: the default model in $LLMSVC_MODEL_DIR or ~/.cache/llmsvc/models. */
  public BindOptions modelPath(String modelPath) {
    this.modelPath = modelPath;
    return this;
  }

  /** Embedded: where persistent contexts live. Unset: $LLMSVC_STATE_DIR, else $XDG_STATE_HOME/llmsvc, else ~/.local/state/llmsvc. */
  public BindOptions stateDir(String stateDir) {
    this.stateDir = stateDir;
    return this;
  }

  /** Embedded: worker threads; 0 = all online CPUs. */
  public BindOptions threads(int threads) {
    this.threads = threads;
    set |= Native.BIND_THREADS;
    return this;
  }

  /** Embedded: tokens per context at most (0 = the model's trained length, capped at 4096). */
  public BindOptions contextLength(int tokens) {
    this.contextLength = tokens;
    set |= Native.BIND_N_CTX;
    return this;
  }

  /** Embedded: tokens per KV chunk (0 = 16). */
  public BindOptions chunkTokens(int tokens) {
    this.chunkTokens = tokens;
    set |= Native.BIND_CHUNK_TOKENS;
    return this;
  }

  /** Embedded: reopen a context made with another model file (same vocabulary) by recomputing its state. */
  public BindOptions recomputeOnModelChange(boolean recompute) {
    this.recomputeOnModelChange = recompute;
    set |= Native.BIND_RECOMPUTE;
    return this;
  }

  /** Embedded: bytes for every context's KV cache together (0: no limit). */
  public BindOptions kvBudgetBytes(long bytes) {
    if (bytes < 0) {
      // C takes a uint64_t: a negative long would become a budget of exabytes, not an error.
      throw (InvalidArgumentException) LLMException.of(Status.INVALID_ARGUMENT.code(), "negative KV budget " + bytes);
    }
    this.kvBudgetBytes = bytes;
    set |= Native.BIND_KV_BUDGET;
    return this;
  }

  /**
   * Embedded (ABI 1.6): offer a LoRA adapter (a GGUF in llama.cpp's format, made for the model)
   * under {@code name} (1..64 characters of [A-Za-z0-9._-]); repeatable. A bad or missing file
   * fails the bind, naming it. Through the daemon its configuration offers the adapters.
   */
  public BindOptions adapter(String name, String path) {
    if (name.contains("=") || name.contains(";") || path.contains(";")) {
      throw (InvalidArgumentException) LLMException.of(Status.INVALID_ARGUMENT.code(),
          "adapter " + name + ": a name with '=' or ';', or a path with ';'");
    }
    this.adapters = (adapters == null ? "" : adapters + ";") + name + "=" + path;
    return this;
  }

  /** Embedded: KV compression after each call, average bits over 8 (0: default 0.5; negative: none; at most 1). */
  public BindOptions kvRatio(float ratio) {
    this.kvRatio = ratio;
    set |= Native.BIND_KV_RATIO;
    return this;
  }
}
