// SPDX-License-Identifier: Apache-2.0
// HistoryLog: round trips (tokens and messages), cuts, torn tails at every byte, damaged
// records, version 1 files, locking across processes, and that a failed append leaves the file
// as it was.
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

// Messages travel with the tokens of their record; a cut takes both back, and what follows a
// cut is appended after it.
TEST(HistoryLog, MessagesAndCutsRoundTrip) {
  const std::string p = temp_path("m1.log");
  const LoggedMessage u1{1, 3, "hello"}, a1{2, 5, std::string("caf\xc3\xa9 \0 ok", 9)}, u2{1, 8, ""};
  {
    auto log = HistoryLog::create(p);
    ASSERT_TRUE(log.ok());
    EXPECT_TRUE((*log)->keeps_messages());
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{1, 2, 3}, 1, std::vector<LoggedMessage>{u1}).ok());
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{4, 5, 6, 7, 8}, 2, std::vector<LoggedMessage>{a1, u2}).ok());
  }
  HistoryLog::Contents c;
  {
    auto log = HistoryLog::open(p, 10, &c);
    ASSERT_TRUE(log.ok()) << log.status().message();
    EXPECT_TRUE(c.keeps_messages);
    EXPECT_EQ(c.tokens, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
    EXPECT_EQ(c.messages, (std::vector<LoggedMessage>{u1, a1, u2}));
    EXPECT_EQ(c.turns, 2);
    ASSERT_TRUE((*log)->truncate(3, 1, 1).ok());
    const LoggedMessage a2{2, 5, "again"};
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{9, 9}, 1, std::vector<LoggedMessage>{a2}).ok());
  }
  ASSERT_TRUE(HistoryLog::open(p, 10, &c).ok());
  EXPECT_EQ(c.tokens, (std::vector<int32_t>{1, 2, 3, 9, 9}));
  EXPECT_EQ(c.messages, (std::vector<LoggedMessage>{u1, LoggedMessage{2, 5, "again"}}));
  EXPECT_EQ(c.turns, 1);
}

// A crash inside a record of messages or a cut keeps exactly the complete records before it.
TEST(HistoryLog, TornMessageAndCutRecordsAreDropped) {
  const std::string p = temp_path("m2.log");
  std::vector<size_t> ends;
  {
    auto log = HistoryLog::create(p);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{1, 2}, 1, std::vector<LoggedMessage>{{1, 2, "a question"}}).ok());
    ends.push_back((*log)->size_bytes());
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{3}, 1, std::vector<LoggedMessage>{{2, 3, "an answer of some length"}}).ok());
    ends.push_back((*log)->size_bytes());
    ASSERT_TRUE((*log)->truncate(2, 1, 1).ok());
    ends.push_back((*log)->size_bytes());
  }
  const std::string full = slurp(p);
  for (size_t cut = ends[0]; cut < full.size(); ++cut) {
    dump(p, full.substr(0, cut));
    HistoryLog::Contents c;
    auto log = HistoryLog::open(p, 10, &c);
    ASSERT_TRUE(log.ok()) << "cut at " << cut << ": " << log.status().message();
    const size_t whole = cut < ends[1] ? 1 : 2;  // complete records
    EXPECT_EQ(c.messages.size(), whole) << cut;
    EXPECT_EQ(c.tokens.size(), whole == 1 ? 2u : 3u) << cut;
    EXPECT_EQ(c.dropped_tail_bytes, cut - ends[whole - 1]) << cut;
  }
}

// A record whose checksum holds but whose message ends past the history is a file written
// wrong, not a torn one: an error, not a silent cut.
TEST(HistoryLog, AMessageEndingPastTheHistoryIsAnError) {
  const std::string p = temp_path("m3.log");
  {
    auto log = HistoryLog::create(p);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{1, 2}, 1, std::vector<LoggedMessage>{{1, 7, "x"}}).ok());
  }
  auto log = HistoryLog::open(p, 10, nullptr);
  EXPECT_EQ(log.status().code(), Code::io);
  EXPECT_NE(log.status().message().find("out of order"), std::string::npos) << log.status().message();
}

// Files of version 1 (before messages) open, and are appended to in their own format.
TEST(HistoryLog, VersionOneFilesOpenAndKeepTheirFormat) {
  const std::string p = temp_path("v1.log");
  {
    auto log = HistoryLog::create(p);
    ASSERT_TRUE(log.ok());
  }
  std::string header = slurp(p);
  ASSERT_EQ(header.size(), 16u);
  header[8] = 1;  // the header version 1 wrote
  dump(p, header);
  {
    HistoryLog::Contents c;
    auto log = HistoryLog::open(p, 10, &c);
    ASSERT_TRUE(log.ok()) << log.status().message();
    EXPECT_FALSE(c.keeps_messages);
    EXPECT_FALSE((*log)->keeps_messages());
    ASSERT_TRUE((*log)->append(std::vector<int32_t>{4, 5}, 1).ok());
    EXPECT_EQ((*log)->append(std::vector<int32_t>{6}, 1, std::vector<LoggedMessage>{{1, 3, "x"}}).code(), Code::unsupported);
    EXPECT_EQ((*log)->truncate(1, 0, 0).code(), Code::unsupported);
  }
  const std::string v1 = slurp(p);
  EXPECT_EQ(v1.substr(16, 4), "TREC") << "a version 1 file is appended to in its own format";
  HistoryLog::Contents c;
  ASSERT_TRUE(HistoryLog::open(p, 10, &c).ok());
  EXPECT_EQ(c.tokens, (std::vector<int32_t>{4, 5}));
  EXPECT_TRUE(c.messages.empty());
  // A version past this reader's is refused, not cut.
  std::string v9 = v1;
  v9[8] = 9;
  dump(p, v9);
  EXPECT_EQ(HistoryLog::open(p, 10, nullptr).status().code(), Code::unsupported);
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
