// SPDX-License-Identifier: Apache-2.0
// Status names and the thread-local last-error detail.
#include "runtime/api/last_error.h"

#include <string>

namespace llmsvc::api {
namespace {

// A plain thread_local string: its c_str() stays valid until this thread's next failure
// or clear, which is what the header promises ("until the next call on this thread").
thread_local std::string t_last_error;

static_assert(LLMSVC_ERR_INTERNAL == static_cast<int>(Code::internal), "Code and llmsvc_status must match");
static_assert(LLMSVC_ERR_QUOTA_EXCEEDED == static_cast<int>(Code::quota_exceeded));
static_assert(LLMSVC_ERR_MODEL_MISMATCH == static_cast<int>(Code::model_mismatch));
static_assert(LLMSVC_ERR_CANCELLED == static_cast<int>(Code::cancelled));

}  // namespace

const char* status_name(llmsvc_status status) {
  switch (status) {
    case LLMSVC_OK:
      return "LLMSVC_OK";
    case LLMSVC_ERR_INVALID_ARGUMENT:
      return "LLMSVC_ERR_INVALID_ARGUMENT";
    case LLMSVC_ERR_INVALID_UTF8:
      return "LLMSVC_ERR_INVALID_UTF8";
    case LLMSVC_ERR_MODEL_NOT_FOUND:
      return "LLMSVC_ERR_MODEL_NOT_FOUND";
    case LLMSVC_ERR_MODEL_INVALID:
      return "LLMSVC_ERR_MODEL_INVALID";
    case LLMSVC_ERR_UNSUPPORTED:
      return "LLMSVC_ERR_UNSUPPORTED";
    case LLMSVC_ERR_OUT_OF_MEMORY:
      return "LLMSVC_ERR_OUT_OF_MEMORY";
    case LLMSVC_ERR_CONTEXT_OVERFLOW:
      return "LLMSVC_ERR_CONTEXT_OVERFLOW";
    case LLMSVC_ERR_NOT_FOUND:
      return "LLMSVC_ERR_NOT_FOUND";
    case LLMSVC_ERR_EXISTS:
      return "LLMSVC_ERR_EXISTS";
    case LLMSVC_ERR_CANCELLED:
      return "LLMSVC_ERR_CANCELLED";
    case LLMSVC_ERR_BUSY:
      return "LLMSVC_ERR_BUSY";
    case LLMSVC_ERR_IO:
      return "LLMSVC_ERR_IO";
    case LLMSVC_ERR_UNAVAILABLE:
      return "LLMSVC_ERR_UNAVAILABLE";
    case LLMSVC_ERR_QUOTA_EXCEEDED:
      return "LLMSVC_ERR_QUOTA_EXCEEDED";
    case LLMSVC_ERR_INTERNAL:
      return "LLMSVC_ERR_INTERNAL";
    case LLMSVC_ERR_MODEL_MISMATCH:
      return "LLMSVC_ERR_MODEL_MISMATCH";
  }
  return "LLMSVC_ERR_UNKNOWN";
}

const char* last_error() { return t_last_error.c_str(); }

void clear_last_error() { t_last_error.clear(); }

llmsvc_status fail(const Status& status) noexcept {
  if (status.ok()) {
    // A success passed as a failure is a bug in the caller; never report OK as an error.
    return fail(LLMSVC_ERR_INTERNAL, "internal: failure reported without a status");
  }
  return fail(to_c(status.code()), status.message());
}

llmsvc_status fail(llmsvc_status code, std::string_view prefix, std::string_view detail) noexcept {
  try {
    if (prefix.empty() && detail.empty()) prefix = status_name(code);  // never "" on failure
    t_last_error.assign(prefix);
    t_last_error.append(detail);
  } catch (...) {
    t_last_error.clear();  // no memory for the text: the code still says what happened
  }
  return code;
}

}  // namespace llmsvc::api
