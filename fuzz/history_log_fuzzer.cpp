// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for context history files (runtime/core/persist/history_log.h).
//
// Mode 0 (first byte even): the rest is a history file as found on storage. Reading it must
// either fail with Code::io / Code::unsupported, or give contents that keep the file's rules:
// token ids inside the vocabulary, messages in order, each ending within the history.
//
// Mode 1 (first byte odd): the rest is a script of appends (tokens and messages) and cuts,
// written through HistoryLog and then torn at a scripted byte, as a crash would leave it.
// Opening must give exactly the state after the last record that lies wholly before the tear.
// Random bytes rarely keep a checksum valid, so mode 1 is what reaches the records' contents.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/core/persist/history_log.h"

namespace {

using namespace llmsvc;
using namespace llmsvc::persist;

constexpr int32_t kVocab = 1000;

void check(bool ok) {
  if (!ok) std::abort();
}

const std::string& scratch() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/history-fuzz-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    check(d != nullptr);
    return std::string(d);
  }();
  return dir;
}

void check_rules(const HistoryLog::Contents& c) {
  uint32_t end = 0;
  for (int32_t t : c.tokens) check(t >= 0 && t < kVocab);
  for (const LoggedMessage& m : c.messages) {
    check(m.role <= HistoryLog::kMaxRole && m.token_end >= end && m.token_end <= c.tokens.size());
    end = m.token_end;
  }
}

void raw_file(const uint8_t* data, size_t size) {
  const std::string path = scratch() + "/raw.log";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                 static_cast<std::streamsize>(size));
  auto c = HistoryLog::peek(path, kVocab);
  if (!c.ok()) {
    check(c.status().code() == Code::io || c.status().code() == Code::unsupported);
    return;
  }
  check_rules(*c);
}

// Reads the script: each step is an append (tokens, then messages ending within the history)
// or a cut back to an earlier state.
struct Script {
  const uint8_t* p;
  size_t left;
  uint8_t take() {
    if (left == 0) return 0;
    --left;
    return *p++;
  }
};

void scripted(const uint8_t* data, size_t size) {
  Script s{data, size};
  const std::string path = scratch() + "/scripted.log";
  ::unlink(path.c_str());
  HistoryLog::Contents state;  // what the file holds after each record
  state.keeps_messages = true;
  std::vector<std::pair<size_t, HistoryLog::Contents>> after;  // file size -> state
  {
    auto log = HistoryLog::create(path);
    check(log.ok());
    after.push_back({(*log)->size_bytes(), state});
    for (int step = 0; step < 16 && s.left > 1; ++step) {
      const uint8_t op = s.take();
      if (op % 4 == 3) {  // a cut
        const uint32_t n_tokens = state.tokens.empty() ? 0 : s.take() % (state.tokens.size() + 1);
        uint32_t n_msgs = 0;
        while (n_msgs < state.messages.size() && state.messages[n_msgs].token_end <= n_tokens) ++n_msgs;
        const int32_t turns = s.take() % 8;
        check((*log)->truncate(n_tokens, turns, n_msgs).ok());
        state.tokens.resize(n_tokens);
        state.messages.resize(n_msgs);
        state.turns = turns;
      } else {
        std::vector<int32_t> tokens(s.take() % 24);
        for (int32_t& t : tokens) t = (s.take() * 7 + 3) % kVocab;
        std::vector<LoggedMessage> msgs(s.take() % 4);
        uint32_t end = state.messages.empty() ? 0 : state.messages.back().token_end;
        const uint32_t total = static_cast<uint32_t>(state.tokens.size() + tokens.size());
        for (LoggedMessage& m : msgs) {
          m.role = s.take() % (HistoryLog::kMaxRole + 1);
          end = std::min<uint32_t>(total, end + s.take() % 8);
          m.token_end = end;
          m.content.assign(s.take() % 40, static_cast<char>(s.take()));
        }
        const int32_t turns = s.take() % 8;
        check((*log)->append(tokens, turns, msgs).ok());
        state.tokens.insert(state.tokens.end(), tokens.begin(), tokens.end());
        state.messages.insert(state.messages.end(), msgs.begin(), msgs.end());
        state.turns = turns;
      }
      after.push_back({(*log)->size_bytes(), state});
    }
  }
  // Tear the file at a scripted byte (past the header), as a crash mid-append would.
  struct stat st {};
  check(::stat(path.c_str(), &st) == 0);
  const size_t full = static_cast<size_t>(st.st_size);
  const size_t cut = after.front().first + (s.take() | s.take() << 8) % (full - after.front().first + 1);
  check(::truncate(path.c_str(), static_cast<off_t>(cut)) == 0);
  HistoryLog::Contents got;
  auto reopened = HistoryLog::open(path, kVocab, &got);
  check(reopened.ok());
  const HistoryLog::Contents* want = &after.front().second;
  for (const auto& [bytes, contents] : after)
    if (bytes <= cut) want = &contents;
  check(got.tokens == want->tokens && got.messages == want->messages && got.turns == want->turns);
  check_rules(got);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    raw_file(data + 1, size - 1);
  } else {
    scripted(data + 1, size - 1);
  }
  return 0;
}
