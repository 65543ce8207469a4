// SPDX-License-Identifier: Apache-2.0
// The monotonic clock in the units the runtime's figures use (seconds, milliseconds).
#pragma once

#include <chrono>

namespace llmsvc {

using SteadyClock = std::chrono::steady_clock;

// Seconds on the monotonic clock, from an arbitrary origin: for differences.
inline double now_s() { return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count(); }

// Milliseconds since t0.
inline double ms_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
}

}  // namespace llmsvc
