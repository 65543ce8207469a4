// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/** How to create a context ({@code llmsvc_context_options}). */
public final class ContextOptions {
  String id;
  String systemPrompt;
  boolean raw;
  String toolsJson;
  String adapter;

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

  /**
   * The tools the conversation may call (ABI 1.4): a JSON array of OpenAI-style tools,
   * {@code [{"type": "function", "function": {"name", "description", "parameters"}}]}. The
   * model's chat template renders them; replies are parsed for calls ({@link
   * CallResult#toolCalls()}, {@link Message#toolCalls()}), and each result goes back as a
   * {@link Role#TOOL} message (all of a reply's results in one append) before the next reply.
   * {@link InvalidArgumentException} for tools that are not such an array, {@link
   * LLMException} with {@code UNSUPPORTED} where the model's template renders no tools.
   */
  public ContextOptions toolsJson(String toolsJson) {
    this.toolsJson = toolsJson;
    return this;
  }

  /**
   * The LoRA adapter every call of the context runs with (ABI 1.6), by name: one the service
   * offers ({@link LLMService#adapters()}); kept with the context. Unset: none.
   */
  public ContextOptions adapter(String name) {
    this.adapter = name;
    return this;
  }
}
