// SPDX-License-Identifier: Apache-2.0
// HistoryLog: round trips, torn tails at every byte, damaged records, locking across
// processes, and that a failed append leaves the file as it was.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "base/file_io.h"
#include "runtime/core/persist/history_log.h"

namespace llmsvc::persist {
namespace {

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("LLMSVC_STATE_DIR");  // private per test process (test_main)
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string slurp(const std::string& p) { return fileio::read_file(p, 1 << 20).value(); }
void dump(const std::string& p, const std::string& bytes) { std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes; }

TEST(HistoryLog, RoundTrip) {
  const std::string p = temp_path("h1.log");
  {
    auto log = HistoryLog::create(p);
    ASSERT_TRUE(log.ok()) << log.status().message();
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{1, 2, 3}, 1).ok());
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{}, 1).ok());
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{4, 5}, 2).ok());
  }
  HistoryLog::Contents c;
  auto log = HistoryLog::open(p, 10, &c);
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ(c.tokens, (std::vector<int32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(c.turns, 2);
  EXPECT_EQ(c.dropped_tail_bytes, 0u);
  EXPECT_EQ(HistoryLog::create(p).status().code(), Code::exists);
}

// A crash can cut the file anywhere inside the last record: every prefix opens, keeps
// exactly the complete records, and is repaired so that appending continues cleanly.
TEST(HistoryLog, EveryTruncationKeepsCompleteRecords) {
  const std::string p = temp_path("h2.log");
  size_t after_first = 0;
  {
    auto log = HistoryLog::create(p);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{7, 8}, 1).ok());
    after_first = (*log)->size_bytes();
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{9, 10, 11}, 2).ok());
  }
  const std::string full = slurp(p);
  for (size_t cut = after_first; cut < full.size(); ++cut) {
    dump(p, full.substr(0, cut));
    HistoryLog::Contents c;
    auto log = HistoryLog::open(p, 100, &c);
    ASSERT_TRUE(log.ok()) << cut << ": " << log.status().message();
    EXPECT_EQ(c.tokens, (std::vector<int32_t>{7, 8})) << cut;
    EXPECT_EQ(c.turns, 1);
    EXPECT_EQ(c.dropped_tail_bytes, cut - after_first);
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{12}, 2).ok());
    log->reset();
    auto again = HistoryLog::open(p, 100, &c);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(c.tokens, (std::vector<int32_t>{7, 8, 12})) << cut;
    EXPECT_EQ(c.dropped_tail_bytes, 0u);
  }
}

// A flipped bit in the last record fails its checksum: that record is not trusted.
TEST(HistoryLog, DamagedLastRecordIsDropped) {
  const std::string p = temp_path("h3.log");
  size_t after_first = 0;
  {
    auto log = HistoryLog::create(p);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{1}, 1).ok());
    after_first = (*log)->size_bytes();
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{2, 3}, 2).ok());
  }
  const std::string full = slurp(p);
  for (size_t byte = after_first; byte < full.size(); ++byte) {
    std::string bad = full;
    bad[byte] = static_cast<char>(bad[byte] ^ 0x10);
    dump(p, bad);
    HistoryLog::Contents c;
    auto log = HistoryLog::open(p, 100, &c);
    ASSERT_TRUE(log.ok()) << byte;
    EXPECT_EQ(c.tokens, (std::vector<int32_t>{1})) << byte;
  }
}

TEST(HistoryLog, RejectsForeignFilesAndBadTokens) {
  const std::string p = temp_path("h4.log");
  dump(p, "not a history file at all");
  EXPECT_EQ(HistoryLog::open(p, 10, nullptr).status().code(), Code::io);
  EXPECT_EQ(HistoryLog::open(temp_path("absent.log"), 10, nullptr).status().code(), Code::not_found);
  const std::string q = temp_path("h5.log");
  {
    auto log = HistoryLog::create(q);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{5, 50}, 1).ok());
  }
  auto small_vocab = HistoryLog::open(q, 20, nullptr);
  EXPECT_EQ(small_vocab.status().code(), Code::io);
  EXPECT_NE(small_vocab.status().message().find("vocabulary"), std::string::npos);
}

// Two processes never hold one context: the second open is refused with busy.
TEST(HistoryLog, LockedAgainstOtherProcesses) {
  const std::string p = temp_path("h6.log");
  auto log = HistoryLog::create(p);
  ASSERT_TRUE(log.ok());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto other = HistoryLog::open(p, 10, nullptr);
    _exit(!other.ok() && other.status().code() == Code::busy ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // A reader that only peeks is not blocked.
  EXPECT_TRUE(HistoryLog::peek(p, 10).ok());
}

}  // namespace
}  // namespace llmsvc::persist
