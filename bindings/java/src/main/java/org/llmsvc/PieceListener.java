// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/**
 * Receives a streamed reply, one piece at a time, on the thread that called. A piece is whole
 * characters (never half of a code point or of a surrogate pair).
 *
 * <p>Return {@code true} to go on, {@code false} to cancel the call: it then ends with
 * {@link CancelledException} (even if the reply was complete), whose partial result holds what
 * was streamed. An exception thrown here cancels the call too, and is rethrown by the call
 * unchanged. After either, the listener is not called again for that call.
 */
@FunctionalInterface
public interface PieceListener {
  /**
   * @param piece the next piece of the reply
   * @param token the id of the last token this piece completes
   * @return {@code true} to continue, {@code false} to cancel
   */
  boolean onPiece(String piece, int token);
}
