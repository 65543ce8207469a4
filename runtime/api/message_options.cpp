// SPDX-License-Identifier: Apache-2.0
// Reading an llmsvc_message array.
#include "runtime/api/message_options.h"

#include <string>

#include "runtime/api/validate.h"

namespace llmsvc::api {

Result<std::vector<ChatMessage>> read_messages(const llmsvc_message* messages, size_t n, const char* what) {
  constexpr size_t kMessageV1 = offsetof(llmsvc_message, content_len) + sizeof(size_t);
  constexpr size_t kMessageTools = offsetof(llmsvc_message, tool_calls_len) + sizeof(size_t);  // ABI 1.4
  std::vector<ChatMessage> out;
  if (n == 0) return out;
  if (!messages) return Status(Code::invalid_argument, std::string(what) + " is NULL");
  const size_t stride = messages[0].struct_size;
  if (stride < kMessageV1)
    return Status(Code::invalid_argument, std::string(what) + "[0].struct_size " + std::to_string(stride) +
                                              " is smaller than llmsvc_message's first version");
  out.reserve(n);
  const auto* base = reinterpret_cast<const unsigned char*>(messages);
  for (size_t i = 0; i < n; ++i) {
    const auto* m = reinterpret_cast<const llmsvc_message*>(base + i * stride);
    const std::string at = std::string(what) + "[" + std::to_string(i) + "]";
    if (m->struct_size != stride) return Status(Code::invalid_argument, at + ".struct_size differs from " + what + "[0]'s");
    if (m->role < 0 || static_cast<uint32_t>(m->role) > kMaxMessageRole)
      return Status(Code::invalid_argument, at + ".role " + std::to_string(m->role) + " is not an llmsvc_role");
    LLMSVC_RETURN_IF_ERROR(check_utf8(m->content, m->content_len, at + ".content"));
    out.push_back({static_cast<MessageRole>(m->role), std::string(m->content ? m->content : "", m->content_len)});
    if (stride >= kMessageTools && m->tool_calls_len > 0) {
      LLMSVC_RETURN_IF_ERROR(check_utf8(m->tool_calls, m->tool_calls_len, at + ".tool_calls"));
      out.back().tool_calls.assign(m->tool_calls, m->tool_calls_len);
    }
  }
  return out;
}

}  // namespace llmsvc::api
