// SPDX-License-Identifier: Apache-2.0
// GBNF: the grammar text format apps know from llama.cpp, parsed into a Grammar.
//
//   root   ::= "{" ws pair ("," ws pair)* "}"      # comments run to the end of the line
//   pair   ::= [a-z]+ ":" ws ( "yes" | "no" )
//   ws     ::= [ \t\n]{0,8}
//
// Rules `name ::= alternatives` (names of letters, digits, '-' and '_'; `root` is the start),
// alternatives `|`, sequences, groups `( )`, literals "..." and character classes [...] / [^...]
// over Unicode code points (escapes \n \r \t \\ \" \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH), `.` for
// any character, quantifiers * + ? {m} {m,} {m,n}. A rule ends where the next `name ::=`
// begins, so rules may span lines. Errors name the line and column.
#pragma once

#include <string_view>

#include "base/status.h"
#include "runtime/core/constrain/grammar.h"

namespace llmsvc::constrain {

inline constexpr size_t kMaxGrammarText = 1u << 20;  // bytes of GBNF accepted
inline constexpr int kMaxGroupDepth = 64;             // nesting of ( )

Result<Grammar> parse_gbnf(std::string_view text, const GrammarLimits& limits = {});

}  // namespace llmsvc::constrain
