// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/** {@link Status#INVALID_ARGUMENT}: a bad handle, id, option value or struct (see the detail). */
public class InvalidArgumentException extends LLMException {
  private static final long serialVersionUID = 1L;

  InvalidArgumentException(int code, String detail) {
    super(code, detail);
  }
}
