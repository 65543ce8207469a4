// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/**
 * {@link Status#CANCELLED}: the call was cancelled, by its listener returning {@code false} or by
 * {@link LLMContext#cancel()}. What was generated until then stays in the context, and
 * {@link #partialResult()} reports it (the one failure for which the library fills a result).
 */
public class CancelledException extends LLMException {
  private static final long serialVersionUID = 1L;

  private transient CallResult partial;

  CancelledException(int code, String detail) {
    super(code, detail);
  }

  /**
   * The cancelled call's result: the text streamed until the cancel and the library's token
   * counts. Through the daemon the context may hold a few tokens more than that text (generated
   * before the cancel reached it, counted in {@link CallResult#generatedTokens()}).
   */
  public CallResult partialResult() {
    return partial;
  }

  void setPartialResult(CallResult result) {
    partial = result;
  }
}
