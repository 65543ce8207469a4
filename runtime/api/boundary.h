// SPDX-License-Identifier: Apache-2.0
// The exception boundary of every C entry point: nothing C++ escapes into C.
#pragma once

#include <exception>
#include <new>

#include "runtime/api/last_error.h"

namespace llmsvc::api {

// Runs `body` (returning llmsvc_status) with the thread's last error cleared first, and
// turns any exception into a status: bad_alloc is out-of-memory, anything else a bug.
template <class F>
llmsvc_status guarded(F&& body) noexcept {
  clear_last_error();
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(LLMSVC_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(LLMSVC_ERR_INTERNAL, "internal: unexpected exception: ", e.what());
  } catch (...) {
    return fail(LLMSVC_ERR_INTERNAL, "internal: unexpected exception");
  }
}

}  // namespace llmsvc::api
