// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for structured output's front ends and matcher. The first byte picks the
// front end (even: JSON Schema, odd: GBNF); the rest up to a NUL byte is the schema or
// grammar, and what follows the NUL is text fed to the matcher. Every outcome must be a
// grammar or a Status. When it compiles, the text is matched byte by byte and, at a few
// states along it, the cached token mask is checked against the plain trie walk over a small
// vocabulary (a differential check: a mismatch aborts).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/core/constrain/automaton.h"
#include "runtime/core/constrain/constraint.h"
#include "runtime/core/constrain/token_mask.h"

namespace {

using namespace llmsvc::constrain;

const std::shared_ptr<const TokenVocab>& vocab() {
  static const auto v = TokenVocab::from_pieces(
      {"<eos>", "{", "}", "[", "]", ",", ":", "\"", "\",", "\"}", " ", "\n", "\\", "\\\"", "\\u00", "é", "\xC3", "\xA9",
       "true", "false", "null", "0", "1", "12", "-", ".", "e", "a", "ab", "abc", "x", "y", "z", "\": ", "{\"", "}]"},
      {0});
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 8192) return 0;
  const bool gbnf = data[0] & 1;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t nul = rest.find('\0');
  const std::string_view text = rest.substr(0, nul);
  const std::string_view sample = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);

  auto g = gbnf ? compile_gbnf(text) : compile_json_schema(text);
  if (!g.ok()) {
    if (g.status().message().empty()) std::abort();  // every error says why
    return 0;
  }
  // Tight bounds: a hostile grammar must not run past libFuzzer's timeout.
  Automaton a(*g, AutomatonLimits{.max_depth = 128, .max_stacks = 256, .max_expand = 4096});
  TokenMasker fast(vocab(), MaskOptions{.context_frames = 2});
  TokenMasker plain(vocab());
  TokenMask walked;
  uint32_t s = a.initial();
  for (size_t i = 0; i <= sample.size() && s != Automaton::kReject; ++i) {
    if (i % 7 == 0) {
      plain.walk(a, s, walked);
      // Bounds hit mid-walk narrow the two methods differently: compare only when none was.
      const TokenMask& got = fast.compute(a, s);
      if (!a.overflowed() && !(got == walked)) std::abort();
    }
    if (i < sample.size()) s = a.step(s, static_cast<uint8_t>(sample[i]));
  }
  return 0;
}
