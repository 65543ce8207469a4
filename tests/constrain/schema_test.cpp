// SPDX-License-Identifier: Apache-2.0
// JSON Schema -> grammar: what each supported keyword lets through and what it stops, and
// clear errors (naming the JSON pointer) for invalid, unsupported and oversized schemas.
#include <gtest/gtest.h>

#include "runtime/core/constrain/json_schema.h"
#include "tests/constrain/match_util.h"

namespace llmsvc::constrain::test {
namespace {

TEST(Schema, AnyJsonValue) {
  for (const char* s : {"{}", "true"}) {
    auto g = must_schema(s);
    for (const char* ok : {"1", "-0.5e+3", "\"x\"", "null", "true", "[]", "{}", "[1, {\"a\": [null, \"\\u00e9\"]}]",
                           "{\"k\":\"v\",\"n\":{\"m\":[]}}"})
      EXPECT_TRUE(accepts(g, ok)) << s << " " << ok;
    for (const char* bad : {"01", "[1,]", "{\"a\"}", "'x'", "nul", "\"\\x\"", "{,}", "1.", "\"a\nb\""})
      EXPECT_FALSE(accepts(g, bad)) << s << " " << bad;
  }
}

TEST(Schema, StringsWithEscapesAndUnicode) {
  auto g = must_schema(R"({"type":"string"})");
  EXPECT_TRUE(accepts(g, R"("")"));
  EXPECT_TRUE(accepts(g, R"("a \"quoted\" \\ \/ \b\f\n\r\t \u00E9 é 😀")"));
  EXPECT_FALSE(accepts(g, R"("\u00G0")"));
  EXPECT_FALSE(accepts(g, "\"tab\there\""));  // raw control character
  EXPECT_FALSE(accepts(g, "\"\xFF\""));       // invalid UTF-8
  EXPECT_FALSE(accepts(g, R"("a" )"));
}

TEST(Schema, StringLengthsCountCharacters) {
  auto g = must_schema(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_FALSE(accepts(g, R"("a")"));
  EXPECT_TRUE(accepts(g, R"("ab")"));
  EXPECT_TRUE(accepts(g, R"("é\n😀")"));
  EXPECT_FALSE(accepts(g, R"("abcd")"));
  // format is an annotation: any string.
  EXPECT_TRUE(accepts(must_schema(R"({"type":"string","format":"email"})"), R"("not an email")"));
}

TEST(Schema, Numbers) {
  auto i = must_schema(R"({"type":"integer"})");
  for (const char* ok : {"0", "-7", "1234567890123456"}) EXPECT_TRUE(accepts(i, ok)) << ok;
  for (const char* bad : {"01", "1.0", "1e3", "12345678901234567", "+1"}) EXPECT_FALSE(accepts(i, bad)) << bad;
  auto n = must_schema(R"({"type":"number"})");
  for (const char* ok : {"0", "-0", "3.25", "-1.5E-7", "2e10"}) EXPECT_TRUE(accepts(n, ok)) << ok;
  for (const char* bad : {".5", "1.", "1e", "--1", "0x10"}) EXPECT_FALSE(accepts(n, bad)) << bad;
}

TEST(Schema, IntegerBoundsAreExact) {
  struct Case {
    const char* schema;
    long lo, hi;
  };
  const Case cases[] = {
      {R"({"type":"integer","minimum":0,"maximum":100})", 0, 100},
      {R"({"type":"integer","minimum":-25,"maximum":7})", -25, 7},
      {R"({"type":"integer","minimum":-1200,"maximum":-37})", -1200, -37},
      {R"({"type":"integer","exclusiveMinimum":9,"exclusiveMaximum":1000})", 10, 999},
      {R"({"type":"integer","minimum":1.5,"maximum":19.99})", 2, 19},
      {R"({"type":"integer","minimum":37,"maximum":37})", 37, 37},
  };
  for (const auto& c : cases) {
    auto g = must_schema(c.schema);
    for (long v = c.lo - 150; v <= c.hi + 150; ++v)
      ASSERT_EQ(accepts(g, std::to_string(v)), v >= c.lo && v <= c.hi) << c.schema << " " << v;
  }
  // One-sided.
  expect_language(must_schema(R"({"type":"integer","minimum":18})"), {"18", "123456789"}, {"17", "-20"});
  expect_language(must_schema(R"({"type":"integer","maximum":-3})"), {"-3", "-99999"}, {"-2", "5"});
}

TEST(Schema, NumberBounds) {
  auto g = must_schema(R"({"type":"number","minimum":0,"maximum":5})");
  for (const char* ok : {"0", "0.5", "4.999", "5", "5.000"}) EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {"-0.1", "5.01", "6", "-1", "1e2"}) EXPECT_FALSE(accepts(g, bad)) << bad;
  auto m = must_schema(R"({"type":"number","minimum":-2,"maximum":-1})");
  for (const char* ok : {"-1", "-1.5", "-2", "-2.0"}) EXPECT_TRUE(accepts(m, ok)) << ok;
  for (const char* bad : {"-0.5", "-2.5", "0", "1"}) EXPECT_FALSE(accepts(m, bad)) << bad;
}

TEST(Schema, ObjectsKeepOrderAndRequiredness) {
  auto g = must_schema(R"({"type":"object","properties":{
      "name":{"type":"string"}, "age":{"type":"integer"}, "tags":{"type":"array","items":{"type":"string"}}},
      "required":["name"]})");
  EXPECT_TRUE(accepts(g, R"({"name":"a"})"));
  EXPECT_TRUE(accepts(g, R"({ "name" : "a" , "age" : 3 })"));
  EXPECT_TRUE(accepts(g, "{\n  \"name\": \"a\",\n  \"tags\": [\"x\", \"y\"]\n}"));
  EXPECT_TRUE(accepts(g, R"({"name":"a","age":3,"tags":[]})"));
  EXPECT_FALSE(accepts(g, R"({"age":3})"));                 // name required
  EXPECT_FALSE(accepts(g, R"({"age":3,"name":"a"})"));      // declared order
  EXPECT_FALSE(accepts(g, R"({"name":"a","other":1})"));    // no additional properties
  EXPECT_FALSE(accepts(g, R"({"name":"a",})"));
  EXPECT_FALSE(accepts(g, R"({"name":"a","age":"3"})"));
  auto all_optional = must_schema(R"({"properties":{"a":{"type":"boolean"},"b":{"type":"null"}}})");
  for (const char* ok : {"{}", R"({"a":true})", R"({"b":null})", R"({"a":false,"b":null})"})
    EXPECT_TRUE(accepts(all_optional, ok)) << ok;
  EXPECT_FALSE(accepts(all_optional, R"({,"b":null})"));
}

TEST(Schema, AdditionalPropertiesAndFreeObjects) {
  auto g = must_schema(R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],
                           "additionalProperties":{"type":"string"}})");
  EXPECT_TRUE(accepts(g, R"({"id":1})"));
  EXPECT_TRUE(accepts(g, R"({"id":1,"x":"y","z":"w"})"));
  EXPECT_FALSE(accepts(g, R"({"id":1,"x":2})"));
  auto free = must_schema(R"({"type":"object"})");
  EXPECT_TRUE(accepts(free, R"({"anything":[1,2,{"x":null}]})"));
  EXPECT_FALSE(accepts(free, "[]"));
}

TEST(Schema, ArraysWithBounds) {
  expect_language(must_schema(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})"),
                  {"[1]", "[1, 2, 3]"}, {"[]", "[1,2,3,4]", "[1,\"2\"]"});
  expect_language(must_schema(R"({"type":"array","items":false})"), {"[]"}, {"[1]"});
}

TEST(Schema, EnumConstAndTypeLists) {
  auto e = must_schema(R"({"enum":["red","gr\"een",3,null,{"a":[1]}]})");
  for (const char* ok : {R"("red")", R"("gr\"een")", "3", "null", R"({"a":[1]})"}) EXPECT_TRUE(accepts(e, ok)) << ok;
  for (const char* bad : {R"("blue")", "4", R"({"a":[2]})"}) EXPECT_FALSE(accepts(e, bad)) << bad;
  auto c = must_schema(R"({"const":"fixed é"})");
  EXPECT_TRUE(accepts(c, "\"fixed é\""));
  EXPECT_FALSE(accepts(c, "\"fixed\""));
  expect_language(must_schema(R"({"type":["string","null"]})"), {"null", "\"s\""}, {"1"});
  auto openapi = must_schema(R"({"type":"integer","nullable":true})");
  EXPECT_TRUE(accepts(openapi, "null"));
}

TEST(Schema, AnyOfOneOfAndRefs) {
  auto g = must_schema(R"({
    "$defs": {"point": {"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}},
    "anyOf": [{"$ref":"#/$defs/point"}, {"type":"string"}]})");
  EXPECT_TRUE(accepts(g, R"({"x":1,"y":2.5})"));
  EXPECT_TRUE(accepts(g, R"("p")"));
  EXPECT_FALSE(accepts(g, R"({"x":1})"));
  expect_language(must_schema(R"({"oneOf":[{"type":"boolean"},{"type":"null"}]})"), {"true", "null"}, {"0"});
  expect_language(must_schema(R"({"definitions":{"c":{"enum":["a","b"]}},"type":"array","items":{"$ref":"#/definitions/c"}})"),
                  {R"(["a","b","a"])"}, {R"(["c"])"});
}

TEST(Schema, RecursiveRefs) {
  auto g = must_schema(R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{
      "value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["value"]}}})");
  EXPECT_TRUE(accepts(g, R"({"value":1})"));
  EXPECT_TRUE(accepts(g, R"({"value":1,"children":[{"value":2,"children":[{"value":3}]},{"value":4}]})"));
  EXPECT_FALSE(accepts(g, R"({"value":1,"children":[{"children":[]}]})"));
  auto self = must_schema(R"({"type":"object","properties":{"next":{"$ref":"#"}}})");
  EXPECT_TRUE(accepts(self, R"({"next":{"next":{}}})"));
}

TEST(Schema, ErrorsNameThePlace) {
  struct Case {
    const char* schema;
    Code code;
    const char* want;
  };
  const Case cases[] = {
      {"{", Code::invalid_argument, "not valid JSON"},
      {"42", Code::invalid_argument, "at #: a schema must be an object"},
      {"false", Code::invalid_argument, "matches nothing"},
      {R"({"type":"strng"})", Code::invalid_argument, "at #/type: unknown type 'strng'"},
      {R"({"properties":{"a":{"type":"string","pattern":"^x"}}})", Code::unsupported,
       "at #/properties/a: keyword 'pattern' is not supported"},
      {R"({"type":"number","multipleOf":2})", Code::unsupported, "'multipleOf'"},
      {R"({"$ref":"#/$defs/missing"})", Code::invalid_argument, "points nowhere"},
      {R"({"$ref":"http://x/y.json"})", Code::unsupported, "not local"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", Code::unsupported, "'b' is not in properties"},
      {R"({"type":"integer","minimum":5,"maximum":4})", Code::invalid_argument, "no integer satisfies"},
      {R"({"type":"array","minItems":3,"maxItems":2})", Code::invalid_argument, "below"},
      {R"({"type":"string","minLength":-1})", Code::invalid_argument, "non-negative integer"},
      {R"({"enum":[]})", Code::invalid_argument, "at #/enum: enum must be a non-empty array"},
      {R"({"allOf":[{},{}]})", Code::unsupported, "allOf with one member"},
      {R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})", Code::invalid_argument, "never complete"},
      {R"({"type":"object","properties":{"n":{"$ref":"#"}},"required":["n"]})", Code::invalid_argument,
       "never complete"},
  };
  for (const auto& c : cases) {
    auto g = compile_json_schema(c.schema);
    ASSERT_FALSE(g.ok()) << c.schema;
    EXPECT_EQ(g.status().code(), c.code) << c.schema << " -> " << g.status().message();
    EXPECT_NE(g.status().message().find(c.want), std::string::npos) << c.schema << " -> " << g.status().message();
  }
}

TEST(Schema, BoundsOnSizeAndDepth) {
  std::string deep = "{}";
  for (int i = 0; i < 100; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  auto g = compile_json_schema(deep);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("nested deeper"), std::string::npos) << g.status().message();
  auto brackets = compile_json_schema(std::string(100000, '['));
  ASSERT_FALSE(brackets.ok());
  EXPECT_NE(brackets.status().message().find("nested deeper"), std::string::npos);
  std::string huge(300 * 1024, 'x');
  huge.front() = huge.back() = '"';
  auto big = compile_json_schema(huge);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("larger than"), std::string::npos);
  // Within bounds: a wide schema compiles.
  std::string wide = R"({"type":"object","properties":{)";
  for (int i = 0; i < 300; ++i) {
    wide += i ? ",\"p" : "\"p";
    wide += std::to_string(i);
    wide += R"(":{"type":"integer"})";
  }
  wide += "}}";
  EXPECT_TRUE(compile_json_schema(wide).ok());
}

TEST(Schema, GrammarTextIsReadable) {
  auto text = json_schema_to_gbnf(R"({"type":"object","properties":{"name":{"type":"string"}},"required":["name"]})");
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("root ::= s-"), std::string::npos) << *text;
  EXPECT_NE(text->find("\"\\\"name\\\"\" ws \":\" ws string ws"), std::string::npos) << *text;
}

}  // namespace
}  // namespace llmsvc::constrain::test
