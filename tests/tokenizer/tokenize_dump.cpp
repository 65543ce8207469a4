// SPDX-License-Identifier: Apache-2.0
// tokenize_dump: the tokenizer from the command line, for bulk_compare.py and timing.
//
//   tokenize_dump MODEL.gguf [--special] [--add-special] < records
//       records are "<byte length>\n<bytes>"; prints one line of token ids per record
//   tokenize_dump MODEL.gguf --bench FILE [KIB]
//       tokenizes the first KIB KiB (default 100) of FILE repeatedly and prints the best time
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/tokenizer/tokenizer.h"

namespace {

int bench(const llmsvc::Tokenizer& tok, double load_ms, const char* path, size_t kib) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str().substr(0, kib * 1024);
  if (text.empty()) {
    std::fprintf(stderr, "cannot read %s\n", path);
    return 1;
  }
  while (!text.empty() && (static_cast<uint8_t>(text.back()) & 0xC0) == 0x80) text.pop_back();  // whole characters
  double best = 1e9;
  size_t n = 0;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    n = tok.encode(text, false, false).size();
    const std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count());
  }
  std::printf("{\"load_ms\": %.1f, \"bytes\": %zu, \"tokens\": %zu, \"best_ms\": %.3f, \"mb_per_s\": %.1f}\n",
              load_ms, text.size(), n, best, text.size() / best / 1e3);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [--special] [--add-special] | [--bench FILE [KIB]]\n", argv[0]);
    return 2;
  }
  auto file = llmsvc::gguf::GgufFile::open(argv[1]);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.status().message().c_str());
    return 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto tok = llmsvc::Tokenizer::from_gguf(*file.value());
  const std::chrono::duration<double, std::milli> load = std::chrono::steady_clock::now() - t0;
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().message().c_str());
    return 1;
  }
  bool parse_special = false, add_special = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--bench" && i + 1 < argc) {
      return bench(*tok.value(), load.count(), argv[i + 1], i + 2 < argc ? std::strtoul(argv[i + 2], nullptr, 10) : 100);
    }
    parse_special = parse_special || a == "--special";
    add_special = add_special || a == "--add-special";
  }
  std::string header;
  while (std::getline(std::cin, header)) {
    std::string rec(std::strtoul(header.c_str(), nullptr, 10), '\0');
    std::cin.read(rec.data(), static_cast<std::streamsize>(rec.size()));
    const auto ids = tok.value()->encode(rec, add_special, parse_special);
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) line += ' ';
      line += std::to_string(ids[i]);
    }
    std::puts(line.c_str());
  }
  return 0;
}
