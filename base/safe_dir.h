// SPDX-License-Identifier: Apache-2.0
// SafeDir: a directory held open, under which files are reached only beneath it and never
// through a symbolic link. For the state directory: whoever can write into it could plant
// links (history.log -> /etc/shadow, chunks/ -> elsewhere) that a path-based open, unlink or
// rename would follow; through a SafeDir every such link is refused with ELOOP.
//
// Paths are relative ("contexts/a/history.log"); an absolute one or a ".." component is
// refused (EXDEV). Opens use openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) where the kernel
// has it (Linux 5.6+), else a walk of the path one component at a time with
// openat(O_NOFOLLOW); creating, removing, renaming and listing work on the parent
// directory's descriptor (mkdirat, unlinkat, renameat, fdopendir), so a link as a component
// or as the final name is refused and nothing outside is touched.
//
// Errors are Status values whose messages name the path as name_of(rel), never the
// anchor's absolute path (a daemon's clients see them): Code::not_found when something is
// missing, Code::io otherwise ("... a symbolic link is on the path ...").
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace llmsvc::fileio {

class SafeDir;
// Shared: work queued for later (the swap writer's jobs) keeps the directory's descriptor
// open, so a descriptor number is never reused under it.
using SafeDirRef = std::shared_ptr<const SafeDir>;

class SafeDir {
 public:
  // Opens `path` itself (it is the trusted anchor: links in `path` are followed). `name`:
  // how messages call it; "" names the paths below it by their relative paths alone.
  static Result<SafeDirRef> open(const std::string& path, std::string name = {});
  // The directory `rel` beneath this one, named name_of(rel).
  Result<SafeDirRef> open_dir(std::string_view rel) const;

  int fd() const { return fd_.get(); }
  const std::string& name() const { return name_; }
  // `rel` as messages name it: "<name>/<rel>", or `rel` when the name is "".
  std::string name_of(std::string_view rel) const;

  // The file `rel`, opened with `flags` (O_CLOEXEC | O_NOFOLLOW added; O_CREAT uses `mode`).
  Result<UniqueFd> open_file(std::string_view rel, int flags, mode_t mode = 0600) const;
  // mkdir -p below this directory, mode 0700 for what it creates; an existing link refused.
  Status make_dirs(std::string_view rel) const;
  // Removes the file `rel` (not a link, not a directory); missing: Code::not_found.
  Status unlink(std::string_view rel) const;
  // Renames `from` to `to` (both below this directory); a link at either is refused.
  Status rename(std::string_view from, std::string_view to) const;
  // The names in directory `rel` ("." for this one), but "." and ".."; missing: not_found.
  Result<std::vector<std::string>> list(std::string_view rel) const;
  // rm -r of `rel` (no-op when absent). A link inside it, or at `rel` itself, is removed as
  // a link, never followed: deleting a context clears links planted in it.
  Status remove_tree(std::string_view rel) const;
  // The entry `rel` itself (lstat: a link is S_ISLNK, not followed); missing: not_found.
  Result<struct stat> stat(std::string_view rel) const;
  // fsyncs directory `rel` ("." for this one): renames and creations in it become durable.
  Status sync(std::string_view rel) const;
  // The whole file `rel` (a regular file); Code::io if larger than max_bytes.
  Result<std::string> read_file(std::string_view rel, size_t max_bytes) const;
  // file_io.h's write_file_atomic below this directory: a temporary file beside `rel`
  // (temp_file_name), fdatasync, renameat over it; a link at `rel` is refused. `sync`:
  // the parent directory is fsynced too (durable when it returns).
  Status write_atomic(std::string_view rel, std::span<const uint8_t> bytes, bool drop_cache, bool sync) const;
  Status write_atomic(std::string_view rel, const std::string& text) const;

  struct Private {};
  SafeDir(Private, UniqueFd fd, std::string name) : fd_(std::move(fd)), name_(std::move(name)) {}

 private:
  // The parent directory of `rel` (this one's descriptor when `rel` has one component) and
  // its last component. `writable`: a descriptor that fsync accepts (else O_PATH).
  struct Parent {
    UniqueFd owned;  // invalid when the parent is this directory
    int fd = -1;
    std::string last;
  };
  Result<Parent> parent_of(std::string_view rel, bool writable) const;
  Status error(int err, std::string_view what, std::string_view rel) const;

  UniqueFd fd_;  // O_RDONLY | O_DIRECTORY: usable for *at calls, fsync and listing
  std::string name_;
};

// openat(2) of `rel` beneath the directory `dirfd`, never through a symbolic link (see the
// top of this file): the descriptor, or -1 with errno (ELOOP: a link on the path; EXDEV: an
// absolute path or ".."). O_CLOEXEC and O_NOFOLLOW are always added.
int open_beneath(int dirfd, std::string_view rel, int flags, mode_t mode = 0);

// Whether open_beneath uses openat2 (probed once: ENOSYS, or a filter refusing it, means the walk).
bool openat2_in_use();
// Tests: forces the component walk (true) or returns to the probe's choice (false).
void force_openat2_fallback_for_testing(bool force);

}  // namespace llmsvc::fileio
