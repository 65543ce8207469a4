// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/** {@link Status#BUSY}: the context is inside another call, or open elsewhere (delete). */
public class BusyException extends LLMException {
  private static final long serialVersionUID = 1L;

  BusyException(int code, String detail) {
    super(code, detail);
  }
}
