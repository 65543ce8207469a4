// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * What the tests share: the target they run against (system property llmsvc.test.target, set by
 * scripts/run_junit.sh: "embedded" or "unix:PATH"), ids no other run uses, and short greedy calls
 * (a few tokens each, so the suite runs in seconds on two cores).
 */
final class TestSupport {
  private TestSupport() {}

  static final String TARGET = System.getProperty("llmsvc.test.target", "embedded");
  private static final AtomicInteger NEXT = new AtomicInteger();

  static boolean embedded() {
    return TARGET.equals("embedded");
  }

  /** Two threads: the machines the suite runs on have two cores (ignored through the daemon). */
  static BindOptions options() {
    return new BindOptions().target(TARGET).threads(2);
  }

  static LLMService bind() {
    return LLMService.bind(options());
  }

  /** An id of [A-Za-z0-9._-] unique to this JVM and call. */
  static String uniqueId(String prefix) {
    return "java-" + prefix + "-" + ProcessHandle.current().pid() + "-" + NEXT.incrementAndGet();
  }

  static LLMContext newContext(LLMService svc, String prefix) {
    return svc.newLLMCtx(new ContextOptions().id(uniqueId(prefix)));
  }

  static LLMContext newRawContext(LLMService svc, String prefix) {
    return svc.newLLMCtx(new ContextOptions().id(uniqueId(prefix)).raw(true));
  }

  static CallOptions greedy(int maxTokens) {
    return new CallOptions().temperature(0).maxTokens(maxTokens);
  }

  /** Closes and deletes a test's context, whatever state the test left it in. */
  static void dispose(LLMService svc, LLMContext ctx) {
    if (ctx == null) return;
    ctx.close();
    try {
      svc.delLLMCtx(ctx.id());
    } catch (NotFoundException alreadyGone) {
      // the test deleted it itself
    }
  }
}
