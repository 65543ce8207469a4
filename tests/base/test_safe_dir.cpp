// SPDX-License-Identifier: Apache-2.0
// SafeDir: every primitive (open, create, mkdir -p, unlink, rename, list, rm -r, stat, atomic
// write, read) refuses a symbolic link as the final component and as an intermediate one,
// and a path that leaves the directory ("..", absolute), with openat2 and with the
// component walk the module falls back to; nothing outside the directory is touched, and
// messages name the relative path, never the directory's own.
#include "base/safe_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/file_io.h"
#include "tests/common/file_facts.h"

namespace llmsvc::fileio {
namespace {

namespace fs = std::filesystem;

using test::slurp;

void spit(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// <tmp>/root is the SafeDir; <tmp>/outside holds what must never be touched:
//   outside/secret ("keep"), outside/dir/file ("inner")
//   root/a/f ("f"), root/a/b/
//   root/link_file -> outside/secret      root/link_dir -> outside/dir
//   root/a/up -> outside                  root/dangling -> outside/created (absent)
class SafeDirTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    force_openat2_fallback_for_testing(GetParam());
    if (!GetParam() && !openat2_in_use()) GTEST_SKIP() << "this kernel has no openat2";
    tmp_ = test::make_temp_dir("llmsvc-safe-dir");
    ASSERT_FALSE(tmp_.empty());
    root_ = tmp_ + "/root";
    out_ = tmp_ + "/outside";
    fs::create_directories(root_ + "/a/b");
    fs::create_directories(out_ + "/dir");
    spit(out_ + "/secret", "keep");
    spit(out_ + "/dir/file", "inner");
    spit(root_ + "/a/f", "f");
    fs::create_symlink(out_ + "/secret", root_ + "/link_file");
    fs::create_symlink(out_ + "/dir", root_ + "/link_dir");
    fs::create_symlink(out_, root_ + "/a/up");
    fs::create_symlink(out_ + "/created", root_ + "/dangling");
    auto d = SafeDir::open(root_);
    ASSERT_TRUE(d.ok()) << d.status().message();
    dir_ = std::move(d).value();
  }
  void TearDown() override {
    force_openat2_fallback_for_testing(false);
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }

  // Nothing outside changed: the same entries with the same contents.
  void expect_outside_untouched() const {
    EXPECT_EQ(slurp(out_ + "/secret"), "keep");
    EXPECT_EQ(slurp(out_ + "/dir/file"), "inner");
    std::vector<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(out_)) names.push_back(fs::relative(e.path(), out_).string());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"dir", "dir/file", "secret"}));
  }
  // A refusal: Code::io, naming `rel` but not the directory's absolute path.
  void expect_refused(const Status& s, const std::string& rel, const char* why) const {
    EXPECT_EQ(s.code(), Code::io) << s.message();
    EXPECT_NE(s.message().find(rel), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find(tmp_), std::string::npos) << s.message();
  }
  static constexpr const char* kLink = "symbolic link";
  static constexpr const char* kLeaves = "leaves its directory";

  std::string tmp_, root_, out_;
  SafeDirRef dir_;
};

TEST_P(SafeDirTest, OpensAndCreatesBeneath) {
  auto f = dir_->open_file("a/f", O_RDONLY);
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto made = dir_->open_file("a/b/new", O_WRONLY | O_CREAT | O_EXCL);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_TRUE(fs::is_regular_file(root_ + "/a/b/new"));
  EXPECT_EQ(dir_->open_file("a/none", O_RDONLY).status().code(), Code::not_found);
  EXPECT_EQ(dir_->name_of("a/f"), "a/f");
}

TEST_P(SafeDirTest, OpenRefusesLinks) {
  expect_refused(dir_->open_file("link_file", O_RDONLY).status(), "link_file", kLink);
  expect_refused(dir_->open_file("link_file", O_RDWR | O_TRUNC).status(), "link_file", kLink);
  // Creating through a dangling link would make a file outside.
  expect_refused(dir_->open_file("dangling", O_WRONLY | O_CREAT).status(), "dangling", kLink);
  EXPECT_FALSE(dir_->open_file("dangling", O_WRONLY | O_CREAT | O_EXCL).ok());
  expect_refused(dir_->open_file("link_dir/file", O_RDONLY).status(), "link_dir/file", kLink);
  expect_refused(dir_->open_file("a/up/secret", O_RDWR).status(), "a/up/secret", kLink);
  expect_refused(dir_->open_file("link_dir/new", O_WRONLY | O_CREAT | O_EXCL).status(), "link_dir/new", kLink);
  expect_refused(dir_->open_dir("link_dir").status(), "link_dir", kLink);
  expect_refused(dir_->open_dir("a/up/dir").status(), "a/up/dir", kLink);
  expect_outside_untouched();
}

TEST_P(SafeDirTest, OpenRefusesEscapes) {
  expect_refused(dir_->open_file("../outside/secret", O_RDONLY).status(), "../outside/secret", kLeaves);
  expect_refused(dir_->open_file("a/../../outside/secret", O_RDONLY).status(), "a/../../outside/secret", kLeaves);
  const Status absolute = dir_->open_file(out_ + "/secret", O_RDONLY).status();
  EXPECT_EQ(absolute.code(), Code::io);
  EXPECT_NE(absolute.message().find(kLeaves), std::string::npos) << absolute.message();
  expect_refused(dir_->open_file("../outside/x", O_WRONLY | O_CREAT).status(), "../outside/x", kLeaves);
  EXPECT_LT(open_beneath(dir_->fd(), "..", O_RDONLY | O_DIRECTORY), 0);
  EXPECT_EQ(errno, EXDEV);
  expect_outside_untouched();
}

TEST_P(SafeDirTest, MakeDirsRefusesLinks) {
  ASSERT_TRUE(dir_->make_dirs("a/b/c/d").ok());
  EXPECT_TRUE(fs::is_directory(root_ + "/a/b/c/d"));
  EXPECT_EQ(fs::status(root_ + "/a/b/c/d").permissions() & fs::perms::all, fs::perms::owner_all);
  ASSERT_TRUE(dir_->make_dirs("a/b").ok());  // existing: fine
  expect_refused(dir_->make_dirs("link_dir"), "link_dir", kLink);
  expect_refused(dir_->make_dirs("link_dir/x"), "link_dir", kLink);
  expect_refused(dir_->make_dirs("a/up/made"), "a/up", kLink);
  expect_refused(dir_->make_dirs("dangling"), "dangling", kLink);
  expect_refused(dir_->make_dirs("../escape"), "../escape", kLeaves);
  EXPECT_FALSE(fs::exists(tmp_ + "/escape"));
  expect_outside_untouched();
}

TEST_P(SafeDirTest, UnlinkRefusesLinks) {
  expect_refused(dir_->unlink("link_file"), "link_file", kLink);
  EXPECT_TRUE(fs::is_symlink(root_ + "/link_file"));
  expect_refused(dir_->unlink("link_dir/file"), "link_dir/file", kLink);
  expect_refused(dir_->unlink("a/up/secret"), "a/up/secret", kLink);
  expect_refused(dir_->unlink("../outside/secret"), "../outside/secret", kLeaves);
  EXPECT_EQ(dir_->unlink("a/b").code(), Code::io);  // a directory is not a file
  EXPECT_EQ(dir_->unlink("a/none").code(), Code::not_found);
  ASSERT_TRUE(dir_->unlink("a/f").ok());
  EXPECT_FALSE(fs::exists(root_ + "/a/f"));
  expect_outside_untouched();
}

TEST_P(SafeDirTest, RenameRefusesLinks) {
  expect_refused(dir_->rename("link_file", "a/moved"), "link_file", kLink);
  expect_refused(dir_->rename("a/f", "link_dir/f"), "link_dir/f", kLink);
  expect_refused(dir_->rename("link_dir/file", "a/g"), "link_dir/file", kLink);
  expect_refused(dir_->rename("a/f", "dangling"), "dangling", kLink);
  expect_refused(dir_->rename("a/f", "link_file"), "link_file", kLink);
  expect_refused(dir_->rename("a/f", "../outside/f"), "../outside/f", kLeaves);
  EXPECT_TRUE(fs::is_symlink(root_ + "/link_file"));
  ASSERT_TRUE(dir_->rename("a/f", "a/b/g").ok());
  EXPECT_EQ(slurp(root_ + "/a/b/g"), "f");
  expect_outside_untouched();
}

TEST_P(SafeDirTest, ListRefusesLinks) {
  auto names = dir_->list(".");
  ASSERT_TRUE(names.ok()) << names.status().message();
  std::sort(names->begin(), names->end());
  EXPECT_EQ(*names, (std::vector<std::string>{"a", "dangling", "link_dir", "link_file"}));
  auto a = dir_->list("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size(), 3u);
  expect_refused(dir_->list("link_dir").status(), "link_dir", kLink);
  expect_refused(dir_->list("a/up/dir").status(), "a/up/dir", kLink);
  expect_refused(dir_->list("..").status(), "..", kLeaves);
  EXPECT_EQ(dir_->list("none").status().code(), Code::not_found);
}

TEST_P(SafeDirTest, RemoveTreeRemovesLinksNeverTheirTargets) {
  expect_refused(dir_->remove_tree("link_dir/file"), "link_dir", kLink);
  expect_refused(dir_->remove_tree("../outside"), "../outside", kLeaves);
  ASSERT_TRUE(dir_->remove_tree("link_dir").ok());  // the link itself
  EXPECT_FALSE(fs::is_symlink(root_ + "/link_dir"));
  ASSERT_TRUE(dir_->remove_tree("a").ok());  // holds a link to outside/
  EXPECT_FALSE(fs::exists(root_ + "/a"));
  EXPECT_TRUE(dir_->remove_tree("a").ok());  // absent: nothing to do
  expect_outside_untouched();
}

TEST_P(SafeDirTest, StatDoesNotFollow) {
  auto st = dir_->stat("link_file");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(S_ISLNK(st->st_mode));
  expect_refused(dir_->stat("link_dir/file").status(), "link_dir/file", kLink);
  EXPECT_EQ(dir_->stat("a/none").status().code(), Code::not_found);
}

TEST_P(SafeDirTest, AtomicWriteAndReadRefuseLinks) {
  ASSERT_TRUE(dir_->write_atomic("a/b/w", "written").ok());
  EXPECT_EQ(slurp(root_ + "/a/b/w"), "written");
  auto back = dir_->read_file("a/b/w", 100);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "written");
  expect_refused(dir_->write_atomic("link_file", "evil"), "link_file", kLink);
  expect_refused(dir_->write_atomic("link_dir/file", "evil"), "link_dir", kLink);
  expect_refused(dir_->write_atomic("a/up/secret", "evil"), "a/up", kLink);
  expect_refused(dir_->write_atomic("../outside/secret", "evil"), "../outside/secret", kLeaves);
  expect_refused(dir_->read_file("link_file", 100).status(), "link_file", kLink);
  expect_refused(dir_->read_file("link_dir/file", 100).status(), "link_dir/file", kLink);
  EXPECT_EQ(dir_->read_file("a/none", 100).status().code(), Code::not_found);
  // No temporary file is left behind by the refused writes.
  for (const auto& e : fs::recursive_directory_iterator(root_))
    EXPECT_FALSE(is_temp_file_name(e.path().filename().string())) << e.path();
  expect_outside_untouched();
}

TEST_P(SafeDirTest, SyncAndSubdirectories) {
  EXPECT_TRUE(dir_->sync(".").ok());
  EXPECT_TRUE(dir_->sync("a/b").ok());
  expect_refused(dir_->sync("link_dir"), "link_dir", kLink);
  auto sub = dir_->open_dir("a");
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ((*sub)->name(), "a");
  EXPECT_EQ((*sub)->name_of("f"), "a/f");
  expect_refused((*sub)->open_file("up/secret", O_RDONLY).status(), "a/up/secret", kLink);
  EXPECT_TRUE((*sub)->open_file("f", O_RDONLY).ok());
}

INSTANTIATE_TEST_SUITE_P(Resolution, SafeDirTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Walk" : "Openat2"; });

TEST(SafeDir, TempFileNamesCarryTheWritersPid) {
  const std::string name = temp_file_name("context.json");
  EXPECT_TRUE(is_temp_file_name(name));
  EXPECT_EQ(temp_file_pid(name), ::getpid());
  EXPECT_EQ(temp_file_pid(".3.kvc.12345.0.tmp"), 12345);
  EXPECT_EQ(temp_file_pid(".x.tmp"), 0);
  EXPECT_EQ(temp_file_pid("context.json"), 0);
  EXPECT_EQ(temp_file_pid(".a.b.x1.2.tmp"), 0);
}

}  // namespace
}  // namespace llmsvc::fileio
