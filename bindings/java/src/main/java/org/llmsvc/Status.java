// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/**
 * The library's status codes ({@code llmsvc_status} in {@code llmsvc.h}). Their values are part
 * of the C ABI and never change meaning; a code newer than this binding reads as {@link #UNKNOWN}.
 */
public enum Status {
  OK(0),
  INVALID_ARGUMENT(1),
  INVALID_UTF8(2),
  MODEL_NOT_FOUND(3),
  MODEL_INVALID(4),
  UNSUPPORTED(5),
  OUT_OF_MEMORY(6),
  CONTEXT_OVERFLOW(7),
  NOT_FOUND(8),
  EXISTS(9),
  CANCELLED(10),
  BUSY(11),
  IO(12),
  UNAVAILABLE(13),
  QUOTA_EXCEEDED(14),
  INTERNAL(15),
  MODEL_MISMATCH(16),
  /** A code this binding does not know (a newer library). */
  UNKNOWN(-1);

  private final int code;

  Status(int code) {
    this.code = code;
  }

  /** The C value of this status. */
  public int code() {
    return code;
  }

  /** The status with C value {@code code}; {@link #UNKNOWN} for a value this binding does not know. */
  public static Status of(int code) {
    for (Status s : values()) {
      if (s.code == code) return s;
    }
    return UNKNOWN;
  }
}
