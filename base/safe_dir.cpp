// SPDX-License-Identifier: Apache-2.0
// SafeDir: openat2 where the kernel has it, a component walk with O_NOFOLLOW where not, and
// every mutation through the parent directory's descriptor.
#include "base/safe_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/file_io.h"

#ifndef SYS_openat2
#define SYS_openat2 437  // the same number on every architecture
#endif

namespace llmsvc::fileio {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY;
// Intermediate components: search permission is all a path needs, and O_PATH asks no more.
constexpr int kWalkFlags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

std::atomic<bool> g_force_fallback{false};

bool probe_openat2() {
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS;  // the RESOLVE_ flags came with the call itself
  const long fd = ::syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof how);
  if (fd < 0) return false;  // ENOSYS (before 5.6), EPERM / ENOSYS from a seccomp filter, E2BIG
  ::close(static_cast<int>(fd));
  return true;
}

bool use_openat2() {
  static const bool available = probe_openat2();
  return available && !g_force_fallback.load(std::memory_order_relaxed);
}

// The components of a relative path, "" and "." skipped; false for an absolute path or "..".
bool split(std::string_view rel, std::vector<std::string_view>& out) {
  if (!rel.empty() && rel.front() == '/') return false;
  size_t pos = 0;
  while (pos <= rel.size()) {
    size_t slash = rel.find('/', pos);
    if (slash == std::string_view::npos) slash = rel.size();
    const std::string_view c = rel.substr(pos, slash - pos);
    if (c == "..") return false;
    if (!c.empty() && c != ".") out.push_back(c);
    pos = slash + 1;
  }
  return true;
}

// After ENOTDIR or ELOOP on `name` in `dirfd`: ELOOP if it is a link (O_DIRECTORY reports
// a link as ENOTDIR), else the error as it was.
int link_errno(int dirfd, const std::string& name, int err) {
  struct stat st {};
  if ((err == ENOTDIR || err == ELOOP) && ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISLNK(st.st_mode))
    return ELOOP;
  return err;
}

// ELOOP if a component of `parts` below `dirfd` is a link (looked at, never followed),
// else `err`.
int link_on_path(int dirfd, const std::vector<std::string_view>& parts, int err) {
  UniqueFd cur;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int at = cur.valid() ? cur.get() : dirfd;
    const std::string name(parts[i]);
    struct stat st {};
    if (::fstatat(at, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return err;
    if (S_ISLNK(st.st_mode)) return ELOOP;
    if (i + 1 == parts.size() || !S_ISDIR(st.st_mode)) return err;
    cur.reset(::openat(at, name.c_str(), kWalkFlags));
    if (!cur.valid()) return err;
  }
  return err;
}

// One component in `dirfd`, never through a link.
int open_one(int dirfd, const std::string& name, int flags, mode_t mode) {
  for (;;) {
    const int fd = ::openat(dirfd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0) return fd;
    if (errno == EINTR) continue;
    errno = link_errno(dirfd, name, errno);
    return -1;
  }
}

int open_walk(int dirfd, std::string_view rel, int flags, mode_t mode) {
  std::vector<std::string_view> parts;
  if (!split(rel, parts)) {
    errno = EXDEV;
    return -1;
  }
  if (parts.empty()) return open_one(dirfd, ".", flags, mode);
  UniqueFd cur;  // the directory reached so far (dirfd itself until the first step)
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const int next = open_one(cur.valid() ? cur.get() : dirfd, std::string(parts[i]), kWalkFlags, 0);
    if (next < 0) return -1;
    cur.reset(next);
  }
  return open_one(cur.valid() ? cur.get() : dirfd, std::string(parts.back()), flags, mode);
}

int open_openat2(int dirfd, std::string_view rel, int flags, mode_t mode) {
  std::vector<std::string_view> parts;
  if (!split(rel, parts)) {  // RESOLVE_BENEATH would refuse these too; the message says why
    errno = EXDEV;
    return -1;
  }
  const std::string path(rel.empty() ? "." : rel);
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_NOFOLLOW | O_CLOEXEC);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? mode : 0;  // openat2 refuses a stray mode
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
  for (int tries = 0;; ++tries) {
    const long fd = ::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    // EAGAIN: a rename raced the walk and the kernel could not rule out an escape; retry.
    if (errno == EINTR || (errno == EAGAIN && tries < 8)) continue;
    // A link met where a directory was needed is ENOTDIR (O_DIRECTORY, or a link as an
    // intermediate component): say ELOOP when a link is what stopped it.
    if (errno == ENOTDIR) errno = link_on_path(dirfd, parts, ENOTDIR);
    return -1;
  }
}

std::string cause(int err) {
  switch (err) {
    case ELOOP: return "a symbolic link is on the path (state files are never reached through links)";
    case EXDEV: return "the path leaves its directory (absolute, or '..')";
    default: return errno_text(err);
  }
}

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};
using DirPtr = std::unique_ptr<DIR, DirCloser>;

// The names in the open directory `fd` (taken over), but . and ..
Result<std::vector<std::string>> read_names(UniqueFd fd, const std::string& name) {
  DirPtr d(::fdopendir(fd.get()));
  if (!d) return io_status(errno, "list " + name);
  (void)fd.release();  // the DIR owns it now
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(d.get());
    if (e == nullptr) break;
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  if (errno != 0) return io_status(errno, "list " + name);
  return names;
}

// rm -r of the entry `name` in the directory `parent`, links removed as links.
Status remove_entry(int parent, const std::string& name, const std::string& shown) {
  struct stat st {};
  if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? Status::Ok() : io_status(errno, "stat " + shown);
  if (S_ISDIR(st.st_mode)) {
    // O_NOFOLLOW: a directory swapped for a link after the fstatat is refused, not followed.
    UniqueFd dir(open_one(parent, name, kDirFlags, 0));
    if (!dir.valid()) return Status(Code::io, "remove " + shown + ": " + cause(errno));
    UniqueFd listing(::dup(dir.get()));
    if (!listing.valid()) return io_status(errno, "remove " + shown);
    auto names = read_names(std::move(listing), shown);
    if (!names.ok()) return names.status();
    for (const std::string& n : *names) LLMSVC_RETURN_IF_ERROR(remove_entry(dir.get(), n, shown + "/" + n));
    if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
      return io_status(errno, "remove directory " + shown);
  } else if (::unlinkat(parent, name.c_str(), 0) != 0 && errno != ENOENT) {
    return io_status(errno, "remove " + shown);
  }
  return Status::Ok();
}

}  // namespace

int open_beneath(int dirfd, std::string_view rel, int flags, mode_t mode) {
  return use_openat2() ? open_openat2(dirfd, rel, flags, mode) : open_walk(dirfd, rel, flags, mode);
}

bool openat2_in_use() { return use_openat2(); }

void force_openat2_fallback_for_testing(bool force) { g_force_fallback.store(force, std::memory_order_relaxed); }

Result<SafeDirRef> SafeDir::open(const std::string& path, std::string name) {
  UniqueFd fd(::open(path.c_str(), kDirFlags | O_CLOEXEC));
  if (!fd.valid()) {
    const std::string shown = name.empty() ? path : name;
    if (errno == ENOENT) return Status(Code::not_found, "no directory '" + shown + "'");
    return io_status(errno, "open directory " + shown);
  }
  return std::make_shared<const SafeDir>(Private{}, std::move(fd), std::move(name));
}

std::string SafeDir::name_of(std::string_view rel) const {
  if (name_.empty()) return std::string(rel);
  if (rel.empty() || rel == ".") return name_;
  std::string out = name_;
  out.push_back('/');
  out.append(rel);
  return out;
}

Status SafeDir::error(int err, std::string_view what, std::string_view rel) const {
  const std::string msg = std::string(what) + " " + name_of(rel) + ": " + cause(err);
  return Status(err == ENOENT ? Code::not_found : Code::io, msg);
}

Result<SafeDirRef> SafeDir::open_dir(std::string_view rel) const {
  UniqueFd fd(open_beneath(fd_.get(), rel, kDirFlags));
  if (!fd.valid()) return error(errno, "open directory", rel);
  return std::make_shared<const SafeDir>(Private{}, std::move(fd), name_of(rel));
}

Result<UniqueFd> SafeDir::open_file(std::string_view rel, int flags, mode_t mode) const {
  UniqueFd fd(open_beneath(fd_.get(), rel, flags, mode));
  if (!fd.valid()) return error(errno, "open", rel);
  return fd;
}

Result<SafeDir::Parent> SafeDir::parent_of(std::string_view rel, bool writable) const {
  std::vector<std::string_view> parts;
  if (!split(rel, parts)) return error(EXDEV, "resolve", rel);
  if (parts.empty()) {
    std::string msg = name_of(rel);  // (built in place: GCC 12 warns falsely on "'" + temporary)
    msg.insert(0, 1, '\'').append("' names no entry");
    return Status(Code::invalid_argument, std::move(msg));
  }
  Parent p;
  p.last = std::string(parts.back());
  if (parts.size() == 1) {
    p.fd = fd_.get();
    return p;
  }
  std::string dir(parts.front());
  for (size_t i = 1; i + 1 < parts.size(); ++i) dir.append("/").append(parts[i]);
  p.owned.reset(open_beneath(fd_.get(), dir, writable ? kDirFlags : (O_PATH | O_DIRECTORY)));
  if (!p.owned.valid()) return error(errno, "open", rel);  // the whole path: what the caller asked for
  p.fd = p.owned.get();
  return p;
}

Status SafeDir::make_dirs(std::string_view rel) const {
  std::vector<std::string_view> parts;
  if (!split(rel, parts)) return error(EXDEV, "create directory", rel);
  UniqueFd cur;
  std::string done;
  for (std::string_view part : parts) {
    const std::string name(part);
    if (!done.empty()) done.push_back('/');
    done.append(name);
    const int at = cur.valid() ? cur.get() : fd_.get();
    if (::mkdirat(at, name.c_str(), 0700) != 0 && errno != EEXIST) return error(errno, "create directory", done);
    // What is there now must be a directory reached without a link (a planted link, or a
    // file, is refused here rather than written through later).
    const int next = open_one(at, name, kWalkFlags, 0);
    if (next < 0) return error(errno, "create directory", done);
    cur.reset(next);
  }
  return Status::Ok();
}

Status SafeDir::unlink(std::string_view rel) const {
  auto p = parent_of(rel, false);
  if (!p.ok()) return p.status();
  struct stat st {};
  if (::fstatat(p->fd, p->last.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return error(errno, "remove", rel);
  if (S_ISLNK(st.st_mode)) return error(ELOOP, "remove", rel);
  if (S_ISDIR(st.st_mode)) return error(EISDIR, "remove", rel);
  if (::unlinkat(p->fd, p->last.c_str(), 0) != 0) return error(errno, "remove", rel);
  return Status::Ok();
}

Status SafeDir::rename(std::string_view from, std::string_view to) const {
  auto a = parent_of(from, false);
  if (!a.ok()) return a.status();
  auto b = parent_of(to, false);
  if (!b.ok()) return b.status();
  struct stat st {};
  if (::fstatat(a->fd, a->last.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return error(errno, "rename", from);
  if (S_ISLNK(st.st_mode)) return error(ELOOP, "rename", from);
  // renameat replaces a link at `to` rather than following it; refused all the same, so a
  // planted link is reported, not silently healed.
  if (::fstatat(b->fd, b->last.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
    return error(ELOOP, "rename onto", to);
  if (::renameat(a->fd, a->last.c_str(), b->fd, b->last.c_str()) != 0) return error(errno, "rename", from);
  return Status::Ok();
}

Result<std::vector<std::string>> SafeDir::list(std::string_view rel) const {
  UniqueFd fd(open_beneath(fd_.get(), rel, kDirFlags));
  if (!fd.valid()) return error(errno, "list", rel);
  return read_names(std::move(fd), name_of(rel));
}

Status SafeDir::remove_tree(std::string_view rel) const {
  auto p = parent_of(rel, false);
  if (!p.ok()) return p.status().code() == Code::not_found ? Status::Ok() : p.status();
  return remove_entry(p->fd, p->last, name_of(rel));
}

Result<struct stat> SafeDir::stat(std::string_view rel) const {
  auto p = parent_of(rel, false);
  if (!p.ok()) return p.status();
  struct stat st {};
  if (::fstatat(p->fd, p->last.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return error(errno, "stat", rel);
  return st;
}

Status SafeDir::sync(std::string_view rel) const {
  int fd = fd_.get();
  UniqueFd owned;
  if (!rel.empty() && rel != ".") {
    owned.reset(open_beneath(fd_.get(), rel, kDirFlags));
    if (!owned.valid()) return error(errno, "open directory", rel);
    fd = owned.get();
  }
  if (::fsync(fd) != 0) return io_status(errno, "fsync directory " + name_of(rel));
  return Status::Ok();
}

Result<std::string> SafeDir::read_file(std::string_view rel, size_t max_bytes) const {
  UniqueFd fd(open_beneath(fd_.get(), rel, O_RDONLY));
  if (!fd.valid()) {
    if (errno == ENOENT) return Status(Code::not_found, "no file '" + name_of(rel) + "'");
    return error(errno, "open", rel);
  }
  return read_all(fd.get(), max_bytes, name_of(rel));
}

Status SafeDir::write_atomic(std::string_view rel, std::span<const uint8_t> bytes, bool drop_cache, bool sync) const {
  const std::string what = "write " + name_of(rel);
  auto p = parent_of(rel, sync);
  if (!p.ok()) return p.status();
  const std::string tmp = temp_file_name(p->last);
  Status s;
  {
    // O_EXCL never follows a link: the temporary file is new, and ours.
    UniqueFd fd(open_one(p->fd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600));
    if (!fd.valid()) return io_status(errno, what + ": create temporary file");
    s = write_all(fd.get(), bytes, what);
    // Delayed allocation can surface ENOSPC / EDQUOT only here.
    if (s.ok() && ::fdatasync(fd.get()) != 0) s = io_status(errno, what + ": fdatasync");
    // The pages are clean after fdatasync, so DONTNEED really evicts them.
    if (s.ok() && drop_cache) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
    if (const int err = fd.close(); s.ok() && err != 0) s = io_status(err, what + ": close");
  }
  struct stat st {};
  if (s.ok() && ::fstatat(p->fd, p->last.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
    s = error(ELOOP, "write", rel);
  if (s.ok() && ::renameat(p->fd, tmp.c_str(), p->fd, p->last.c_str()) != 0) s = io_status(errno, what + ": rename");
  if (!s.ok()) {
    ::unlinkat(p->fd, tmp.c_str(), 0);
    return s;
  }
  if (sync && ::fsync(p->fd) != 0) return io_status(errno, "fsync directory of " + name_of(rel));
  return Status::Ok();
}

Status SafeDir::write_atomic(std::string_view rel, const std::string& text) const {
  return write_atomic(rel, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()),
                      /*drop_cache=*/false, /*sync=*/true);
}

}  // namespace llmsvc::fileio
