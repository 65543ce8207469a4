// SPDX-License-Identifier: Apache-2.0
// HistoryLog: a context's token history on storage — the source of truth every KV chunk
// is recomputed from. Append-only records, each carrying its own checksum, made durable
// (fdatasync) before append() returns, so an acknowledged call is never lost. A torn
// record at the end (a crash mid-append) is an unacknowledged call: open() cuts it off.
//
// The file is locked (flock, exclusive) while open, so two processes never write one
// context; the second gets Code::busy.
//
// Layout (little-endian): header "LLMSVCH\0", u32 version, u32 0; then records, each ending
// in the u64 XXH3-64 of everything before it in the record:
//   'TREC' u32 n_tokens, u32 turns (completed user turns after this record), u32 0,
//          i32 tokens[n_tokens]                                         (versions 1 and 2)
//   'TRC2' u32 n_tokens, u32 turns, u32 n_messages, i32 tokens[n_tokens], then per message
//          u32 role, u32 token_end, u32 n_bytes, bytes padded to 4       (version 2)
//   'CUT2' u32 n_tokens, u32 turns, u32 n_messages: the history cut back to its first
//          n_tokens tokens and n_messages messages                      (version 2)
// A message's token_end is the history's length after it: one record holds a call's tokens and
// its messages together, so a crash never leaves one without the other. Version 1 files (no
// messages) are read and appended to as they are; new files are version 2, which a reader of
// version 1 refuses (it would cut the records it does not know as a torn tail).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/safe_dir.h"
#include "base/status.h"

namespace llmsvc::persist {

// One message of a conversation as the log keeps it; role is the engine's (MessageRole).
struct LoggedMessage {
  uint32_t role = 0;
  uint32_t token_end = 0;  // the history's length in tokens after this message
  std::string content;
  bool operator==(const LoggedMessage&) const = default;
};

class HistoryLog {
 public:
  static constexpr uint32_t kMaxRole = 3;
  static constexpr size_t kMaxMessageBytes = size_t{16} << 20;

  struct Contents {
    std::vector<int32_t> tokens;
    int32_t turns = 0;
    std::vector<LoggedMessage> messages;
    bool keeps_messages = false;      // a version 2 file (version 1 had no messages)
    uint64_t dropped_tail_bytes = 0;  // bytes of a torn record cut off at open
  };

  // The log `rel` below `dir` (a context's, below the state root): opened beneath it, so a
  // link planted as the log or on its path is refused (Code::io), never appended to,
  // truncated or read. Messages name it dir.name_of(rel).
  //
  // Creates a new, empty log (Code::exists if the file is there).
  static Result<std::unique_ptr<HistoryLog>> create(const fileio::SafeDir& dir, std::string_view rel);
  // Opens an existing log, repairs a torn tail and returns what it holds. Token ids must
  // be < n_vocab. Code::not_found when absent, busy when another process holds it.
  static Result<std::unique_ptr<HistoryLog>> open(const fileio::SafeDir& dir, std::string_view rel, int32_t n_vocab,
                                                  Contents* out);
  // Reads a log without locking or repairing it (for listing while another process may
  // hold it); a torn tail is ignored.
  static Result<Contents> peek(const fileio::SafeDir& dir, std::string_view rel, int32_t n_vocab);
  // The same by a path of the caller's own (tools, tests): its directory is trusted as it is.
  static Result<std::unique_ptr<HistoryLog>> create(const std::string& path);
  static Result<std::unique_ptr<HistoryLog>> open(const std::string& path, int32_t n_vocab, Contents* out);
  static Result<Contents> peek(const std::string& path, int32_t n_vocab);
  ~HistoryLog();
  HistoryLog(const HistoryLog&) = delete;
  HistoryLog& operator=(const HistoryLog&) = delete;

  // Appends one record and makes it durable. On failure (disk full, ...) the file is cut
  // back to what it held before and Code::io says why. `messages` end within the history
  // after the record; a version 1 file takes none (Code::unsupported).
  Status append(std::span<const int32_t> tokens, int32_t turns, std::span<const LoggedMessage> messages = {});
  // Cuts the history back to its first n_tokens tokens and n_messages messages (a record
  // saying so, made durable). Version 2 files only.
  Status truncate(uint32_t n_tokens, int32_t turns, uint32_t n_messages);
  // Whether the file keeps messages (version 2).
  bool keeps_messages() const { return version_ >= 2; }

  uint64_t size_bytes() const { return size_; }
  // As messages name it.
  const std::string& path() const { return path_; }

 private:
  struct Key {};  // only create() and open() construct
 public:
  HistoryLog(Key, int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

 private:
  Status write_record(const std::vector<uint8_t>& rec);

  int fd_;
  uint32_t version_ = 2;
  std::string path_;
  uint64_t size_ = 0;
};

}  // namespace llmsvc::persist
