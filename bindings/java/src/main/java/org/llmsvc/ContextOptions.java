// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/** How to create a context ({@code llmsvc_context_options}). */
public final class ContextOptions {
  String id;
  String systemPrompt;
  boolean raw;

  /** A stable id: 1..64 characters of [A-Za-z0-9._-], not "." or "..". Unset: a fresh one is generated. */
  public ContextOptions id(String id) {
    this.id = id;
    return this;
  }

  /** Placed at the start of the context (chat mode). Unset: none, or the chat template's default. */
  public ContextOptions systemPrompt(String systemPrompt) {
    this.systemPrompt = systemPrompt;
    return this;
  }

  /** {@code true}: prompts are fed as they are, without the chat template. */
  public ContextOptions raw(boolean raw) {
    this.raw = raw;
    return this;
  }
}
