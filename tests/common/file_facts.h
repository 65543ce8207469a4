// SPDX-License-Identifier: Apache-2.0
// Files for tests: a fresh scratch directory, and the facts tests check about files
// (permission bits, owner, whole contents).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <string>

namespace llmsvc::test {

// A fresh directory /tmp/<prefix>-XXXXXX ("" on failure).
inline std::string make_temp_dir(const char* prefix = "llmsvc-test") {
  std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
  const char* d = ::mkdtemp(tmpl.data());
  return d ? d : "";
}

// The permission bits (07777) of `path`; a test failure when it cannot be stat'ed.
inline mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

inline uid_t owner_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_uid;
}

// The whole file ("" when unreadable).
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace llmsvc::test
