// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Sampling and limits of one call ({@code llmsvc_call_options}). A field left unset keeps the
 * library's default: greedy (temperature 0), at most 256 tokens, no stop strings. The library
 * validates the values ({@link InvalidArgumentException}). A builder for one thread; a call reads
 * it once, so one instance may serve many calls.
 */
public final class CallOptions {
  int set;
  long seed;
  float temperature;
  int topK;
  float topP;
  float minP;
  float repeatPenalty;
  int repeatLastN;
  int maxTokens;
  float sloTtftRatio;
  float sloTpotRatio;
  int levelPercent;
  float promptKeep;
  String adapter;
  boolean logprobs;
  String jsonSchema;
  String grammar;
  final List<String> stop = new ArrayList<>();

  /** Sampling seed: same seed and same state, same tokens. */
  public CallOptions seed(long seed) {
    this.seed = seed;
    set |= Native.CALL_SEED;
    return this;
  }

  /** {@code <= 0}: greedy. */
  public CallOptions temperature(float temperature) {
    this.temperature = temperature;
    set |= Native.CALL_TEMPERATURE;
    return this;
  }

  /** 0: off. */
  public CallOptions topK(int topK) {
    this.topK = topK;
    set |= Native.CALL_TOP_K;
    return this;
  }

  /** In [0, 1]; 1: off. */
  public CallOptions topP(float topP) {
    this.topP = topP;
    set |= Native.CALL_TOP_P;
    return this;
  }

  /** In [0, 1]; 0: off. */
  public CallOptions minP(float minP) {
    this.minP = minP;
    set |= Native.CALL_MIN_P;
    return this;
  }

  /** {@code > 0}; 1: off. */
  public CallOptions repeatPenalty(float penalty) {
    this.repeatPenalty = penalty;
    set |= Native.CALL_REPEAT_PENALTY;
    return this;
  }

  /** Tokens looked back for the penalty (0: off; -1: the whole context). */
  public CallOptions repeatLastN(int n) {
    this.repeatLastN = n;
    set |= Native.CALL_REPEAT_LAST_N;
    return this;
  }

  /** Generated tokens at most (0 = prefill only). */
  public CallOptions maxTokens(int maxTokens) {
    this.maxTokens = maxTokens;
    set |= Native.CALL_MAX_TOKENS;
    return this;
  }

  /** Stop strings (1..256 UTF-8 bytes each, at most 16); a match ends the reply and is not part of it. */
  public CallOptions stop(String... stop) {
    this.stop.addAll(Arrays.asList(stop));
    return this;
  }

  /** Requested ratio of time-to-first-token to the full model's (0 = none). */
  public CallOptions sloTtftRatio(float ratio) {
    this.sloTtftRatio = ratio;
    set |= Native.CALL_SLO_TTFT;
    return this;
  }

  /** Requested ratio of time-per-token to the full model's (0 = none). */
  public CallOptions sloTpotRatio(float ratio) {
    this.sloTpotRatio = ratio;
    set |= Native.CALL_SLO_TPOT;
    return this;
  }

  /**
   * The elastic level to run the call at, in per cent (ABI 1.5): one of an elastic model's levels
   * (made by {@code llmsvc elastify}, e.g. 20, 30, ..., 100), 100 the full model; 0, the default:
   * the service chooses. A plain model has one level, 100. Another value is {@link
   * InvalidArgumentException}, its detail naming the model's levels; {@link
   * CallResult#levelPercent()} says which level ran. With a {@code libllmsvc} older than ABI 1.5
   * (or through a daemon older than protocol 7) a level other than 0 is {@link
   * Status#UNSUPPORTED}.
   */
  public CallOptions levelPercent(int percent) {
    this.levelPercent = percent;
    set |= Native.CALL_LEVEL;
    return this;
  }

  /**
   * Prompt compression (ABI 1.7): the share of the prompt's tokens to keep, in (0, 1]; the service
   * drops the prompt's least informative words (its chat template, last sentence, numbers and
   * line breaks stay), and the kept text is what the context holds. 0, the default: the service
   * chooses (by the SLO's TTFT ratio, when it chooses the level too). Outside [0, 1] is {@link
   * InvalidArgumentException}; {@link CallResult#promptKept()} says how much was kept. With a
   * {@code libllmsvc} older than ABI 1.7 (or through a daemon older than protocol 9) a share
   * other than 0 is {@link Status#UNSUPPORTED}.
   */
  public CallOptions promptKeep(float share) {
    this.promptKeep = share;
    set |= Native.CALL_KEEP;
    return this;
  }

  /**
   * The LoRA adapter to run this call with, in place of its context's (ABI 1.6): a name the
   * service offers ({@link LLMService#adapters()}); unset: the context's own. One not offered is
   * {@link InvalidArgumentException}, naming those that are.
   */
  public CallOptions adapter(String name) {
    this.adapter = name;
    return this;
  }

  /** With a {@link TokenListener}: each token's log-probability too. */
  public CallOptions logprobs(boolean logprobs) {
    this.logprobs = logprobs;
    return this;
  }

  /**
   * Structured output (ABI 1.3): the reply follows this JSON Schema (as JSON text, at most 64 KiB
   * of UTF-8); null: none. Every generated token is one the schema allows, and the reply ends
   * ({@link FinishReason#EOS}) only once it is complete. Stop strings are not applied. At most one
   * of this and {@link #grammar(String)}. A schema that is not JSON or cannot be compiled is
   * {@link InvalidArgumentException} (the detail names the place), a feature not implemented
   * {@link Status#UNSUPPORTED}; see {@code llmsvc_call_options.json_schema} for what is supported.
   */
  public CallOptions jsonSchema(String jsonSchema) {
    this.jsonSchema = jsonSchema;
    return this;
  }

  /**
   * Structured output (ABI 1.3): the reply follows this grammar in llama.cpp's GBNF (at most 64
   * KiB of UTF-8), e.g. {@code root ::= ("yes" | "no")}; null: none. As {@link #jsonSchema(String)}
   * otherwise, and at most one of the two.
   */
  public CallOptions grammar(String grammar) {
    this.grammar = grammar;
    return this;
  }

  /** Whether a schema or grammar is set (the library needs ABI 1.3 for them). */
  boolean constrained() {
    return jsonSchema != null || grammar != null;
  }

  byte[][] stopBytes() {
    byte[][] out = new byte[stop.size()][];
    for (int i = 0; i < out.length; i++) {
      String s = stop.get(i);
      if (s == null) {
        throw (InvalidArgumentException) LLMException.of(Status.INVALID_ARGUMENT.code(), "stop string " + i + " is null");
      }
      out[i] = Utf8.cString(s, "stop string " + i);
    }
    return out;
  }
}
