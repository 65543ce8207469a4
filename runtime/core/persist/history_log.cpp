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

constexpr char kMagic[8] = {'L', 'L', 'M', 'S', 'V', 'C', 'H', '\0'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kRecordMagic = 0x43455254;  // "TREC"
constexpr size_t kHeaderBytes = 16;
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

// Parses a whole log image: the records up to the first incomplete or damaged one.
// Sets *valid_end to the byte offset just past the last good record.
Result<HistoryLog::Contents> parse_log(const std::string& path, const std::string& bytes, int32_t n_vocab, size_t* valid_end) {
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  if (n < kHeaderBytes || std::memcmp(b, kMagic, 8) != 0)
    return Status(Code::io, "history '" + path + "' is not a llmsvc history file");
  if (get32(b + 8) != kVersion)
    return Status(Code::unsupported, "history '" + path + "' has format version " + std::to_string(get32(b + 8)));
  HistoryLog::Contents c;
  size_t off = kHeaderBytes;
  while (n - off >= kRecordHead) {
    const uint8_t* r = b + off;
    const uint32_t count = get32(r + 4);
    if (get32(r) != kRecordMagic || count > kMaxRecordTokens) break;
    const size_t body = kRecordHead + size_t{count} * 4;
    if (n - off < body + 8) break;
    uint64_t sum;
    std::memcpy(&sum, r + body, 8);
    if (sum != XXH3_64bits(r, body)) break;
    const size_t first = c.tokens.size();
    c.tokens.resize(first + count);
    std::memcpy(c.tokens.data() + first, r + kRecordHead, size_t{count} * 4);
    for (size_t i = first; i < c.tokens.size(); ++i) {
      if (c.tokens[i] < 0 || c.tokens[i] >= n_vocab)
        return Status(Code::io, "history '" + path + "' holds token id " + std::to_string(c.tokens[i]) +
                                    " outside the model's vocabulary of " + std::to_string(n_vocab));
    }
    c.turns = static_cast<int32_t>(get32(r + 8));
    off += body + 8;
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
  uint8_t head[kHeaderBytes] = {};
  std::memcpy(head, kMagic, 8);
  put32(head + 8, kVersion);
  LLMSVC_RETURN_IF_ERROR(pwrite_all(fd, head, sizeof head, 0, path));
  if (::fdatasync(fd) != 0) return io_error("cannot sync", path, errno);
  log->size_ = kHeaderBytes;
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
  auto c = parse_log(path, *bytes, n_vocab, &end);
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

Status HistoryLog::append(std::span<const int32_t> tokens, int32_t turns) {
  if (tokens.size() > kMaxRecordTokens) return Status(Code::invalid_argument, "history: record too large");
  std::vector<uint8_t> rec(kRecordHead + tokens.size() * 4 + 8);
  put32(rec.data(), kRecordMagic);
  put32(rec.data() + 4, static_cast<uint32_t>(tokens.size()));
  put32(rec.data() + 8, static_cast<uint32_t>(turns));
  if (!tokens.empty()) std::memcpy(rec.data() + kRecordHead, tokens.data(), tokens.size() * 4);
  const size_t body = rec.size() - 8;
  const uint64_t sum = XXH3_64bits(rec.data(), body);
  std::memcpy(rec.data() + body, &sum, 8);
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

}  // namespace llmsvc::persist
