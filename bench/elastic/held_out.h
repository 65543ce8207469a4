// SPDX-License-Identifier: Apache-2.0
// The text the elastic benchmarks evaluate on (bench_levels, bench_slo_trace): the
// repository's public-domain text, whose first 12 kB are elastify's built-in calibration text,
// so only what follows them is held out.
#pragma once

#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>

namespace llmsvc::bench {

// Bytes of the text elastify calibrates on (its built-in calibration text).
inline constexpr size_t kCalibrationBytes = 12 * 1024;

inline std::string default_text_path() { return std::string(LLMSVC_SOURCE_DIR) + "/tests/data/golden/ppl_text.txt"; }

// The whole file ("" when it cannot be read).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What follows the calibration head, from the next line start on (no cut word or character).
inline std::string held_out_text(const std::string& text) {
  if (text.size() <= kCalibrationBytes) return {};
  const size_t nl = text.find('\n', kCalibrationBytes);
  return nl == std::string::npos ? std::string() : text.substr(nl + 1);
}

}  // namespace llmsvc::bench
