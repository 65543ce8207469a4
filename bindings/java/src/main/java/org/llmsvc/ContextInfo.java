// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/** A context as {@code llmsvc_context_info_get} describes it (open or not). */
public final class ContextInfo {
  private final String id;
  private final int[] ints;
  private final long[] longs;

  ContextInfo(String id, int[] ints, long[] longs) {
    this.id = id;
    this.ints = ints.clone();
    this.longs = longs.clone();
  }

  public String id() {
    return id;
  }

  /** Whether prompts go in without the chat template. */
  public boolean raw() {
    return ints[Native.INFO_RAW] != 0;
  }

  /** Tokens the context holds. */
  public int tokens() {
    return ints[Native.INFO_TOKENS];
  }

  /** Completed user turns. */
  public int turns() {
    return ints[Native.INFO_TURNS];
  }

  /** KV chunks: resident + swapped + dropped. */
  public int chunksTotal() {
    return ints[Native.INFO_CHUNKS_TOTAL];
  }

  public int chunksResident() {
    return ints[Native.INFO_CHUNKS_RESIDENT];
  }

  /** Chunks only on storage. */
  public int chunksSwapped() {
    return ints[Native.INFO_CHUNKS_SWAPPED];
  }

  /** Chunks to recompute from the tokens when needed. */
  public int chunksDropped() {
    return ints[Native.INFO_CHUNKS_DROPPED];
  }

  /** Resident chunks by format (they add up to {@link #chunksResident()}). */
  public int chunksF16() {
    return ints[Native.INFO_CHUNKS_F16];
  }

  public int chunksQ8() {
    return ints[Native.INFO_CHUNKS_Q8];
  }

  public int chunksQ4() {
    return ints[Native.INFO_CHUNKS_Q4];
  }

  public int chunksQ3() {
    return ints[Native.INFO_CHUNKS_Q3];
  }

  public int chunksQ2() {
    return ints[Native.INFO_CHUNKS_Q2];
  }

  /**
   * Resident chunks this context shares with a fork or its parent ({@link LLMContext#fork()}):
   * their memory counts once in {@link ServiceStats}, but in each holder's {@link
   * #kvResidentBytes()}. 0 from a library before ABI 1.4.
   */
  public int chunksShared() {
    return ints[Native.INFO_CHUNKS_SHARED];
  }

  public long kvResidentBytes() {
    return longs[Native.INFO_KV_RESIDENT_BYTES];
  }

  @Override
  public String toString() {
    return "ContextInfo{id=" + id + ", raw=" + raw() + ", tokens=" + tokens() + ", turns=" + turns() + ", chunks="
        + chunksTotal() + "}";
  }
}
