// SPDX-License-Identifier: Apache-2.0
// main() of every test binary: GoogleTest, with persistent state confined to a fresh
// temporary directory per process (ctest runs each test as its own process, in parallel),
// removed at exit, so no test sees another's contexts or the user's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "base/file_io.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  char tmpl[] = "/tmp/llmsvc-test-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  if (dir == nullptr) {
    std::perror("mkdtemp");
    return 2;
  }
  ::setenv("LLMSVC_STATE_DIR", dir, 1);
  const int rc = RUN_ALL_TESTS();
  (void)llmsvc::fileio::remove_tree(dir);
  return rc;
}
