// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/** What a call produced: the reply's text and the library's figures ({@code llmsvc_call_result}). */
public final class CallResult {
  private final String text;
  private final int[] ints;
  private final double[] doubles;

  CallResult(String text, int[] ints, double[] doubles) {
    this.text = text;
    this.ints = ints.clone();
    this.doubles = doubles.clone();
  }

  /** The reply: every streamed piece, in order (stop strings are never part of it). */
  public String text() {
    return text;
  }

  /** Tokens the prompt (with the chat template) added to the context. */
  public int promptTokens() {
    return ints[Native.RESULT_PROMPT_TOKENS];
  }

  public int generatedTokens() {
    return ints[Native.RESULT_GENERATED_TOKENS];
  }

  /** Tokens in the context after the call. */
  public int contextTokens() {
    return ints[Native.RESULT_CONTEXT_TOKENS];
  }

  public FinishReason finishReason() {
    return FinishReason.of(ints[Native.RESULT_FINISH_REASON]);
  }

  /** KV chunks loaded from storage to make the context ready. */
  public int chunksLoaded() {
    return ints[Native.RESULT_CHUNKS_LOADED];
  }

  /** KV chunks recomputed from their tokens to make the context ready. */
  public int chunksRecomputed() {
    return ints[Native.RESULT_CHUNKS_RECOMPUTED];
  }

  /** Time to make the context's state ready. */
  public double switchInMs() {
    return doubles[Native.RESULT_SWITCH_IN_MS];
  }

  /** Time to first token (switch-in and prefill included). */
  public double ttftMs() {
    return doubles[Native.RESULT_TTFT_MS];
  }

  public double prefillMs() {
    return doubles[Native.RESULT_PREFILL_MS];
  }

  /** Generation after the first token. */
  public double decodeMs() {
    return doubles[Native.RESULT_DECODE_MS];
  }

  /** Mean time per output token after the first. */
  public double tpotMs() {
    return doubles[Native.RESULT_TPOT_MS];
  }

  /**
   * Structured output's own time ({@link CallOptions#jsonSchema(String)}, {@link
   * CallOptions#grammar(String)}): the allowed tokens and the matcher's steps; 0 without one.
   */
  public double constrainMs() {
    return doubles[Native.RESULT_CONSTRAIN_MS];
  }

  /**
   * A context with tools ({@link ContextOptions#toolsJson(String)}): the tool calls parsed from
   * the reply (read them with {@link LLMContext#messages()}: the reply's {@link
   * Message#toolCalls()}); 0 otherwise.
   */
  public int toolCalls() {
    return ints[Native.RESULT_TOOL_CALLS];
  }

  /** 1 when the reply started a tool call that did not parse (the reply stays text). */
  public int toolCallErrors() {
    return ints[Native.RESULT_TOOL_CALL_ERRORS];
  }

  /**
   * The elastic level the call ran at, in per cent ({@link CallOptions#levelPercent(int)}): 100,
   * the full model, unless a smaller level was asked for or chosen for the call's SLO; 0 from a library before ABI 1.5 or
   * through a daemon before protocol 7.
   */
  public int levelPercent() {
    return ints[Native.RESULT_LEVEL_PERCENT];
  }

  /**
   * Whether the call's SLO ratios ({@link CallOptions}) asked more than any elastic level is
   * predicted to give: the smallest level ran. False before ABI 1.5 / protocol 7.
   */
  public boolean sloMissed() {
    return ints[Native.RESULT_SLO_MISSED] != 0;
  }

  /**
   * The share of the prompt's tokens the call kept after prompt compression ({@link
   * CallOptions#promptKeep(float)}): 1 when none was dropped; 0 before ABI 1.7 / protocol 9.
   */
  public double promptKept() {
    return doubles[Native.RESULT_PROMPT_KEPT];
  }

  @Override
  public String toString() {
    return "CallResult{finish=" + finishReason() + ", prompt=" + promptTokens() + ", generated=" + generatedTokens()
        + ", context=" + contextTokens() + ", ttftMs=" + ttftMs() + ", level=" + levelPercent() + ", sloMissed="
        + sloMissed() + ", text=" + text + "}";
  }
}
