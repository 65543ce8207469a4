// SPDX-License-Identifier: Apache-2.0
// An array of llmsvc_message read into the core's messages: its stride, roles and UTF-8 checked
// (llmsvc_context_append, llmsvc_count_options.messages).
#pragma once

#include <cstddef>
#include <vector>

#include "base/status.h"
#include "llmsvc/llmsvc.h"
#include "runtime/core/engine/message_types.h"

namespace llmsvc::api {

// `n` messages stepped through by messages[0].struct_size (every element the same size, at
// least the first version's); `what` names the array in messages ("messages").
Result<std::vector<ChatMessage>> read_messages(const llmsvc_message* messages, size_t n, const char* what);

}  // namespace llmsvc::api
