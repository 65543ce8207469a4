// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/**
 * Receives a streamed reply with the ids of its tokens ({@code llmsvc_call_options.on_tokens}),
 * one piece at a time, on the thread that called. Over a call the pieces' ids are every token
 * generated; the last piece may have no text (the end of turn, a stop string's tokens).
 *
 * <p>Return {@code true} to go on, {@code false} to cancel, as {@link PieceListener}.
 */
@FunctionalInterface
public interface TokenListener {
  /**
   * @param piece the next piece of the reply (may be empty in the last one)
   * @param tokens the ids of the tokens sampled since the previous piece, in order
   * @param logprobs null unless {@link CallOptions#logprobs(boolean)}: each token's natural-log
   *     probability under the model's distribution, {@code <= 0}
   * @return {@code true} to continue, {@code false} to cancel
   */
  boolean onTokens(String piece, int[] tokens, float[] logprobs);
}
