// SPDX-License-Identifier: Apache-2.0
// JSON Schema -> GBNF: the structured-output front end. The output is grammar text that
// parse_gbnf() turns into the one Grammar form the matcher runs.
//
// What is supported (the subset structured-output APIs use), and how:
//  - type: object, array, string, number, integer, boolean, null, or a list of them
//    (["string", "null"]); "nullable": true adds null. No type: inferred from the keywords
//    present, else any JSON value. The schema `{}` / `true` is any JSON value.
//  - object: properties in declared order; required ones always, optional ones may be
//    skipped. additionalProperties: absent or false -> no other properties (so the output
//    can never collide with a declared key); true or a schema -> further members after the
//    declared ones, any key (a model could repeat a declared key there: a known gap).
//    An object with neither properties nor additionalProperties is any JSON object.
//  - array: items (schema or boolean), minItems, maxItems (above kMaxBoundedRepeat the
//    grammar stops at kMaxBoundedRepeat items: narrower, never invalid).
//  - string: JSON escapes; minLength / maxLength in characters (each escape one character);
//    `format` is accepted and not constrained (it is an annotation by default in 2020-12).
//  - integer: minimum / maximum / exclusive bounds exactly (at most 16 digits). number:
//    bounds rounded inward to integers (minimum 0.5 acts as 1: narrower, never invalid);
//    bounded numbers have no exponent. Unbounded numbers: <= 16 integer and fraction digits.
//  - enum / const of any JSON values (written as compact JSON); anyOf, oneOf (as
//    alternatives: keep oneOf's branches disjoint), allOf with one member.
//  - $ref to any local JSON pointer ("#", "#/$defs/x", "#/definitions/x"), recursive too.
// Keywords that would change the language and are not implemented (pattern, multipleOf,
// not, if/then/else, prefixItems, uniqueItems: true, minProperties, patternProperties,
// dependentRequired, ...) are errors, never silently ignored; annotations (title,
// description, default, examples, $comment, ...) and unknown keywords are ignored.
// Errors are Status values naming the place: "json schema at #/properties/age: ...".
// Whitespace between tokens is limited (kMaxWhitespace bytes) so a model cannot pad forever.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace llmsvc::constrain {

struct SchemaLimits {
  size_t max_bytes = 256 * 1024;   // schema text
  int max_depth = 64;              // nested subschemas (and JSON nesting of the text, x2)
  size_t max_enum = 2048;          // enum values
  size_t max_grammar_bytes = 1u << 20;
};

inline constexpr int kMaxBoundedRepeat = 256;  // minItems / maxItems / min/maxLength bound
inline constexpr int kMaxWhitespace = 24;

// Compiles a schema; `any JSON value` when `schema` is "{}" or "true".
Result<std::string> json_schema_to_gbnf(std::string_view schema, const SchemaLimits& limits = {});

// The grammar of any JSON value (what `{}` compiles to).
std::string any_json_gbnf();

}  // namespace llmsvc::constrain
