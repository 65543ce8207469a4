// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import java.util.Objects;

/**
 * One message of a chat context's conversation ({@code llmsvc_message}): a role and its text.
 * Immutable; equal when role and content are.
 *
 * <pre>{@code
 * ctx.append(Message.user("Remember the number 7."), Message.assistant("I will."), Message.user("Which number?"));
 * }</pre>
 */
public final class Message {
  private final Role role;
  private final String content;

  /** A message; neither may be null. */
  public Message(Role role, String content) {
    this.role = Objects.requireNonNull(role, "role");
    this.content = Objects.requireNonNull(content, "content");
  }

  public static Message of(Role role, String content) {
    return new Message(role, content);
  }

  public static Message user(String content) {
    return new Message(Role.USER, content);
  }

  public static Message assistant(String content) {
    return new Message(Role.ASSISTANT, content);
  }

  public Role role() {
    return role;
  }

  public String content() {
    return content;
  }

  @Override
  public boolean equals(Object o) {
    if (this == o) return true;
    if (!(o instanceof Message)) return false;
    Message m = (Message) o;
    return role == m.role && content.equals(m.content);
  }

  @Override
  public int hashCode() {
    return 31 * role.hashCode() + content.hashCode();
  }

  @Override
  public String toString() {
    return "Message{role=" + role + ", content='" + content + "'}";
  }
}
