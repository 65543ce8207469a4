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
#include "runtime/api/message_options.h"

using llmsvc::api::fail;
using llmsvc::api::guarded;

namespace {

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
    auto copied = llmsvc::api::read_messages(messages, n, "messages");
    if (!copied.ok()) return fail(copied.status());
    if (copied->empty()) return LLMSVC_OK;
    if (auto st = context->service->transport().append_messages(context->id, *copied); !st.ok()) return fail(st);
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
        out.tool_calls = m.tool_calls.empty() ? nullptr : m.tool_calls.data();
        out.tool_calls_len = m.tool_calls.size();
        if (fn(&out, user) != 0) return LLMSVC_OK;
      }
      if (page->size() < kPage) return LLMSVC_OK;
      at += page->size();
    }
  });
}

}  // extern "C"
