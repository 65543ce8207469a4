// SPDX-License-Identifier: Apache-2.0
// Helpers for the tokenizer tests: fixture paths, JSON loading, hex, a loaded tokenizer.
#pragma once

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/tokenizer/tokenizer.h"
#include "tests/common/test_paths.h"

namespace llmsvc::test {

inline std::string tokenizer_data(const std::string& name) { return data_dir() + "/tokenizer/" + name; }

inline nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
}

inline std::string to_hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out += kHex[static_cast<uint8_t>(c) >> 4];
    out += kHex[static_cast<uint8_t>(c) & 15];
  }
  return out;
}

// A GGUF file and the tokenizer built from it (the file outlives the tokenizer's use).
struct Loaded {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
};

inline Loaded load_tokenizer(const std::string& path) {
  Loaded l;
  auto f = gguf::GgufFile::open(path);
  EXPECT_TRUE(f.ok()) << path << ": " << f.status().message();
  if (!f.ok()) return l;
  l.file = std::move(f).value();
  auto t = Tokenizer::from_gguf(*l.file);
  EXPECT_TRUE(t.ok()) << path << ": " << t.status().message();
  if (t.ok()) l.tok = std::move(t).value();
  return l;
}

}  // namespace llmsvc::test
