// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/** {@link Status#NOT_FOUND}: no context with that id. */
public class NotFoundException extends LLMException {
  private static final long serialVersionUID = 1L;

  NotFoundException(int code, String detail) {
    super(code, detail);
  }
}
