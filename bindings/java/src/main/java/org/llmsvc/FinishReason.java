// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/** Why generation stopped ({@code llmsvc_finish_reason}). */
public enum FinishReason {
  NONE,
  /** The model ended its turn. */
  EOS,
  /** {@link CallOptions#maxTokens(int)} reached. */
  LENGTH,
  /** A stop string matched. */
  STOP,
  CANCELLED,
  /** The context is full. */
  CONTEXT_FULL;

  /** The reason with C value {@code code}; {@link #NONE} for a value this binding does not know. */
  static FinishReason of(int code) {
    FinishReason[] all = values();
    return code >= 0 && code < all.length ? all[code] : NONE;
  }
}
