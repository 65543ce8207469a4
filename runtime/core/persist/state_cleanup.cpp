// SPDX-License-Identifier: Apache-2.0
// The start-up scan for interrupted writes and creations.
#include "runtime/core/persist/state_cleanup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "base/file_io.h"
#include "runtime/core/persist/state_dir.h"

namespace llmsvc::persist {
namespace {

bool process_alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

enum class Kind { missing, file, dir, other };  // other: a link, a socket, ...

Kind kind_of(const fileio::SafeDir& root, const std::string& rel) {
  auto st = root.stat(rel);
  if (!st.ok()) return Kind::missing;
  if (S_ISREG(st->st_mode)) return Kind::file;
  return S_ISDIR(st->st_mode) ? Kind::dir : Kind::other;
}

std::string join(const std::string& dir, const std::string& name) { return dir == "." ? name : dir + "/" + name; }

// "<digits>.kvc": a chunk file (policy/swap/swap_dir.h's names; persist does not link policy).
bool is_chunk_file_name(const std::string& name) {
  if (name.size() < 5 || name.compare(name.size() - 4, 4, ".kvc") != 0) return false;
  return std::all_of(name.begin(), name.end() - 4, [](char c) { return c >= '0' && c <= '9'; });
}

// Removes the temporary files in directory `rel` whose writer is gone.
void remove_stale_temps(const fileio::SafeDir& root, const std::string& rel, CleanupCounts& n) {
  auto names = root.list(rel);
  if (!names.ok()) return;
  for (const std::string& name : *names) {
    if (!fileio::is_temp_file_name(name) || process_alive(fileio::temp_file_pid(name))) continue;
    const std::string path = join(rel, name);
    if (kind_of(root, path) == Kind::file && root.unlink(path).ok()) n.temp_files++;
  }
}

// Whether the directory `rel` (without context.json) holds only what a context's own
// creation or deletion leaves: history.log, chunks.table, temporary files, chunks/ of chunk
// files and temporary files. Anything else is not ours to remove.
bool only_context_files(const fileio::SafeDir& root, const std::string& rel, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const std::string path = join(rel, name);
    const Kind k = kind_of(root, path);
    if (k == Kind::file && (name == layout::kHistory || name == layout::kChunkTable || fileio::is_temp_file_name(name)))
      continue;
    if (k != Kind::dir || name != layout::kChunks) return false;
    auto inner = root.list(path);
    if (!inner.ok()) return false;
    for (const std::string& f : *inner)
      if (!(is_chunk_file_name(f) || fileio::is_temp_file_name(f)) || kind_of(root, join(path, f)) != Kind::file)
        return false;
  }
  return true;
}

// Removes the unfinished context directory `rel` unless a process holds its history.
void remove_unfinished(const fileio::SafeDir& root, const std::string& rel, CleanupCounts& n) {
  fileio::UniqueFd held;  // its history's lock, kept until the directory is gone
  if (auto log = root.open_file(join(rel, std::string(layout::kHistory)), O_RDONLY); log.ok()) {
    if (::flock(log->get(), LOCK_EX | LOCK_NB) != 0) return;  // a creation in progress (or a deletion)
    held = std::move(log).value();
  }
  if (root.remove_tree(rel).ok()) n.unfinished++;
}

// A directory in contexts/ (depth 1) or in a scope (depth 2).
void scan(const fileio::SafeDir& root, const std::string& rel, int depth, CleanupCounts& n) {
  if (kind_of(root, rel) != Kind::dir) return;  // a link is never followed, a file not ours
  auto names = root.list(rel);
  if (!names.ok()) return;
  const bool complete = std::count(names->begin(), names->end(), std::string(layout::kMeta)) > 0 &&
                        kind_of(root, join(rel, std::string(layout::kMeta))) == Kind::file;
  if (complete) {
    remove_stale_temps(root, rel, n);
    const std::string chunks = join(rel, std::string(layout::kChunks));
    if (kind_of(root, chunks) == Kind::dir) remove_stale_temps(root, chunks, n);
    return;
  }
  // In a scope every directory is a context's; in contexts/ an empty one may be a scope.
  if (only_context_files(root, rel, *names) && (depth == 2 || !names->empty())) {
    remove_unfinished(root, rel, n);
    return;
  }
  if (depth == 1)
    for (const std::string& name : *names)
      if (valid_context_id(name)) scan(root, join(rel, name), 2, n);
}

}  // namespace

CleanupCounts remove_interrupted(const fileio::SafeDir& root) {
  CleanupCounts n;
  remove_stale_temps(root, ".", n);  // the switch-cost profile's
  const std::string contexts(layout::kContexts);
  if (kind_of(root, contexts) != Kind::dir) return n;
  auto names = root.list(contexts);
  if (!names.ok()) return n;
  for (const std::string& name : *names)
    if (valid_context_id(name)) scan(root, join(contexts, name), 1, n);
  return n;
}

}  // namespace llmsvc::persist
