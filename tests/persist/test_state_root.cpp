// SPDX-License-Identifier: Apache-2.0
// The state root check: created 0700; refused when another uid owns it (always, fix or not)
// or when its group or others can write it (unless fix_permissions, which makes it 0700);
// refused when an ancestor lets another user replace it (a root-owned sticky one is fine).
#include "runtime/core/persist/state_root.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/common/file_facts.h"

namespace llmsvc::persist {
namespace {

using test::mode_of;
using test::owner_of;

namespace fs = std::filesystem;

constexpr uid_t kNobody = 65534;

class StateRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/llmsvc-state-root-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
  }
  void TearDown() override { fs::remove_all(tmp_); }
  std::string made(const std::string& name, mode_t mode) {
    const std::string p = tmp_ + "/" + name;
    fs::create_directories(p);
    EXPECT_EQ(::chmod(p.c_str(), mode), 0);
    return p;
  }
  std::string tmp_;
};

TEST_F(StateRoot, CreatedPrivate) {
  const std::string root = tmp_ + "/a/b/state";
  auto r = open_state_root(root);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->created);
  EXPECT_TRUE(r->fixed.empty());
  EXPECT_EQ(mode_of(root), 0700u);
  EXPECT_EQ(mode_of(tmp_ + "/a"), 0700u);
  // Held open: files below are reached through it.
  EXPECT_TRUE(r->dir->make_dirs("contexts").ok());
  EXPECT_TRUE(fs::is_directory(root + "/contexts"));
  auto again = open_state_root(root);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
}

TEST_F(StateRoot, ClosedModesAreKeptAsTheyAre) {
  const std::string root = made("state", 0755);
  auto r = open_state_root(root);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(mode_of(root), 0755u);  // readable by others, writable only by us: not refused, not changed
}

TEST_F(StateRoot, WritableByOthersIsRefusedUnlessFixed) {
  for (mode_t m : {0777u, 0770u, 0702u, 01777u}) {
    SCOPED_TRACE(m);
    const std::string root = made("state", m);
    auto r = open_state_root(root);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::io);
    EXPECT_NE(r.status().message().find("can be written by"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("--fix-state-permissions"), std::string::npos) << r.status().message();
    EXPECT_EQ(mode_of(root), m);  // refused: nothing changed
    auto fixed = open_state_root(root, /*fix_permissions=*/true);
    ASSERT_TRUE(fixed.ok()) << fixed.status().message();
    EXPECT_NE(fixed->fixed.find("-> 0700"), std::string::npos) << fixed->fixed;
    EXPECT_EQ(mode_of(root), 0700u);
    fs::remove_all(root);
  }
}

TEST_F(StateRoot, AnotherUsersRootIsRefusedAndNeverFixed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another uid";
  for (mode_t m : {0700u, 0777u}) {
    SCOPED_TRACE(m);
    const std::string root = made("state", m);
    ASSERT_EQ(::chown(root.c_str(), kNobody, kNobody), 0);
    for (bool fix : {false, true}) {
      auto r = open_state_root(root, fix);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), Code::io);
      EXPECT_NE(r.status().message().find("belongs to uid 65534"), std::string::npos) << r.status().message();
      EXPECT_EQ(owner_of(root), kNobody);
      EXPECT_EQ(mode_of(root), m);
    }
    fs::remove_all(root);
  }
}

TEST_F(StateRoot, AncestorsMustNotLetOthersReplaceIt) {
  // An ancestor others can write without the sticky bit: they could rename the root away.
  const std::string open_parent = made("open", 0777);
  const std::string root = open_parent + "/state";
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
  auto r = open_state_root(root);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'" + open_parent + "'"), std::string::npos) << r.status().message();
  EXPECT_FALSE(open_state_root(root, /*fix_permissions=*/true).ok());  // ancestors are never fixed
  EXPECT_EQ(mode_of(open_parent), 0777u);
  // Sticky, like /tmp: others cannot rename what is ours in it.
  ASSERT_EQ(::chmod(open_parent.c_str(), 01777), 0);
  EXPECT_TRUE(open_state_root(root).ok());
  if (::geteuid() == 0) {
    // Sticky but another user's: that user may rename anything in it.
    ASSERT_EQ(::chown(open_parent.c_str(), kNobody, kNobody), 0);
    auto theirs = open_state_root(root);
    ASSERT_FALSE(theirs.ok());
    EXPECT_NE(theirs.status().message().find("owner uid 65534"), std::string::npos) << theirs.status().message();
  }
}

TEST_F(StateRoot, AFileIsNotARoot) {
  const std::string file = tmp_ + "/file";
  std::ofstream(file) << "x";
  EXPECT_FALSE(open_state_root(file).ok());
  EXPECT_EQ(open_state_root("").status().code(), Code::invalid_argument);
}

}  // namespace
}  // namespace llmsvc::persist
