// SPDX-License-Identifier: Apache-2.0
// Field encodings: byte layouts, the UTF-8 check (against an independent one), errors.
#include <gtest/gtest.h>

#include <random>

#include "runtime/protocol/wire.h"
#include "tests/api/utf8_check.h"

namespace llmsvc::protocol {
namespace {

TEST(ProtocolWire, LittleEndianLayouts) {
  std::vector<uint8_t> out;
  Encoder e(out, "T");
  ASSERT_TRUE(e.u16("a", 0x0102).ok());
  ASSERT_TRUE(e.u32("b", 0x03040506).ok());
  ASSERT_TRUE(e.u64("c", 0x0708090a0b0c0d0eull).ok());
  ASSERT_TRUE(e.i32("d", -2).ok());
  ASSERT_TRUE(e.f32("e", 1.0f).ok());
  ASSERT_TRUE(e.f64("f", -2.0).ok());
  ASSERT_TRUE(e.boolean("g", true).ok());
  ASSERT_TRUE(e.text("h", "hé", kAnyText).ok());
  ASSERT_TRUE(e.opt_text("i", std::nullopt, kAnyText).ok());
  ASSERT_TRUE(e.text_list("j", {"x", "yz"}, 4, Bounds{1, 8}).ok());
  const std::vector<uint8_t> want = {
      0x02, 0x01,                                      // u16
      0x06, 0x05, 0x04, 0x03,                          // u32
      0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0x09, 0x08, 0x07,  // u64
      0xfe, 0xff, 0xff, 0xff,                          // i32 -2
      0x00, 0x00, 0x80, 0x3f,                          // f32 1.0
      0, 0, 0, 0, 0, 0, 0x00, 0xc0,                    // f64 -2.0
      0x01,                                            // bool
      0x03, 0, 0, 0, 'h', 0xc3, 0xa9,                  // text
      0xff, 0xff, 0xff, 0xff,                          // absent
      0x02, 0, 0, 0, 0x01, 0, 0, 0, 'x', 0x02, 0, 0, 0, 'y', 'z'};
  EXPECT_EQ(out, want);

  Decoder d(out, "T");
  uint16_t a;
  uint32_t b;
  uint64_t c;
  int32_t i32;
  float f;
  double g;
  bool h;
  std::string t;
  std::optional<std::string> o = "present";
  std::vector<std::string> l;
  ASSERT_TRUE(d.u16("a", a).ok() && d.u32("b", b).ok() && d.u64("c", c).ok() && d.i32("d", i32).ok());
  ASSERT_TRUE(d.f32("e", f).ok() && d.f64("f", g).ok() && d.boolean("g", h).ok());
  ASSERT_TRUE(d.text("h", t, kAnyText).ok() && d.opt_text("i", o, kAnyText).ok());
  ASSERT_TRUE(d.text_list("j", l, 4, Bounds{1, 8}).ok());
  EXPECT_TRUE(d.finish(false).ok());
  EXPECT_EQ(a, 0x0102);
  EXPECT_EQ(b, 0x03040506u);
  EXPECT_EQ(c, 0x0708090a0b0c0d0eull);
  EXPECT_EQ(i32, -2);
  EXPECT_EQ(f, 1.0f);
  EXPECT_EQ(g, -2.0);
  EXPECT_TRUE(h);
  EXPECT_EQ(t, "hé");
  EXPECT_FALSE(o.has_value());
  EXPECT_EQ(l, (std::vector<std::string>{"x", "yz"}));
}

TEST(ProtocolWire, ErrorsNameTheField) {
  const std::vector<uint8_t> in = {1, 2, 3};
  Decoder d(in, "MSG");
  uint32_t v;
  Status s = d.u32("field", v);
  EXPECT_EQ(s.code(), Code::invalid_argument);
  EXPECT_EQ(s.message(), "MSG.field: truncated (4 bytes needed, 3 left)");
  EXPECT_EQ(d.remaining(), 3u);
  s = d.finish(false);
  EXPECT_EQ(s.message(), "MSG: 3 trailing bytes after the last field");
  EXPECT_TRUE(d.finish(true).ok());
}

TEST(ProtocolWire, Utf8AgreesWithAnIndependentCheckOnEveryShortString) {
  std::string s;
  for (int a = 0; a < 256; ++a) {
    s.assign(1, static_cast<char>(a));
    ASSERT_EQ(valid_utf8(s), test::valid_utf8(s)) << a;
    for (int b = 0; b < 256; ++b) {
      s.assign({static_cast<char>(a), static_cast<char>(b)});
      ASSERT_EQ(valid_utf8(s), test::valid_utf8(s)) << a << " " << b;
      if (a < 0xE0 || a > 0xF4) continue;  // longer sequences start with E0..F4
      for (int c = 0; c < 256; ++c) {
        s.assign({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)});
        ASSERT_EQ(valid_utf8(s), test::valid_utf8(s)) << a << " " << b << " " << c;
      }
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    s.resize(4 + rng() % 6);
    for (char& ch : s) ch = static_cast<char>((0x80 + rng() % 0x80) | (rng() % 4 == 0 ? 0x40 : 0));
    ASSERT_EQ(valid_utf8(s), test::valid_utf8(s));
  }
  EXPECT_TRUE(valid_utf8("\xF0\x90\x80\x80\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(valid_utf8("\xF0\x8F\xBF\xBF"));  // overlong
  EXPECT_FALSE(valid_utf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_TRUE(valid_utf8(std::string("a\0b", 3)));
}

TEST(ProtocolWire, StatusMapping) {
  EXPECT_TRUE(status_from_wire(0, "ignored").ok());
  Status s = status_from_wire(8, "no such context");
  EXPECT_EQ(s.code(), Code::not_found);
  EXPECT_EQ(s.message(), "no such context");
  s = status_from_wire(17, "new");
  EXPECT_EQ(s.code(), Code::internal);
  EXPECT_EQ(s.message(), "status 17 (unknown to this version): new");
  EXPECT_EQ(code_from_wire(0xFFFFFFFF), Code::internal);
}

}  // namespace
}  // namespace llmsvc::protocol
