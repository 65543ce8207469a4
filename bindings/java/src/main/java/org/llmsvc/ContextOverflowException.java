// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/** {@link Status#CONTEXT_OVERFLOW}: the prompt (with the context's history) is longer than a context holds. */
public class ContextOverflowException extends LLMException {
  private static final long serialVersionUID = 1L;

  ContextOverflowException(int code, String detail) {
    super(code, detail);
  }
}
