// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import java.util.Objects;

/**
 * One message of a chat context's conversation ({@code llmsvc_message}): a role and its text.
 * Immutable; equal when role, content and tool calls are.
 *
 * <pre>{@code
 * ctx.append(Message.user("Remember the number 7."), Message.assistant("I will."), Message.user("Which number?"));
 * }</pre>
 */
public final class Message {
  private final Role role;
  private final String content;
  private final String toolCalls;

  /** A message; neither may be null. */
  public Message(Role role, String content) {
    this(role, content, null);
  }

  Message(Role role, String content, String toolCalls) {
    this.role = Objects.requireNonNull(role, "role");
    this.content = Objects.requireNonNull(content, "content");
    this.toolCalls = toolCalls;
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

  /**
   * An assistant reply with tool calls, for a context with tools (ABI 1.4): {@code toolCallsJson}
   * an OpenAI-style array ({@code [{"id", "type": "function", "function": {"name",
   * "arguments"}}]}, arguments an object or its JSON text); appended, the reply is stored as the
   * model's chat template writes those calls.
   */
  public static Message assistant(String content, String toolCallsJson) {
    return new Message(Role.ASSISTANT, content, Objects.requireNonNull(toolCallsJson, "toolCallsJson"));
  }

  public Role role() {
    return role;
  }

  public String content() {
    return content;
  }

  /**
   * Read back: the tool calls an assistant reply of a context with tools made, as an
   * OpenAI-style JSON array ({@code [{"id", "type": "function", "function": {"name",
   * "arguments"}}]}), its content then the text around them; {@code null} for none.
   */
  public String toolCalls() {
    return toolCalls;
  }

  @Override
  public boolean equals(Object o) {
    if (this == o) return true;
    if (!(o instanceof Message)) return false;
    Message m = (Message) o;
    return role == m.role && content.equals(m.content) && Objects.equals(toolCalls, m.toolCalls);
  }

  @Override
  public int hashCode() {
    return Objects.hash(role, content, toolCalls);
  }

  @Override
  public String toString() {
    return "Message{role=" + role + ", content='" + content + "'" + (toolCalls != null ? ", toolCalls=" + toolCalls : "")
        + "}";
  }
}
