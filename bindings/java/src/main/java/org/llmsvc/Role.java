// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/**
 * A message's role ({@code llmsvc_role}). Values are part of the C ABI; a role newer than this
 * binding reads as {@link #UNKNOWN}.
 */
public enum Role {
  /** Not appended: a context's system prompt is its option ({@link ContextOptions#systemPrompt(String)}). */
  SYSTEM(0),
  USER(1),
  ASSISTANT(2),
  /** Reserved for tool results: appending one is {@link Status#UNSUPPORTED} for now. */
  TOOL(3),
  /** A role this binding does not know (a newer library); never appended. */
  UNKNOWN(-1);

  private final int code;

  Role(int code) {
    this.code = code;
  }

  /** The C value of this role. */
  public int code() {
    return code;
  }

  /** The role with C value {@code code}; {@link #UNKNOWN} for a value this binding does not know. */
  public static Role of(int code) {
    for (Role r : values()) {
      if (r.code == code) return r;
    }
    return UNKNOWN;
  }
}
