// SPDX-License-Identifier: Apache-2.0
// A message of a chat context's conversation, as the engine, the C API and the protocol carry
// it. Plain data.
#pragma once

#include <cstdint>
#include <string>

namespace llmsvc {

// A message of a chat context's conversation. The roles' values are the C API's llmsvc_role's.
enum class MessageRole : uint32_t { system = 0, user = 1, assistant = 2, tool = 3 };
inline constexpr uint32_t kMaxMessageRole = 3;
const char* role_name(MessageRole role);

struct ChatMessage {
  MessageRole role = MessageRole::user;
  std::string content;
  // An assistant message of a context with tools, read back: the calls its reply made, as an
  // OpenAI-style tool_calls JSON array ("" for none; content is then the text around them).
  std::string tool_calls{};  // (a default, so that {role, content} stays complete)
  bool operator==(const ChatMessage&) const = default;
};

}  // namespace llmsvc
