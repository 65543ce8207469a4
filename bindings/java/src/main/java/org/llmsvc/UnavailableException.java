// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/** {@link Status#UNAVAILABLE}: the service cannot be reached (no daemon, or the connection was lost). */
public class UnavailableException extends LLMException {
  private static final long serialVersionUID = 1L;

  UnavailableException(int code, String detail) {
    super(code, detail);
  }
}
