// SPDX-License-Identifier: Apache-2.0
// The state root's own safety, checked before any state is kept in it (by llmsvcd at start
// and by every embedded engine): the root must be this process's and closed to others.
//
// Refused (Code::io, the message says why and what to do):
//  - a root owned by another uid than the process's effective uid: never taken over, never
//    chowned, whatever the options say;
//  - a root its group or others can write (mode & 022): they could plant links or replace
//    files. With `fix_permissions` (llmsvcd's fix_state_permissions) a root of our own is
//    chmodded to 0700 instead;
//  - an ancestor of the root (its real path, up to /) that another user could use to swap
//    the root for a directory of theirs: one not owned by root or by us, or writable by its
//    group or others without the sticky bit (a root-owned sticky directory such as /tmp is
//    fine: others cannot rename what is ours in it). Ancestors are never changed.
// A root that does not exist is created, mode 0700 (and its missing parents, 0700 too).
#pragma once

#include <sys/types.h>

#include <string>

#include "base/safe_dir.h"
#include "base/status.h"

namespace llmsvc::persist {

struct OpenedStateRoot {
  fileio::SafeDirRef dir;  // the root held open: what was checked is what is used
  bool created = false;    // it did not exist
  std::string fixed;       // what fix_permissions changed, for the log ("... mode 0777 -> 0700"); "" if nothing
};

// Creates `root` if needed, checks it and opens it (see above).
Result<OpenedStateRoot> open_state_root(const std::string& root, bool fix_permissions = false);

}  // namespace llmsvc::persist
