// SPDX-License-Identifier: Apache-2.0
// Who llmsvcd runs as. Started by hand as root, it switches to an unprivileged user (`user =`,
// --user: its groups, gid and uid, real, effective and saved) or, told `allow_root`, stays
// uid 0; either way it then holds no capability at all (effective, permitted, inheritable and
// ambient sets empty, the bounding set emptied while it still could), with no_new_privs set.
// As root with neither it refuses to run. Not started as root (systemd's DynamicUser=, a
// user's session), nothing changes but the drop of whatever capabilities it was given.
//
// Raw capget/capset/prctl rather than libcap-ng: a handful of calls whose order matters
// (bounding set before the uid switch, which needs CAP_SETPCAP; setuid last), each checked
// and reported here, and no further library for the daemon to link and the fuzzers to build.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace llmsvc::service {

// What drop_privileges will do, decided (and the user looked up) before start-up goes on.
struct PrivilegePlan {
  bool as_root = false;      // started with euid 0
  bool switch_user = false;  // to uid/gid/groups below
  uid_t uid = 0;             // the uid it will run as
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups (switch_user only)
  std::string user_name;      // for the log ("" when the user database has none)
  std::string note;           // a remark for the log line ("" for none)
};

// From the effective uid and the configuration. As root: `user` (a name or a uid of the user
// database; not uid 0) is switched to; without one, Code::invalid_argument with a message
// saying what to do, unless `allow_root`. Not as root: the process stays who it is (`user`
// applies only to a start as root).
Result<PrivilegePlan> plan_privileges(const std::string& user, bool allow_root);

// When the plan switches user: creates the state root `dir` (its last component; mode 0700;
// its parent must exist) if it does not exist, owned by that user, so the daemon can use it
// once it is that user. An existing one is left as it is (its owner is checked once
// privileges are dropped).
Status make_state_root_for(const std::string& dir, const PrivilegePlan& plan);

// Carries the plan out and checks the result (uid, gid and groups as planned, setuid(0)
// refused after a switch, every capability set empty). Call it before any thread starts:
// capability sets and the bounding set belong to each thread. Returns the log line
// ("privileges: running as uid N (user X), no capabilities"); Code::internal when anything
// could not be dropped (the daemon then refuses to run).
Result<std::string> drop_privileges(const PrivilegePlan& plan);

}  // namespace llmsvc::service
