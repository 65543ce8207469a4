// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/**
 * The service's figures ({@code llmsvc_stats}). Through llmsvcd, {@link #kvPeakBytes()} and the
 * swap-out figures are the daemon's as a whole; the others are this app's.
 */
public final class ServiceStats {
  private final long[] longs;

  ServiceStats(long[] longs) {
    this.longs = longs.clone();
  }

  /** Context handles open on this service. */
  public int openContexts() {
    return (int) longs[Native.STATS_OPEN_CONTEXTS];
  }

  /** Contexts the service holds (open or not). */
  public int knownContexts() {
    return (int) longs[Native.STATS_KNOWN_CONTEXTS];
  }

  /** Calls completed (any status). */
  public long calls() {
    return longs[Native.STATS_CALLS];
  }

  public long promptTokens() {
    return longs[Native.STATS_PROMPT_TOKENS];
  }

  public long generatedTokens() {
    return longs[Native.STATS_GENERATED_TOKENS];
  }

  /** Bytes of resident KV cache. */
  public long kvBytes() {
    return longs[Native.STATS_KV_BYTES];
  }

  public long weightBytes() {
    return longs[Native.STATS_WEIGHT_BYTES];
  }

  public long kvPeakBytes() {
    return longs[Native.STATS_KV_PEAK_BYTES];
  }

  public long chunksLoaded() {
    return longs[Native.STATS_CHUNKS_LOADED];
  }

  public long chunksRecomputed() {
    return longs[Native.STATS_CHUNKS_RECOMPUTED];
  }

  public long swapOutBytes() {
    return longs[Native.STATS_SWAP_OUT_BYTES];
  }

  public long swapOutFailures() {
    return longs[Native.STATS_SWAP_OUT_FAILURES];
  }

  @Override
  public String toString() {
    return "ServiceStats{open=" + openContexts() + ", known=" + knownContexts() + ", calls=" + calls()
        + ", promptTokens=" + promptTokens() + ", generatedTokens=" + generatedTokens() + "}";
  }
}
