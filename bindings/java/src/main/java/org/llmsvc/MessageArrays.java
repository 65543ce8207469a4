// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import java.util.List;
import java.util.Objects;

/**
 * A message list as the native methods take it ({@link Native#contextAppend}, {@link
 * Native#countTokens}): each message's role code and its content's standard UTF-8, same index.
 */
final class MessageArrays {
  final int[] roles;
  final byte[][] contents;
  final byte[][] toolCalls;  // null entries for none

  private MessageArrays(int[] roles, byte[][] contents, byte[][] toolCalls) {
    this.roles = roles;
    this.contents = contents;
    this.toolCalls = toolCalls;
  }

  /**
   * The arrays of {@code messages}: a null list or message is {@link NullPointerException}, a
   * {@link Role#UNKNOWN} role {@link InvalidArgumentException}, a lone surrogate {@link
   * InvalidUtf8Exception}, each naming the message.
   */
  static MessageArrays of(List<Message> messages) {
    Objects.requireNonNull(messages, "messages");
    int n = messages.size();
    int[] roles = new int[n];
    byte[][] contents = new byte[n][];
    byte[][] toolCalls = new byte[n][];
    int i = 0;
    for (Message m : messages) {
      Objects.requireNonNull(m, "messages[" + i + "]");
      if (m.role() == Role.UNKNOWN) {
        throw (InvalidArgumentException) LLMException.of(Status.INVALID_ARGUMENT.code(),
            "messages[" + i + "].role is not an llmsvc_role");
      }
      roles[i] = m.role().code();
      contents[i] = Utf8.encode(m.content(), "messages[" + i + "].content");
      if (m.toolCalls() != null) toolCalls[i] = Utf8.encode(m.toolCalls(), "messages[" + i + "].toolCalls");
      i++;
    }
    return new MessageArrays(roles, contents, toolCalls);
  }
}
