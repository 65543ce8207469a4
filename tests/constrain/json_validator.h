// SPDX-License-Identifier: Apache-2.0
// A small JSON Schema validator for the tests, written independently of the schema compiler
// and the matcher (it reads the schema directly), so "the output validates" means something.
// It covers the keywords the compiler supports; oneOf is checked as exactly one.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace llmsvc::constrain::test {

// Empty when `value` is valid against `schema` (whose local $refs resolve in `root`), else
// the first reason it is not.
std::string validate(const nlohmann::json& value, const nlohmann::json& schema, const nlohmann::json& root);

}  // namespace llmsvc::constrain::test
