// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import java.nio.charset.StandardCharsets;

/**
 * Strings to and from the library's UTF-8. JNI's own string functions speak "modified UTF-8"
 * (NUL as two bytes, characters outside the BMP as two 3-byte surrogates), which the library
 * rightly refuses; so every string crosses the boundary as a byte[] of standard UTF-8 made here.
 */
final class Utf8 {
  private Utf8() {}

  /**
   * Standard UTF-8 of {@code s}. A lone surrogate has no UTF-8 form: refused with
   * {@link InvalidUtf8Exception} rather than silently replaced by '?' as String.getBytes does.
   */
  static byte[] encode(String s, String what) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(c)) {
        throw (InvalidUtf8Exception) LLMException.of(Status.INVALID_UTF8.code(),
            what + " holds a lone surrogate U+" + Integer.toHexString(c).toUpperCase() + " at index " + i);
      }
    }
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /**
   * UTF-8 for a C string argument (NUL-terminated on the C side): {@code null} stays null (the
   * library's default), and a NUL character, which would silently cut the string short, is refused.
   */
  static byte[] cString(String s, String what) {
    if (s == null) return null;
    int nul = s.indexOf('\0');
    if (nul >= 0) {
      throw (InvalidArgumentException) LLMException.of(Status.INVALID_ARGUMENT.code(),
          what + " holds a NUL character at index " + nul);
    }
    return encode(s, what);
  }

  /** Text from the library's UTF-8 (always valid; a malformed byte would read as U+FFFD). */
  static String decode(byte[] utf8) {
    return utf8 == null ? "" : new String(utf8, StandardCharsets.UTF_8);
  }
}
