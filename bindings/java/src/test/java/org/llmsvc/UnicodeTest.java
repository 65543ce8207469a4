// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/**
 * Text crosses JNI as standard UTF-8. The library refuses modified UTF-8 (NUL as C0 80, a
 * character outside the BMP as two encoded surrogates) with INVALID_UTF8, so every accepted call
 * below is evidence of the encoding on the way in; the emoji replies check the way back.
 */
class UnicodeTest extends BoundService {
  private static final String GRIN = new String(Character.toChars(0x1F600)); // 😀, outside the BMP
  /**
   * The default model continues a run of emoji with the same emoji: the reply comes back as
   * U+1F600 (a surrogate pair in Java), never split across pieces, never U+FFFD.
   */
  @Test
  void emojiRoundTrip() {
    LLMContext ctx = TestSupport.newRawContext(svc, "emoji");
    try {
      List<String> pieces = new ArrayList<>();
      CallResult r = ctx.call(GRIN.repeat(6), TestSupport.greedy(4), (piece, token) -> {
        pieces.add(piece);
        return true;
      });
      assertEquals(0x1F600, r.text().codePointAt(0), "reply: " + r.text());
      assertEquals(-1, r.text().indexOf('\uFFFD'), "no replacement character");
      for (String p : pieces) {
        assertFalse(p.isEmpty() || Character.isLowSurrogate(p.charAt(0)) || Character.isHighSurrogate(p.charAt(p.length() - 1)),
            "a piece split a surrogate pair: " + p);
      }
      assertEquals(String.join("", pieces), r.text());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** A stop string outside the BMP matches the model's bytes exactly: the reply ends before it. */
  @Test
  void emojiStopString() {
    LLMContext ctx = TestSupport.newRawContext(svc, "emoji-stop");
    try {
      CallResult r = ctx.call(GRIN.repeat(6), TestSupport.greedy(4).stop(GRIN));
      assertEquals(FinishReason.STOP, r.finishReason(), r.toString());
      assertEquals("", r.text());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** NUL, supplementary characters and combining marks in a prompt and a system prompt: all accepted. */
  @Test
  void unicodePromptsAreAccepted() {
    LLMContext ctx = svc.newLLMCtx(new ContextOptions().id(TestSupport.uniqueId("unicode"))
        .systemPrompt("Réponds brièvement \uD83C\uDDEB\uD83C\uDDF7 𝄞"));
    try {
      CallResult nul = ctx.call("a\u0000b", TestSupport.greedy(0));
      assertTrue(nul.promptTokens() > 0, "a NUL is a character like any other");
      CallResult mixed = ctx.call("Ça va ? " + GRIN + " 𝄞 e\u0301 中文 العربية", TestSupport.greedy(4));
      assertTrue(mixed.promptTokens() > 0 && !mixed.text().isEmpty(), mixed.toString());
    } finally {
      TestSupport.dispose(svc, ctx);
    }
  }

  /** The emoji is four UTF-8 bytes, one token or more: the prompt's token count says it arrived whole. */
  @Test
  void supplementaryCharacterArrivesWhole() {
    LLMContext a = TestSupport.newRawContext(svc, "one-grin");
    LLMContext b = TestSupport.newRawContext(svc, "two-grins");
    try {
      int one = a.call(GRIN, TestSupport.greedy(0)).promptTokens();
      int two = b.call(GRIN + GRIN, TestSupport.greedy(0)).promptTokens();
      assertTrue(one >= 1 && two > one, one + " then " + two);
    } finally {
      TestSupport.dispose(svc, a);
      TestSupport.dispose(svc, b);
    }
  }
}
