// SPDX-License-Identifier: Apache-2.0
// Where a test keeps compiled OpenCL programs: the run's shared cache when LLMSVC_CL_CACHE_DIR
// names one (tools/scripts/test.sh: PoCL compiles each program once per CI run, not once per
// test), else a fresh temporary folder the test removes. Tests of the cache itself use their own.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/common/file_facts.h"

namespace llmsvc::test {

class ClTestCache {
 public:
  explicit ClTestCache(const char* tag) {
    const char* shared = std::getenv("LLMSVC_CL_CACHE_DIR");
    if (shared && *shared) {
      path_ = shared;
    } else {
      path_ = make_temp_dir(tag);
      owned_ = true;
    }
  }
  ~ClTestCache() {
    if (owned_ && !path_.empty()) std::filesystem::remove_all(path_);
  }
  ClTestCache(const ClTestCache&) = delete;
  ClTestCache& operator=(const ClTestCache&) = delete;
  std::string string() const { return path_.string(); }
  bool empty() const { return path_.empty(); }

 private:
  std::filesystem::path path_;
  bool owned_ = false;
};

}  // namespace llmsvc::test
