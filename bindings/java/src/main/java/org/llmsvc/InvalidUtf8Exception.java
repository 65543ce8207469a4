// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/** {@link Status#INVALID_UTF8}: a string is not valid Unicode (from Java: a lone surrogate). */
public class InvalidUtf8Exception extends InvalidArgumentException {
  private static final long serialVersionUID = 1L;

  InvalidUtf8Exception(int code, String detail) {
    super(code, detail);
  }
}
