// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/** ABI 1.2 from Java: model information, token counting, the token-id stream. */
class ModelInfoTest extends BoundService {
  @Test
  void describesTheModel() {
    ModelInfo m = svc.modelInfo();
    assertTrue(m.ready());
    assertFalse(m.architecture().isEmpty());
    assertTrue(m.parameters() > 1_000_000L, m.toString());
    assertEquals(m.trainedContextLength(), m.contextLength(), "no 4096 cap by default");
    assertTrue(m.vocabularySize() > 0 && m.layers() > 0);
    assertFalse(m.weightTypes().isEmpty());
    assertTrue(m.weightTypes().get(0).bytes() > 0 && m.weightTypes().get(0).bytes() <= m.weightBytes());
    assertTrue(m.hasChatTemplate());
    assertTrue(m.eosToken() >= 0 && !m.eosText().isEmpty());
    assertFalse(m.devices().isEmpty());
  }

  @Test
  void countsAsACallDoes() {
    LLMContext ctx = TestSupport.newContext(svc, "count");
    try {
      String prompt = "How many tokens is this?";
      CallResult r = ctx.call(prompt, TestSupport.greedy(0));
      assertEquals(r.promptTokens(), svc.tokenIds(prompt, true, true, null).length);
      int[] ids = svc.tokenIds("Hello world", false, false, null);
      assertEquals(ids.length, svc.countTokens("Hello world"));
      assertEquals(0, svc.countTokens(""));
      assertThrows(NullPointerException.class, () -> svc.countTokens(null));
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  @Test
  void tokenStreamHoldsEveryGeneratedToken() {
    LLMContext ctx = TestSupport.newContext(svc, "tokens");
    try {
      List<Integer> ids = new ArrayList<>();
      List<Float> lps = new ArrayList<>();
      StringBuilder text = new StringBuilder();
      CallResult r = ctx.callWithTokens("日本の首都はどこですか？", TestSupport.greedy(12).logprobs(true),
          (piece, tokens, logprobs) -> {
            text.append(piece);
            assertNotNull(logprobs);
            assertEquals(tokens.length, logprobs.length);
            for (int k = 0; k < tokens.length; k++) {
              ids.add(tokens[k]);
              lps.add(logprobs[k]);
            }
            return true;
          });
      assertEquals(r.generatedTokens(), ids.size());
      assertEquals(r.text(), text.toString());
      for (float lp : lps) assertTrue(lp <= 0.0f);
      int[] withoutLogprobs = new int[1];
      ctx.callWithTokens(" Again.", TestSupport.greedy(3), (piece, tokens, logprobs) -> {
        assertNull(logprobs);
        withoutLogprobs[0] += tokens.length;
        return true;
      });
      assertEquals(3, withoutLogprobs[0]);
      assertArrayEquals(new int[0], svc.tokenIds("", false, false, null));
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }
}
