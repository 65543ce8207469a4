// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/**
 * What the native call streams into: decodes each piece's UTF-8, keeps the reply's text for the
 * {@link CallResult}, and hands the piece to the caller's listener, if any.
 */
final class PieceSink {
  private final PieceListener listener;
  private final TokenListener tokenListener;
  private final StringBuilder text = new StringBuilder();

  PieceSink(PieceListener listener) {
    this.listener = listener;
    this.tokenListener = null;
  }

  PieceSink(TokenListener tokenListener) {
    this.listener = null;
    this.tokenListener = tokenListener;
  }

  boolean wantsTokens() {
    return tokenListener != null;
  }

  /** Called from native code once per piece with its token ids; {@code false} cancels the call. */
  boolean tokens(byte[] utf8, int[] ids, float[] logprobs) {
    String piece = Utf8.decode(utf8);
    text.append(piece);
    return tokenListener.onTokens(piece, ids, logprobs);
  }

  /** Called from native code once per piece; {@code false} cancels the call. */
  boolean piece(byte[] utf8, int token) {
    String piece = Utf8.decode(utf8);
    text.append(piece);
    return listener == null || listener.onPiece(piece, token);
  }

  String text() {
    return text.toString();
  }
}
