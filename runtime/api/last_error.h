// SPDX-License-Identifier: Apache-2.0
// Status names and the thread-local last-error detail behind llmsvc_last_error().
#pragma once

#include <string_view>

#include "base/status.h"
#include "llmsvc/llmsvc.h"

namespace llmsvc::api {

// "LLMSVC_ERR_NOT_FOUND" etc.; "LLMSVC_ERR_UNKNOWN" for a value outside the enum.
const char* status_name(llmsvc_status status);

// The calling thread's detail string; "" when the last fallible call succeeded.
const char* last_error();
void clear_last_error();

// Record the detail (`prefix` + `detail`) for the calling thread and return the code.
// Never throw: without memory for the text, the detail is left empty.
llmsvc_status fail(const Status& status) noexcept;
llmsvc_status fail(llmsvc_status code, std::string_view prefix, std::string_view detail = {}) noexcept;

// Code values match one to one (base/status.h), so this is a cast.
inline llmsvc_status to_c(Code code) { return static_cast<llmsvc_status>(code); }

}  // namespace llmsvc::api
