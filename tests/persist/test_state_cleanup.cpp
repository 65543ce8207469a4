// SPDX-License-Identifier: Apache-2.0
// The start-up scan: the debris a crash leaves (temporary files of dead writers, context
// directories without context.json) is removed; complete contexts, live writers' files,
// creations in progress (their history locked), unknown files and everything behind a link
// are kept.
#include "runtime/core/persist/state_cleanup.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/unique_fd.h"
#include "tests/common/file_facts.h"

namespace llmsvc::persist {
namespace {

namespace fs = std::filesystem;

// A pid no process has (above any pid_max): its temporary files are stale.
constexpr const char* kDead = "999999999";

class StateCleanup : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = test::make_temp_dir("llmsvc-cleanup");
    ASSERT_FALSE(tmp_.empty());
    root_ = tmp_ + "/root";
    out_ = tmp_ + "/outside";
    fs::create_directories(root_ + "/contexts");
    fs::create_directories(out_);
  }
  void TearDown() override { fs::remove_all(tmp_); }

  void file(const std::string& rel, const std::string& text = "x") {
    const fs::path p = root_ + "/" + rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void dir(const std::string& rel) { fs::create_directories(root_ + "/" + rel); }
  bool has(const std::string& rel) const { return fs::exists(fs::symlink_status(root_ + "/" + rel)); }
  // A complete context: context.json, history.log, chunks/ with a chunk file.
  void complete(const std::string& key) {
    file("contexts/" + key + "/context.json", "{}");
    file("contexts/" + key + "/history.log");
    file("contexts/" + key + "/chunks/0.kvc");
    file("contexts/" + key + "/chunks.table");
  }
  CleanupCounts scan() {
    auto d = fileio::SafeDir::open(root_);
    EXPECT_TRUE(d.ok());
    return remove_interrupted(**d);
  }

  std::string tmp_, root_, out_;
};

TEST_F(StateCleanup, RemovesStaleTemporaryFilesOfCompleteContexts) {
  const std::string live = std::to_string(::getpid());
  complete("done");
  file("contexts/done/.context.json." + std::string(kDead) + ".0.tmp");
  file("contexts/done/.chunks.table." + std::string(kDead) + ".1.tmp");
  file("contexts/done/chunks/.1.kvc." + std::string(kDead) + ".2.tmp");
  file("contexts/done/.chunks.table." + live + ".3.tmp");  // a live writer's: kept
  file(".switch-profile.json." + std::string(kDead) + ".0.tmp");
  file(".switch-profile.json." + live + ".1.tmp");
  const CleanupCounts n = scan();
  EXPECT_EQ(n.temp_files, 4u);
  EXPECT_EQ(n.unfinished, 0u);
  EXPECT_FALSE(has("contexts/done/.context.json." + std::string(kDead) + ".0.tmp"));
  EXPECT_FALSE(has("contexts/done/chunks/.1.kvc." + std::string(kDead) + ".2.tmp"));
  EXPECT_FALSE(has(".switch-profile.json." + std::string(kDead) + ".0.tmp"));
  EXPECT_TRUE(has("contexts/done/.chunks.table." + live + ".3.tmp"));
  EXPECT_TRUE(has(".switch-profile.json." + live + ".1.tmp"));
  for (const char* f : {"context.json", "history.log", "chunks/0.kvc", "chunks.table"})
    EXPECT_TRUE(has(std::string("contexts/done/") + f)) << f;
}

TEST_F(StateCleanup, RemovesUnfinishedContextsAndKeepsCompleteOnes) {
  complete("done");
  // Creations cut short: after the directories, after the history, mid context.json.
  dir("contexts/a/chunks");
  file("contexts/b/history.log");
  dir("contexts/b/chunks");
  file("contexts/c/history.log");
  file("contexts/c/.context.json." + std::string(kDead) + ".0.tmp");
  // A deletion cut short: context.json gone, some chunks left.
  file("contexts/d/chunks/3.kvc");
  file("contexts/d/chunks.table");
  // Scoped: a complete one, an empty one (a creation's first mkdir), a context named "chunks".
  complete("uid-7/ok");
  dir("contexts/uid-7/empty");
  complete("uid-8/chunks");
  dir("contexts/uid-9");  // an empty scope
  const CleanupCounts n = scan();
  EXPECT_EQ(n.unfinished, 5u);
  for (const char* gone : {"contexts/a", "contexts/b", "contexts/c", "contexts/d", "contexts/uid-7/empty"})
    EXPECT_FALSE(has(gone)) << gone;
  for (const char* kept : {"contexts/done/context.json", "contexts/uid-7/ok/context.json",
                           "contexts/uid-7/ok/chunks/0.kvc", "contexts/uid-8/chunks/context.json",
                           "contexts/uid-8/chunks/chunks/0.kvc", "contexts/uid-9"})
    EXPECT_TRUE(has(kept)) << kept;
  EXPECT_EQ(scan().total(), 0u);  // nothing more the second time
}

TEST_F(StateCleanup, KeepsCreationsInProgressAndUnknownFiles) {
  file("contexts/creating/history.log");
  dir("contexts/creating/chunks");
  fileio::UniqueFd held(::open((root_ + "/contexts/creating/history.log").c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(held.valid());
  ASSERT_EQ(::flock(held.get(), LOCK_EX), 0);  // what HistoryLog::create holds
  file("contexts/notes/readme.txt");           // not a context's file: not ours to remove
  file("contexts/mixed/history.log");
  file("contexts/mixed/readme.txt");
  file("contexts/stray-file");
  EXPECT_EQ(scan().total(), 0u);
  for (const char* kept : {"contexts/creating/history.log", "contexts/notes/readme.txt", "contexts/mixed/history.log",
                           "contexts/stray-file"})
    EXPECT_TRUE(has(kept)) << kept;
  held.reset();  // the creating process died
  EXPECT_EQ(scan().unfinished, 1u);
  EXPECT_FALSE(has("contexts/creating"));
}

TEST_F(StateCleanup, NeverFollowsLinks) {
  // What the scan would remove if it followed the links: an unfinished context and temp files.
  fs::create_directories(out_ + "/victim/chunks");
  std::ofstream(out_ + "/victim/history.log") << "precious";
  std::ofstream(out_ + "/.x." + std::string(kDead) + ".0.tmp") << "precious";
  std::ofstream(out_ + "/victim/chunks/.1.kvc." + std::string(kDead) + ".0.tmp") << "precious";
  fs::create_directory_symlink(out_, root_ + "/contexts/uid-5");            // a scope
  fs::create_directory_symlink(out_ + "/victim", root_ + "/contexts/ghost");  // a context
  complete("real");
  fs::remove_all(root_ + "/contexts/real/chunks");
  fs::create_directory_symlink(out_ + "/victim/chunks", root_ + "/contexts/real/chunks");
  // An unfinished directory whose chunks/ is a link: not only a context's own files, kept.
  file("contexts/half/history.log");
  fs::create_directory_symlink(out_ + "/victim/chunks", root_ + "/contexts/half/chunks");
  fs::create_symlink(out_ + "/.x." + std::string(kDead) + ".0.tmp",
                     root_ + "/.switch-profile.json." + std::string(kDead) + ".5.tmp");
  EXPECT_EQ(scan().total(), 0u);
  EXPECT_TRUE(fs::exists(out_ + "/victim/history.log"));
  EXPECT_TRUE(fs::exists(out_ + "/.x." + std::string(kDead) + ".0.tmp"));
  EXPECT_TRUE(fs::exists(out_ + "/victim/chunks/.1.kvc." + std::string(kDead) + ".0.tmp"));
  EXPECT_TRUE(has("contexts/uid-5"));
  EXPECT_TRUE(has("contexts/half/history.log"));
}

}  // namespace
}  // namespace llmsvc::persist
