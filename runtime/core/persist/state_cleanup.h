// SPDX-License-Identifier: Apache-2.0
// What a crash in the middle of a write or of a context's creation leaves under the state
// root, and its removal when an engine starts. The engine writes so that a crash never
// corrupts a context (temporary file + rename; context.json last at creation, first at
// deletion), but it can leave:
//  - temporary files of atomic writes (file_io.h's ".<name>.<pid>.<n>.tmp"): context.json
//    and chunks.table in a context's directory, chunk files in its chunks/, the switch-cost
//    profile in the root. Removed when the process named in them is gone (a live one may
//    still be writing: two apps can share one root);
//  - a context directory without context.json: a creation that did not finish, or a
//    deletion that did not. Removed when it holds nothing but a context's own files
//    (history.log, chunks.table, chunks/ of chunk files, temporary files) and no process
//    holds its history's lock (a creation in progress holds it).
// A directory with a context.json (a complete context) is never removed, nor anything
// holding one, nor a file the engine does not make. Links are never followed (safe_dir.h).
//
// One window is left: a creation in another process between making the directory and
// locking its new history can lose the race and fail with Code::io; nothing complete is lost.
#pragma once

#include <cstddef>

#include "base/safe_dir.h"
#include "base/status.h"

namespace llmsvc::persist {

struct CleanupCounts {
  size_t temp_files = 0;    // temporary files removed
  size_t unfinished = 0;    // context directories without context.json removed
  size_t total() const { return temp_files + unfinished; }
};

// Scans the root (contexts/, each scope, each context) and removes what is described above.
// Failures to remove one thing are skipped (it stays for the next start), not returned.
CleanupCounts remove_interrupted(const fileio::SafeDir& root);

}  // namespace llmsvc::persist
