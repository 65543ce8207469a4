// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/** {@link Status#EXISTS}: a context with that id already exists. */
public class AlreadyExistsException extends LLMException {
  private static final long serialVersionUID = 1L;

  AlreadyExistsException(int code, String detail) {
    super(code, detail);
  }
}
