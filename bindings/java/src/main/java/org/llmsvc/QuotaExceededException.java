// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/** {@link Status#QUOTA_EXCEEDED}: one of the app's quotas in the daemon would be exceeded. */
public class QuotaExceededException extends LLMException {
  private static final long serialVersionUID = 1L;

  QuotaExceededException(int code, String detail) {
    super(code, detail);
  }
}
