// SPDX-License-Identifier: Apache-2.0
// The C entry points of a context's conversation (llmsvc.h, "messages"): append, truncate and
// read back. llmsvc_context_generate is a call without a prompt (c_api.cpp).
#include <cstring>
#include <string>
#include <vector>

#include "llmsvc/llmsvc.h"
#include "runtime/api/boundary.h"
#include "runtime/api/handles.h"
#include "runtime/api/last_error.h"
#include "runtime/api/validate.h"

using llmsvc::api::fail;
using llmsvc::api::guarded;

namespace {

constexpr size_t kMessageV1 = offsetof(llmsvc_message, content_len) + sizeof(size_t);
// Messages fetched from the transport per page while walking the conversation (a daemon's
// reply stays within its frame limit; see CONTEXT_MESSAGES).
constexpr size_t kPage = 64;

llmsvc_status null_arg(const char* name) { return fail(LLMSVC_ERR_INVALID_ARGUMENT, name, " is NULL"); }

}  // namespace

extern "C" {

void llmsvc_message_init(llmsvc_message* message) {
  if (!message) return;
  std::memset(message, 0, sizeof *message);
  message->struct_size = sizeof *message;
  message->role = LLMSVC_ROLE_USER;
}

llmsvc_status llmsvc_context_append(llmsvc_context* context, const llmsvc_message* messages, size_t n) {
  return guarded([&] {
    if (!context) return null_arg("context");
    if (n == 0) return LLMSVC_OK;
    if (!messages) return null_arg("messages");
    const size_t stride = messages[0].struct_size;
    if (stride < kMessageV1)
      return fail(LLMSVC_ERR_INVALID_ARGUMENT, "messages[0].struct_size ",
                  std::to_string(stride) + " is smaller than llmsvc_message's first version");
    std::vector<llmsvc::ChatMessage> copied;
    copied.reserve(n);
    const auto* base = reinterpret_cast<const unsigned char*>(messages);
    for (size_t i = 0; i < n; ++i) {
      const auto* m = reinterpret_cast<const llmsvc_message*>(base + i * stride);
      const std::string at = "messages[" + std::to_string(i) + "]";
      if (m->struct_size != stride)
        return fail(LLMSVC_ERR_INVALID_ARGUMENT, at, ".struct_size differs from messages[0]'s");
      if (m->role < 0 || static_cast<uint32_t>(m->role) > llmsvc::kMaxMessageRole)
        return fail(LLMSVC_ERR_INVALID_ARGUMENT, at, ".role " + std::to_string(m->role) + " is not an llmsvc_role");
      if (auto st = llmsvc::api::check_utf8(m->content, m->content_len, at + ".content"); !st.ok()) return fail(st);
      copied.push_back({static_cast<llmsvc::MessageRole>(m->role),
                        std::string(m->content ? m->content : "", m->content_len)});
    }
    if (auto st = context->service->transport().append_messages(context->id, copied); !st.ok()) return fail(st);
    return LLMSVC_OK;
  });
}

llmsvc_status llmsvc_context_truncate(llmsvc_context* context, size_t n_messages) {
  return guarded([&] {
    if (!context) return null_arg("context");
    if (auto st = context->service->transport().truncate_messages(context->id, n_messages); !st.ok()) return fail(st);
    return LLMSVC_OK;
  });
}

llmsvc_status llmsvc_context_messages(llmsvc_context* context, size_t first, llmsvc_message_fn fn, void* user) {
  return guarded([&] {
    if (!context) return null_arg("context");
    if (!fn) return null_arg("fn");
    for (size_t at = first;;) {
      auto page = context->service->transport().messages(context->id, at, kPage);
      if (!page.ok()) return fail(page.status());
      for (const llmsvc::ChatMessage& m : *page) {
        llmsvc_message out;
        llmsvc_message_init(&out);
        out.role = static_cast<int32_t>(m.role);
        out.content = m.content.empty() ? nullptr : m.content.data();
        out.content_len = m.content.size();
        if (fn(&out, user) != 0) return LLMSVC_OK;
      }
      if (page->size() < kPage) return LLMSVC_OK;
      at += page->size();
    }
  });
}

}  // extern "C"
