// SPDX-License-Identifier: Apache-2.0
// Python's str() and repr() of Values: what `{{ x }}` prints (None, True, 1.0, ['a', 1],
// {'k': 'v'}) and what ~ and |string produce. Undefined prints as nothing.
#pragma once

#include <string>

#include "runtime/core/chat/jinja/value.h"

namespace llmsvc::jinja {

std::string to_str(const Value& v);
std::string repr(const Value& v);
// Appends str(v) to out (no copy of a string value).
void append_str(std::string& out, const Value& v);

}  // namespace llmsvc::jinja
