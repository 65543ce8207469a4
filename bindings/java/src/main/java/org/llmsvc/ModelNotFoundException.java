// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/** {@link Status#MODEL_NOT_FOUND}: the model file does not exist or cannot be opened. */
public class ModelNotFoundException extends LLMException {
  private static final long serialVersionUID = 1L;

  ModelNotFoundException(int code, String detail) {
    super(code, detail);
  }
}
