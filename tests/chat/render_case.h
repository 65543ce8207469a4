// SPDX-License-Identifier: Apache-2.0
// Shared by the unit tests: render a template source over a JSON context, and the table
// form of a case whose expected text was produced by Python jinja2 in Hugging Face's
// configuration (trim_blocks, lstrip_blocks, loopcontrols, json.dumps tojson).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "runtime/core/chat/jinja/json.h"
#include "runtime/core/chat/jinja/template.h"

namespace llmsvc::jinja::testing {

struct RenderCase {
  const char* source;
  const char* context_json;
  const char* expected;
};

inline Result<std::string> render(std::string_view source, std::string_view context_json = "{}",
                                  const Limits& limits = {}) {
  auto tmpl = Template::compile(source, limits);
  if (!tmpl.ok()) return tmpl.status();
  auto ctx = parse_json(context_json);
  if (!ctx.ok()) return ctx.status();
  return tmpl->render(*ctx);
}

// Renders every case and compares with jinja2's text.
template <size_t N>
void expect_renders(const RenderCase (&cases)[N]) {
  for (const RenderCase& c : cases) {
    SCOPED_TRACE(c.source);
    auto out = render(c.source, c.context_json);
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(*out, c.expected);
  }
}

// The error of rendering `source` (fails the test when it renders).
inline Status render_error(std::string_view source, std::string_view context_json = "{}", const Limits& limits = {}) {
  auto out = render(source, context_json, limits);
  EXPECT_FALSE(out.ok()) << source << " rendered: " << (out.ok() ? *out : "");
  return out.status();
}

inline bool contains(const Status& s, std::string_view what) { return s.message().find(what) != std::string::npos; }

// A template and (part of) the error message it must fail with.
struct ErrorCase {
  const char* source;
  const char* message;
};

}  // namespace llmsvc::jinja::testing
