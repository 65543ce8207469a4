// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** A test class's one service, bound before its tests (to llmsvc.test.target) and closed after. */
abstract class BoundService {
  static LLMService svc;

  @BeforeAll
  static void bind() {
    svc = TestSupport.bind();
  }

  @AfterAll
  static void unbind() {
    svc.close();
  }
}
