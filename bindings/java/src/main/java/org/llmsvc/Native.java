// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/**
 * The native methods (libllmsvc_jni.so, src/main/c/) and the constants both sides share: javac -h
 * writes these constants into the generated header the C code includes, so the two cannot
 * disagree. Handles are the C pointers as longs; strings are standard UTF-8 byte arrays (see
 * {@link Utf8}). Every method that fails throws the {@link LLMException} for its status.
 *
 * <p>The library loads from the system property {@code llmsvc.jni.library} (an absolute path)
 * when set, else as {@code llmsvc_jni} from {@code java.library.path}.
 */
final class Native {
  private Native() {}

  static {
    String path = System.getProperty("llmsvc.jni.library");
    if (path != null && !path.isEmpty()) {
      System.load(path);
    } else {
      System.loadLibrary("llmsvc_jni");
    }
  }

  // Which optional fields of an options call are set; the others keep the library's _init() value.
  static final int BIND_THREADS = 1;
  static final int BIND_N_CTX = 1 << 1;
  static final int BIND_CHUNK_TOKENS = 1 << 2;
  static final int BIND_RECOMPUTE = 1 << 3;
  static final int BIND_KV_BUDGET = 1 << 4;
  static final int BIND_KV_RATIO = 1 << 5;

  static final int CALL_SEED = 1;
  static final int CALL_TEMPERATURE = 1 << 1;
  static final int CALL_TOP_K = 1 << 2;
  static final int CALL_TOP_P = 1 << 3;
  static final int CALL_MIN_P = 1 << 4;
  static final int CALL_REPEAT_PENALTY = 1 << 5;
  static final int CALL_REPEAT_LAST_N = 1 << 6;
  static final int CALL_MAX_TOKENS = 1 << 7;
  static final int CALL_SLO_TTFT = 1 << 8;
  static final int CALL_SLO_TPOT = 1 << 9;
  static final int CALL_LEVEL = 1 << 10;
  static final int CALL_KEEP = 1 << 11;

  // llmsvc_call_result, as an int[] and a double[].
  static final int RESULT_PROMPT_TOKENS = 0;
  static final int RESULT_GENERATED_TOKENS = 1;
  static final int RESULT_CONTEXT_TOKENS = 2;
  static final int RESULT_FINISH_REASON = 3;
  static final int RESULT_CHUNKS_LOADED = 4;
  static final int RESULT_CHUNKS_RECOMPUTED = 5;
  static final int RESULT_TOOL_CALLS = 6;
  static final int RESULT_TOOL_CALL_ERRORS = 7;
  static final int RESULT_LEVEL_PERCENT = 8;
  static final int RESULT_SLO_MISSED = 9;
  static final int RESULT_INTS = 10;
  static final int RESULT_SWITCH_IN_MS = 0;
  static final int RESULT_TTFT_MS = 1;
  static final int RESULT_PREFILL_MS = 2;
  static final int RESULT_DECODE_MS = 3;
  static final int RESULT_TPOT_MS = 4;
  static final int RESULT_CONSTRAIN_MS = 5;
  static final int RESULT_PROMPT_KEPT = 6;
  static final int RESULT_DOUBLES = 7;

  // llmsvc_context_info, as an int[] and a long[].
  static final int INFO_RAW = 0;
  static final int INFO_TOKENS = 1;
  static final int INFO_TURNS = 2;
  static final int INFO_CHUNKS_TOTAL = 3;
  static final int INFO_CHUNKS_RESIDENT = 4;
  static final int INFO_CHUNKS_SWAPPED = 5;
  static final int INFO_CHUNKS_DROPPED = 6;
  static final int INFO_CHUNKS_F16 = 7;
  static final int INFO_CHUNKS_Q8 = 8;
  static final int INFO_CHUNKS_Q4 = 9;
  static final int INFO_CHUNKS_Q3 = 10;
  static final int INFO_CHUNKS_Q2 = 11;
  static final int INFO_CHUNKS_SHARED = 12;
  static final int INFO_INTS = 13;
  static final int INFO_KV_RESIDENT_BYTES = 0;
  static final int INFO_LONGS = 1;

  // llmsvc_stats, as a long[].
  static final int STATS_OPEN_CONTEXTS = 0;
  static final int STATS_KNOWN_CONTEXTS = 1;
  static final int STATS_CALLS = 2;
  static final int STATS_PROMPT_TOKENS = 3;
  static final int STATS_GENERATED_TOKENS = 4;
  static final int STATS_KV_BYTES = 5;
  static final int STATS_WEIGHT_BYTES = 6;
  static final int STATS_KV_PEAK_BYTES = 7;
  static final int STATS_CHUNKS_LOADED = 8;
  static final int STATS_CHUNKS_RECOMPUTED = 9;
  static final int STATS_SWAP_OUT_BYTES = 10;
  static final int STATS_SWAP_OUT_FAILURES = 11;
  static final int STATS_LONGS = 12;

  // llmsvc_model_info, as an int[], a long[] and strings (weight types in arrays of their own).
  static final int MODEL_READY = 0;
  static final int MODEL_N_CTX_TRAIN = 1;
  static final int MODEL_N_CTX = 2;
  static final int MODEL_N_VOCAB = 3;
  static final int MODEL_N_LAYER = 4;
  static final int MODEL_HAS_CHAT_TEMPLATE = 5;
  static final int MODEL_BOS = 6;
  static final int MODEL_EOS = 7;
  static final int MODEL_EOT = 8;
  static final int MODEL_N_WEIGHT_TYPES = 9;
  static final int MODEL_INTS = 10;
  static final int MODEL_N_PARAMS = 0;
  static final int MODEL_WEIGHT_BYTES = 1;
  static final int MODEL_LONGS = 2;
  static final int MODEL_ARCHITECTURE = 0;
  static final int MODEL_NAME = 1;
  static final int MODEL_BOS_TEXT = 2;
  static final int MODEL_EOS_TEXT = 3;
  static final int MODEL_EOT_TEXT = 4;
  static final int MODEL_DEVICES = 5;
  static final int MODEL_STRINGS = 6;
  static final int MODEL_MAX_WEIGHT_TYPES = 8;  // LLMSVC_MAX_WEIGHT_TYPES

  static native int abiVersion();

  static native String statusName(int status);

  /** {@code adapters}: llmsvc_bind_options.adapters as a UTF-8 C string, or null. */
  static native long bind(byte[] target, byte[] modelPath, byte[] stateDir, int set, int nThreads, int nCtx,
      int chunkTokens, boolean recompute, long kvBudgetBytes, float kvRatio, byte[] adapters);

  static native void unbind(long service);

  static native long contextNew(long service, byte[] id, byte[] systemPrompt, boolean raw, byte[] toolsJson,
      byte[] adapter);

  /** llmsvc_adapter_list: the names, each UTF-8. */
  static native byte[][] adapterList(long service);

  static native long contextOpen(long service, byte[] id);

  static native byte[] contextId(long context);

  static native void contextClose(long context);

  static native void contextDelete(long service, byte[] id);

  static native void contextInfo(long service, byte[] id, int[] ints, long[] longs);

  static native byte[][] contextList(long service);

  static native void contextCancel(long context);

  /** llmsvc_context_fork: the fork's handle ({@code id} null: a fresh id). */
  static native long contextFork(long context, byte[] id);

  /**
   * ABI 1.3: a chat context's messages (llmsvc_context_append, _generate, _truncate, _messages),
   * structured output (llmsvc_call_options.json_schema / grammar) and counting messages.
   */
  static final int MESSAGES_ABI = (1 << 16) | 3;

  /** ABI 1.4: llmsvc_context_fork and llmsvc_context_info.chunks_shared. */
  static final int FORK_ABI = (1 << 16) | 4;

  /** ABI 1.5: llmsvc_call_options.level_percent and llmsvc_call_result.level_percent. */
  static final int LEVELS_ABI = (1 << 16) | 5;

  /** ABI 1.7: llmsvc_call_options.prompt_keep and llmsvc_call_result.prompt_kept. */
  static final int KEEP_ABI = (1 << 16) | 7;

  /** ABI 1.6: LoRA adapters (llmsvc_adapter_list, the adapter fields of the options). */
  static final int ADAPTERS_ABI = (1 << 16) | 6;

  /**
   * Runs one call ({@code prompt} null: llmsvc_context_generate, the reply to the conversation),
   * streaming each piece to {@code sink.piece(byte[], int)}, or with {@code tokenIds} to
   * {@code sink.tokens(byte[], int[], float[])}. Fills {@code ints} and
   * {@code doubles} on success and on cancel (before throwing {@link CancelledException}). If the
   * sink throws, the call is cancelled and that same throwable is rethrown. {@code jsonSchema} and
   * {@code grammar}: UTF-8 C strings, or null (none). {@code levelPercent}: read when {@code set}
   * has CALL_LEVEL, {@code promptKeep} when it has CALL_KEEP. {@code adapter}: a UTF-8 C string, or null (the context's).
   */
  static native void call(long context, byte[] prompt, int set, long seed, float temperature, int topK, float topP,
      float minP, float repeatPenalty, int repeatLastN, int maxTokens, float sloTtftRatio, float sloTpotRatio,
      int levelPercent, float promptKeep, byte[] adapter, byte[][] stop, byte[] jsonSchema, byte[] grammar, boolean tokenIds,
      boolean logprobs, PieceSink sink, int[] ints, double[] doubles);

  /** llmsvc_context_append: {@code roles[i]} and the UTF-8 {@code contents[i]} make message i (same lengths). */
  static native void contextAppend(long context, int[] roles, byte[][] contents, byte[][] toolCalls);

  /** llmsvc_context_truncate to the first {@code nMessages} (not negative). */
  static native void contextTruncate(long context, long nMessages);

  /**
   * llmsvc_context_messages from index {@code first} (not negative): {int[] roles, byte[][] UTF-8
   * contents, byte[][] UTF-8 tool calls (null entries for none)}, one entry each per message.
   */
  static native Object[] contextMessages(long context, long first);

  static native void stats(long service, long[] longs);

  /**
   * Fills {@code ints} and {@code longs} (MODEL_*), and per weight type its tensors and bytes; returns
   * the UTF-8 strings (MODEL_STRINGS of them, then the weight types' names).
   */
  static native byte[][] modelInfo(long service, int[] ints, long[] longs, int[] typeTensors, long[] typeBytes);

  /**
   * Every id {@code text} adds as a prompt (llmsvc_count_tokens with room for all); with {@code
   * roles} non-null (ABI 1.3, {@code text} null), every id append stores for the messages made of
   * {@code roles[i]} and {@code contents[i]} (as {@link #contextAppend}).
   */
  static native int[] countTokens(long service, byte[] text, int[] roles, byte[][] contents, boolean chat,
      boolean firstTurn, byte[] systemPrompt);
}
