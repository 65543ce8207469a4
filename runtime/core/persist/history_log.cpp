// SPDX-License-Identifier: Apache-2.0
// HistoryLog: record encoding, torn-tail repair, durable appends.
#include "runtime/core/persist/history_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>

#include "base/file_io.h"
#include "base/safe_dir.h"

namespace llmsvc::persist {
namespace {

constexpr char kHistoryMagic[8] = {'L', 'L', 'M', 'S', 'V', 'C', 'H', '\0'};
constexpr uint32_t kVersion = 2;              // written by create()
constexpr uint32_t kRecordMagic = 0x43455254;  // "TREC"
constexpr uint32_t kRecord2Magic = 0x32435254; // "TRC2"
constexpr uint32_t kCutMagic = 0x32545543;     // "CUT2"
constexpr size_t kHistoryHeaderBytes = 16;
constexpr size_t kRecordHead = 16;
constexpr uint32_t kMaxRecordTokens = 1u << 24;
constexpr size_t kMaxFileBytes = size_t{1} << 30;

void put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }  // little-endian hosts only (checked below)
uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "history files are little-endian");

Status io_error(const std::string& what, const std::string& path, int err) {
  const std::string cause = err == ELOOP
                                ? "a symbolic link is on the path (state files are never reached through links)"
                                : fileio::errno_text(err);
  return Status(Code::io, "history: " + what + " '" + path + "': " + cause);
}

Status lock(int fd, const std::string& path) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return Status::Ok();
  if (errno == EWOULDBLOCK) return Status(Code::busy, "context history '" + path + "' is in use by another process");
  return io_error("cannot lock", path, errno);
}

Status pwrite_all(int fd, const uint8_t* p, size_t n, uint64_t off, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return io_error("cannot write", path, errno);
    p += w;
    off += static_cast<uint64_t>(w);
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

size_t padded(size_t n) { return (n + 3) & ~size_t{3}; }

// Reads one record at r (n bytes left) into c; false when it is incomplete or damaged (the torn
// tail starts there). Sets *size to the record's bytes. A record whose checksum holds but whose
// contents break the rules is an error: the file was written wrong, not torn.
Result<bool> parse_record(const std::string& path, const uint8_t* r, size_t n, uint32_t version, int32_t n_vocab,
                          HistoryLog::Contents& c, size_t* size) {
  const uint32_t magic = get32(r), count = get32(r + 4), turns = get32(r + 8), n_msgs = get32(r + 12);
  const bool v2 = version >= 2;
  if (magic == kCutMagic && v2) {
    if (n < kRecordHead + 8) return false;
    uint64_t sum;
    std::memcpy(&sum, r + kRecordHead, 8);
    if (sum != XXH3_64bits(r, kRecordHead)) return false;
    if (count > c.tokens.size() || n_msgs > c.messages.size())
      return Status(Code::io, "history '" + path + "' cuts to " + std::to_string(count) + " tokens and " +
                                  std::to_string(n_msgs) + " messages, past what it holds");
    c.tokens.resize(count);
    c.messages.resize(n_msgs);
    c.turns = static_cast<int32_t>(turns);
    *size = kRecordHead + 8;
    return true;
  }
  if ((magic != kRecordMagic && !(magic == kRecord2Magic && v2)) || count > kMaxRecordTokens) return false;
  size_t body = kRecordHead + size_t{count} * 4;
  if (n < body + 8) return false;
  // The messages' lengths are read before the checksum can vouch for them: each is bounded by
  // what is left of the file, so a torn one only ends the walk.
  struct Span { uint32_t role, end; size_t at, bytes; };
  std::vector<Span> spans;
  if (magic == kRecord2Magic) {
    if (n_msgs > kMaxRecordTokens) return false;
    for (uint32_t i = 0; i < n_msgs; ++i) {
      if (n - body < 12 + 8) return false;
      const uint32_t bytes = get32(r + body + 8);
      if (bytes > HistoryLog::kMaxMessageBytes || n - body - 12 < padded(bytes) + 8) return false;
      spans.push_back({get32(r + body), get32(r + body + 4), body + 12, bytes});
      body += 12 + padded(bytes);
    }
  }
  uint64_t sum;
  std::memcpy(&sum, r + body, 8);
  if (sum != XXH3_64bits(r, body)) return false;
  const size_t first = c.tokens.size();
  c.tokens.resize(first + count);
  if (count > 0) std::memcpy(c.tokens.data() + first, r + kRecordHead, size_t{count} * 4);  // (data() may be null)
  for (size_t i = first; i < c.tokens.size(); ++i) {
    if (c.tokens[i] < 0 || c.tokens[i] >= n_vocab)
      return Status(Code::io, "history '" + path + "' holds token id " + std::to_string(c.tokens[i]) +
                                  " outside the model's vocabulary of " + std::to_string(n_vocab));
  }
  for (const Span& m : spans) {
    const uint32_t before = c.messages.empty() ? 0 : c.messages.back().token_end;
    if (m.role > HistoryLog::kMaxRole || m.end < before || m.end > c.tokens.size())
      return Status(Code::io, "history '" + path + "' holds a message out of order (role " + std::to_string(m.role) +
                                  ", ending at token " + std::to_string(m.end) + ")");
    c.messages.push_back({m.role, m.end, std::string(reinterpret_cast<const char*>(r + m.at), m.bytes)});
  }
  c.turns = static_cast<int32_t>(turns);
  *size = body + 8;
  return true;
}

// Parses a whole log image: the records up to the first incomplete or damaged one.
// Sets *valid_end to the byte offset just past the last good record.
Result<HistoryLog::Contents> parse_log(const std::string& path, const std::string& bytes, int32_t n_vocab, size_t* valid_end,
                                       uint32_t* version = nullptr) {
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  if (n < kHistoryHeaderBytes || std::memcmp(b, kHistoryMagic, 8) != 0)
    return Status(Code::io, "history '" + path + "' is not a llmsvc history file");
  const uint32_t v = get32(b + 8);
  if (v < 1 || v > kVersion)
    return Status(Code::unsupported, "history '" + path + "' has format version " + std::to_string(v));
  if (version) *version = v;
  HistoryLog::Contents c;
  c.keeps_messages = v >= 2;
  size_t off = kHistoryHeaderBytes;
  while (n - off >= kRecordHead) {
    size_t size = 0;
    auto good = parse_record(path, b + off, n - off, v, n_vocab, c, &size);
    if (!good.ok()) return good.status();
    if (!*good) break;
    off += size;
  }
  c.dropped_tail_bytes = n - off;
  *valid_end = off;
  return c;
}

}  // namespace

Result<std::unique_ptr<HistoryLog>> HistoryLog::create(const fileio::SafeDir& dir, std::string_view rel) {
  const std::string path = dir.name_of(rel);
  const int fd = fileio::open_beneath(dir.fd(), rel, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return Status(Code::exists, "history '" + path + "' already exists");
    return io_error("cannot create", path, errno);
  }
  auto log = std::make_unique<HistoryLog>(Key{}, fd, path);
  LLMSVC_RETURN_IF_ERROR(lock(fd, path));
  uint8_t head[kHistoryHeaderBytes] = {};
  std::memcpy(head, kHistoryMagic, 8);
  put32(head + 8, kVersion);
  LLMSVC_RETURN_IF_ERROR(pwrite_all(fd, head, sizeof head, 0, path));
  if (::fdatasync(fd) != 0) return io_error("cannot sync", path, errno);
  log->size_ = kHistoryHeaderBytes;
  return log;
}

Result<HistoryLog::Contents> HistoryLog::peek(const fileio::SafeDir& dir, std::string_view rel, int32_t n_vocab) {
  const std::string path = dir.name_of(rel);
  auto bytes = dir.read_file(rel, kMaxFileBytes);
  if (!bytes.ok()) return bytes.status();
  size_t end = 0;
  return parse_log(path, *bytes, n_vocab, &end);
}

Result<std::unique_ptr<HistoryLog>> HistoryLog::open(const fileio::SafeDir& dir, std::string_view rel, int32_t n_vocab,
                                                     Contents* out) {
  const std::string path = dir.name_of(rel);
  const int fd = fileio::open_beneath(dir.fd(), rel, O_RDWR);
  if (fd < 0) {
    if (errno == ENOENT) return Status(Code::not_found, "no history '" + path + "'");
    return io_error("cannot open", path, errno);
  }
  auto log = std::make_unique<HistoryLog>(Key{}, fd, path);
  LLMSVC_RETURN_IF_ERROR(lock(fd, path));
  // Read through the locked descriptor: the file checked is the file appended to.
  auto bytes = fileio::read_all(fd, kMaxFileBytes, path);
  if (!bytes.ok()) return bytes.status();
  size_t end = 0;
  auto c = parse_log(path, *bytes, n_vocab, &end, &log->version_);
  if (!c.ok()) return c.status();
  if (end < bytes->size()) {
    // A record that did not complete: its call was never acknowledged.
    if (::ftruncate(fd, static_cast<off_t>(end)) != 0 || ::fdatasync(fd) != 0) return io_error("cannot repair", path, errno);
  }
  log->size_ = end;
  if (out) *out = std::move(c).value();
  return log;
}

namespace {

// A caller's own path: its directory as the anchor (trusted), named by its path.
Result<fileio::SafeDirRef> parent_of(const std::string& path) {
  const std::string dir = fileio::parent_directory(path);
  auto d = fileio::SafeDir::open(dir, dir);
  if (!d.ok()) return Status(d.status().code() == Code::not_found ? Code::not_found : Code::io,
                             "history '" + path + "': " + d.status().message());
  return d;
}

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

}  // namespace

Result<std::unique_ptr<HistoryLog>> HistoryLog::create(const std::string& path) {
  auto d = parent_of(path);
  if (!d.ok()) return d.status();
  return create(**d, base_name(path));
}

Result<std::unique_ptr<HistoryLog>> HistoryLog::open(const std::string& path, int32_t n_vocab, Contents* out) {
  auto d = parent_of(path);
  if (!d.ok()) return d.status();
  return open(**d, base_name(path), n_vocab, out);
}

Result<HistoryLog::Contents> HistoryLog::peek(const std::string& path, int32_t n_vocab) {
  auto d = parent_of(path);
  if (!d.ok()) return d.status();
  return peek(**d, base_name(path), n_vocab);
}

HistoryLog::~HistoryLog() {
  if (fd_ >= 0) ::close(fd_);  // also releases the lock
}

Status HistoryLog::write_record(const std::vector<uint8_t>& rec) {
  Status s = pwrite_all(fd_, rec.data(), rec.size(), size_, path_);
  if (s.ok() && ::fdatasync(fd_) != 0) s = io_error("cannot sync", path_, errno);
  if (!s.ok()) {
    // Leave the file as it was: a later open must not see half a record as data.
    if (::ftruncate(fd_, static_cast<off_t>(size_)) == 0) (void)::fdatasync(fd_);
    return s;
  }
  size_ += rec.size();
  return Status::Ok();
}

namespace {

void seal(std::vector<uint8_t>& rec) {
  const size_t body = rec.size();
  const uint64_t sum = XXH3_64bits(rec.data(), body);
  rec.resize(body + 8);
  std::memcpy(rec.data() + body, &sum, 8);
}

}  // namespace

Status HistoryLog::append(std::span<const int32_t> tokens, int32_t turns, std::span<const LoggedMessage> messages) {
  if (tokens.size() > kMaxRecordTokens || messages.size() > kMaxRecordTokens)
    return Status(Code::invalid_argument, "history: record too large");
  if (!messages.empty() && !keeps_messages())
    return Status(Code::unsupported, "history '" + path_ + "' is of format version 1, which keeps no messages");
  std::vector<uint8_t> rec(kRecordHead + tokens.size() * 4);
  put32(rec.data(), keeps_messages() ? kRecord2Magic : kRecordMagic);
  put32(rec.data() + 4, static_cast<uint32_t>(tokens.size()));
  put32(rec.data() + 8, static_cast<uint32_t>(turns));
  put32(rec.data() + 12, keeps_messages() ? static_cast<uint32_t>(messages.size()) : 0);
  if (!tokens.empty()) std::memcpy(rec.data() + kRecordHead, tokens.data(), tokens.size() * 4);
  for (const LoggedMessage& m : messages) {
    if (m.content.size() > kMaxMessageBytes || m.role > kMaxRole)
      return Status(Code::invalid_argument, "history: a message too large or of no known role");
    const size_t at = rec.size();
    rec.resize(at + 12 + padded(m.content.size()), 0);
    put32(rec.data() + at, m.role);
    put32(rec.data() + at + 4, m.token_end);
    put32(rec.data() + at + 8, static_cast<uint32_t>(m.content.size()));
    if (!m.content.empty()) std::memcpy(rec.data() + at + 12, m.content.data(), m.content.size());
  }
  seal(rec);
  return write_record(rec);
}

Status HistoryLog::truncate(uint32_t n_tokens, int32_t turns, uint32_t n_messages) {
  if (!keeps_messages())
    return Status(Code::unsupported, "history '" + path_ + "' is of format version 1, which cannot be cut back");
  std::vector<uint8_t> rec(kRecordHead);
  put32(rec.data(), kCutMagic);
  put32(rec.data() + 4, n_tokens);
  put32(rec.data() + 8, static_cast<uint32_t>(turns));
  put32(rec.data() + 12, n_messages);
  seal(rec);
  return write_record(rec);
}

}  // namespace llmsvc::persist
