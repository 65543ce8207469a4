// SPDX-License-Identifier: Apache-2.0
// Persistent files reached through the state root's SafeDir: a symbolic link planted as a
// history log, a context.json, a chunk table, a context directory or a scope is refused with
// Code::io naming the relative path; the file it points to is never appended to, truncated,
// replaced or read.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/safe_dir.h"
#include "runtime/core/persist/chunk_table.h"
#include "runtime/core/persist/context_meta.h"
#include "runtime/core/persist/history_log.h"
#include "runtime/core/persist/state_dir.h"
#include "tests/common/file_facts.h"

namespace llmsvc::persist {
namespace {

namespace fs = std::filesystem;

using test::slurp;

class StateLinks : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    fileio::force_openat2_fallback_for_testing(GetParam());
    tmp_ = test::make_temp_dir("llmsvc-state-links");
    ASSERT_FALSE(tmp_.empty());
    root_ = tmp_ + "/root";
    out_ = tmp_ + "/outside";
    fs::create_directories(root_ + "/contexts/a/chunks");
    fs::create_directories(out_ + "/ctx");
    // A history with a torn tail: opening it for writing would cut the tail off.
    {
      auto log = HistoryLog::create(out_ + "/ctx/history.log");
      ASSERT_TRUE(log.ok()) << log.status().message();
      const int32_t toks[3] = {1, 2, 3};
      ASSERT_TRUE((*log)->append(toks, 1).ok());
    }
    std::ofstream(out_ + "/ctx/history.log", std::ios::app | std::ios::binary) << "torn";
    std::ofstream(out_ + "/ctx/context.json") << "outside";
    std::ofstream(out_ + "/ctx/chunks.table") << "outside";
    history_before_ = slurp(out_ + "/ctx/history.log");
    auto d = fileio::SafeDir::open(root_);
    ASSERT_TRUE(d.ok());
    dir_ = std::move(d).value();
  }
  void TearDown() override {
    fileio::force_openat2_fallback_for_testing(false);
    fs::remove_all(tmp_);
  }
  void expect_refused(const Status& s, const std::string& rel) const {
    EXPECT_EQ(s.code(), Code::io) << s.message();
    EXPECT_NE(s.message().find(rel), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("symbolic link"), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find(tmp_), std::string::npos) << s.message();
  }
  void expect_outside_untouched() const {
    EXPECT_EQ(slurp(out_ + "/ctx/history.log"), history_before_);
    EXPECT_EQ(slurp(out_ + "/ctx/context.json"), "outside");
    EXPECT_EQ(slurp(out_ + "/ctx/chunks.table"), "outside");
    EXPECT_EQ(std::distance(fs::directory_iterator(out_ + "/ctx"), fs::directory_iterator()), 3);
  }

  std::string tmp_, root_, out_, history_before_;
  fileio::SafeDirRef dir_;
};

TEST_P(StateLinks, PlantedFilesAreRefused) {
  fs::create_symlink(out_ + "/ctx/history.log", root_ + "/contexts/a/history.log");
  fs::create_symlink(out_ + "/ctx/context.json", root_ + "/contexts/a/context.json");
  fs::create_symlink(out_ + "/ctx/chunks.table", root_ + "/contexts/a/chunks.table");
  HistoryLog::Contents c;
  expect_refused(HistoryLog::open(*dir_, layout::history("a"), 100, &c).status(), layout::history("a"));
  expect_refused(HistoryLog::peek(*dir_, layout::history("a"), 100).status(), layout::history("a"));
  EXPECT_FALSE(HistoryLog::create(*dir_, layout::history("a")).ok());
  expect_refused(read_context_meta(*dir_, layout::meta("a")).status(), layout::meta("a"));
  ContextMeta m;
  m.id = "a";
  expect_refused(write_context_meta(*dir_, layout::meta("a"), m), layout::meta("a"));
  expect_refused(read_chunk_table(*dir_, layout::chunk_table("a")).status(), layout::chunk_table("a"));
  // A context.json that is a link is no context.
  EXPECT_FALSE(StateDir(root_, dir_).has("a"));
  expect_outside_untouched();
}

TEST_P(StateLinks, PlantedDirectoriesAreRefused) {
  // The context directory, and a scope, replaced by links to a context-like directory.
  fs::create_directory_symlink(out_ + "/ctx", root_ + "/contexts/b");
  fs::create_directories(out_ + "/scope");
  fs::create_directory_symlink(out_ + "/ctx", out_ + "/scope/c");
  fs::create_directory_symlink(out_ + "/scope", root_ + "/contexts/uid-5");
  HistoryLog::Contents c;
  expect_refused(HistoryLog::open(*dir_, layout::history("b"), 100, &c).status(), layout::history("b"));
  expect_refused(HistoryLog::open(*dir_, layout::history("uid-5/c"), 100, &c).status(), layout::history("uid-5/c"));
  expect_refused(HistoryLog::create(*dir_, layout::history("uid-5/new")).status(), layout::history("uid-5/new"));
  expect_refused(dir_->make_dirs(layout::chunks_dir("uid-5/new")), "contexts/uid-5");
  expect_refused(read_context_meta(*dir_, layout::meta("uid-5/c")).status(), layout::meta("uid-5/c"));
  StateDir state(root_, dir_);
  auto scoped = state.list("uid-5");
  ASSERT_FALSE(scoped.ok());
  expect_refused(scoped.status(), "contexts/uid-5");
  EXPECT_FALSE(state.has("b"));
  EXPECT_FALSE(state.has("uid-5/c"));
  auto all = state.list();
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_TRUE(all->empty());  // "a" has no context.json; "b" is a link
  // Deleting what a link names removes the link, never what it points to.
  EXPECT_TRUE(dir_->remove_tree(layout::context_dir("b")).ok());
  expect_refused(dir_->remove_tree(layout::context_dir("uid-5/c")), "contexts/uid-5/c");
  expect_outside_untouched();
  EXPECT_TRUE(fs::exists(out_ + "/scope/c"));
}

TEST_P(StateLinks, RealFilesWork) {
  auto log = HistoryLog::create(*dir_, layout::history("a"));
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ((*log)->path(), "contexts/a/history.log");  // what messages show
  const int32_t toks[2] = {4, 5};
  ASSERT_TRUE((*log)->append(toks, 1).ok());
  log->reset();
  HistoryLog::Contents c;
  ASSERT_TRUE(HistoryLog::open(*dir_, layout::history("a"), 100, &c).ok());
  EXPECT_EQ(c.tokens, (std::vector<int32_t>{4, 5}));
  ContextMeta m;
  m.id = "a";
  ASSERT_TRUE(write_context_meta(*dir_, layout::meta("a"), m).ok());
  auto back = read_context_meta(*dir_, layout::meta("a"));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->id, "a");
  EXPECT_TRUE(StateDir(root_, dir_).has("a"));
}

INSTANTIATE_TEST_SUITE_P(Resolution, StateLinks, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Walk" : "Openat2"; });

}  // namespace
}  // namespace llmsvc::persist
