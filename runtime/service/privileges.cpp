// SPDX-License-Identifier: Apache-2.0
// The switch to an unprivileged user and the drop of every capability, each step checked.
#include "runtime/service/privileges.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "base/file_io.h"
#include "base/unique_fd.h"
#include "runtime/service/config.h"

namespace llmsvc::service {
namespace {

Status failed(const std::string& what, int err) {
  return Status(Code::internal, "privileges: " + what + ": " + fileio::errno_text(err));
}

// This thread's capability sets, one bit per capability.
struct CapSets {
  uint64_t effective = 0, permitted = 0, inheritable = 0;
};

Result<CapSets> get_caps() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
  if (::syscall(SYS_capget, &header, data) != 0) return failed("capget", errno);
  auto join = [&](__u32 __user_cap_data_struct::*set) { return uint64_t{data[0].*set} | uint64_t{data[1].*set} << 32; };
  return CapSets{join(&__user_cap_data_struct::effective), join(&__user_cap_data_struct::permitted),
                 join(&__user_cap_data_struct::inheritable)};
}

// Effective, permitted and inheritable all empty (allowed to anyone: it only drops).
Status clear_caps() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
  if (::syscall(SYS_capset, &header, data) != 0) return failed("capset (clearing every capability)", errno);
  return Status::Ok();
}

// How many capabilities this kernel knows: PR_CAPBSET_READ refuses the first past the last.
int known_caps() {
  int n = 0;
  while (n < 64 && ::prctl(PR_CAPBSET_READ, n, 0, 0, 0) >= 0) ++n;
  return n;
}

uint64_t bounding_set(int n) {
  uint64_t set = 0;
  for (int c = 0; c < n; ++c)
    if (::prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1) set |= uint64_t{1} << c;
  return set;
}

uint64_t ambient_set(int n) {
  uint64_t set = 0;
  for (int c = 0; c < n; ++c)  // -1 (EINVAL) on kernels before 4.3, which have no ambient set
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) == 1) set |= uint64_t{1} << c;
  return set;
}

// Emptied while CAP_SETPCAP is still held: the bounding set limits what any later execve
// could grant, and a process that has dropped CAP_SETPCAP can no longer shrink it.
Status drop_bounding_set(int n) {
  for (int c = 0; c < n; ++c)
    if (::prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1 && ::prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0)
      return failed("dropping capability " + std::to_string(c) + " from the bounding set", errno);
  return Status::Ok();
}

Status clear_ambient() {
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)  // EINVAL: no ambient set
    return failed("clearing the ambient capabilities", errno);
  return Status::Ok();
}

// Groups first (setgroups needs CAP_SETGID), then the gid, then the uid: with KEEPCAPS off,
// leaving uid 0 empties the permitted and effective sets, so nothing can come after it.
Status switch_user(const PrivilegePlan& p) {
  if (::setgroups(p.groups.size(), p.groups.data()) != 0) return failed("setgroups", errno);
  if (::setresgid(p.gid, p.gid, p.gid) != 0) return failed("setresgid " + std::to_string(p.gid), errno);
  if (::setresuid(p.uid, p.uid, p.uid) != 0) return failed("setresuid " + std::to_string(p.uid), errno);
  return Status::Ok();
}

Status check_ids(const PrivilegePlan& p) {
  uid_t ru = 0, eu = 0, su = 0;
  gid_t rg = 0, eg = 0, sg = 0;
  if (::getresuid(&ru, &eu, &su) != 0 || ::getresgid(&rg, &eg, &sg) != 0) return failed("getresuid", errno);
  if (eu != p.uid || (p.switch_user && (ru != p.uid || su != p.uid || rg != p.gid || eg != p.gid || sg != p.gid)))
    return Status(Code::internal, "privileges: the uid or gid is not the one switched to");
  if (!p.switch_user) return Status::Ok();
  std::vector<gid_t> groups(static_cast<size_t>(std::max(0, ::getgroups(0, nullptr))));
  if (::getgroups(static_cast<int>(groups.size()), groups.data()) != static_cast<int>(groups.size()))
    return failed("getgroups", errno);
  std::vector<gid_t> want = p.groups;
  std::sort(groups.begin(), groups.end());
  std::sort(want.begin(), want.end());
  if (groups != want) return Status(Code::internal, "privileges: the supplementary groups are not the user's");
  // No way back: the saved ids are the user's too, and no capability allows more.
  if (::setuid(0) == 0) return Status(Code::internal, "privileges: setuid(0) still succeeds after the switch");
  if (p.gid != 0 && ::setgid(0) == 0)
    return Status(Code::internal, "privileges: setgid(0) still succeeds after the switch");
  return Status::Ok();
}

// A user of the user database by name or uid: uid, primary gid, name.
Result<passwd> look_up(const std::string& user, std::vector<char>& buf) {
  auto uid = resolve_user(user);  // a name is looked up here, a number is parsed
  if (!uid.ok()) return uid.status();
  passwd pw{};
  passwd* found = nullptr;
  const int rc = ::getpwuid_r(*uid, &pw, buf.data(), buf.size(), &found);
  if (rc != 0) return Status(Code::io, "looking up user '" + user + "': " + fileio::errno_text(rc));
  if (!found)
    return Status(Code::not_found,
                  "uid " + user + " has no entry in the user database (llmsvcd takes its group from it)");
  return pw;
}

Result<std::vector<gid_t>> groups_of(const char* name, gid_t gid) {
  std::vector<gid_t> groups(16);
  for (int tries = 0; tries < 8; ++tries) {
    int n = static_cast<int>(groups.size());
    if (::getgrouplist(name, gid, groups.data(), &n) >= 0) {
      groups.resize(static_cast<size_t>(n));
      return groups;
    }
    groups.resize(static_cast<size_t>(std::max(n, static_cast<int>(groups.size()) * 2)));  // n: the count needed
  }
  return Status(Code::io, std::string("listing the groups of user '") + name + "'");
}

std::string name_of(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  return ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found ? found->pw_name : "";
}

}  // namespace

Result<PrivilegePlan> plan_privileges(const std::string& user, bool allow_root) {
  PrivilegePlan p;
  p.as_root = ::geteuid() == 0;
  p.uid = ::geteuid();
  p.gid = ::getegid();
  if (!p.as_root) {
    p.user_name = name_of(p.uid);
    if (!user.empty()) p.note = "user = " + user + " applies only to a start as root";
    return p;
  }
  if (user.empty()) {
    if (!allow_root)
      return Status(Code::invalid_argument,
                    "llmsvcd was started as root and told no user to run as: name an unprivileged user "
                    "(--user NAME, or user = \"NAME\" in the configuration), or pass --allow-root "
                    "(allow_root = true) to stay uid 0 without capabilities");
    p.user_name = "root";
    p.note = "allowed by allow_root";
    return p;
  }
  std::vector<char> buf(16384);
  auto pw = look_up(user, buf);
  if (!pw.ok()) return pw.status();
  if (pw->pw_uid == 0)
    return Status(Code::invalid_argument, "user '" + user + "' is uid 0: name an unprivileged user, "
                                          "or leave the user out and pass --allow-root to stay root");
  auto groups = groups_of(pw->pw_name, pw->pw_gid);
  if (!groups.ok()) return groups.status();
  p.switch_user = true;
  p.uid = pw->pw_uid;
  p.gid = pw->pw_gid;
  p.groups = std::move(groups).value();
  p.user_name = pw->pw_name;
  return p;
}

Status make_state_root_for(const std::string& dir, const PrivilegePlan& plan) {
  if (!plan.switch_user) return Status::Ok();
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t cut = path.find_last_of('/');
  const std::string parent = cut == std::string::npos ? "." : cut == 0 ? "/" : path.substr(0, cut);
  const std::string name = cut == std::string::npos ? path : path.substr(cut + 1);
  fileio::UniqueFd up(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!up.valid())  // not made here: made by root, it would be closed to the user
    return fileio::io_status(errno, "the parent '" + parent + "' of the state directory for user " + plan.user_name);
  if (::mkdirat(up.get(), name.c_str(), 0700) != 0) {
    if (errno == EEXIST) return Status::Ok();  // its owner is checked once privileges are dropped
    return fileio::io_status(errno, "create state directory '" + path + "'");
  }
  // Made by root just now: handed over through a descriptor, so no path swapped in between
  // (a symlink planted there) is what gets the new owner.
  fileio::UniqueFd made(::openat(up.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!made.valid() || ::fchown(made.get(), plan.uid, plan.gid) != 0)
    return fileio::io_status(errno, "give state directory '" + path + "' to uid " + std::to_string(plan.uid));
  return Status::Ok();
}

Result<std::string> drop_privileges(const PrivilegePlan& plan) {
  // Off (the default, unless a parent set it): leaving uid 0 must empty the capability sets.
  if (::prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0) return failed("PR_SET_KEEPCAPS", errno);
  auto before = get_caps();
  if (!before.ok()) return before.status();
  const int n = known_caps();
  // Only a holder of CAP_SETPCAP can shrink the bounding set (root, or a process given it).
  // Without it the set stays, and is moot: no_new_privs and the syscall filter (no execve)
  // leave no way to gain what it bounds.
  const bool bounding = before->effective & (uint64_t{1} << CAP_SETPCAP);
  if (bounding) LLMSVC_RETURN_IF_ERROR(drop_bounding_set(n));
  LLMSVC_RETURN_IF_ERROR(clear_ambient());
  if (plan.switch_user) {
    LLMSVC_RETURN_IF_ERROR(switch_user(plan));
    // The kernel has now made the process non-dumpable (its uid changed): no core dump of the
    // apps' contexts, no ptrace by other processes of that user. Kept, except where
    // LeakSanitizer must ptrace the process's own threads at exit.
#if defined(__SANITIZE_ADDRESS__)
    if (::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) return failed("PR_SET_DUMPABLE (for LeakSanitizer)", errno);
#endif
  }
  LLMSVC_RETURN_IF_ERROR(clear_caps());  // setuid leaves the inheritable set; uid 0 keeps all three
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return failed("PR_SET_NO_NEW_PRIVS", errno);

  // Check what the kernel now says, not what was asked.
  LLMSVC_RETURN_IF_ERROR(check_ids(plan));
  auto after = get_caps();
  if (!after.ok()) return after.status();
  if (after->effective != 0 || after->permitted != 0 || after->inheritable != 0 || ambient_set(n) != 0)
    return Status(Code::internal, "privileges: capabilities remain after dropping them");
  if (bounding && bounding_set(n) != 0) return Status(Code::internal, "privileges: the bounding set is not empty");

  std::string line = "privileges: running as uid " + std::to_string(plan.uid);
  line += plan.user_name.empty() ? " (not in the user database)" : " (user " + plan.user_name + ")";
  if (plan.switch_user) {
    line += ", gid " + std::to_string(plan.gid) + ", ";
    if (plan.groups.empty()) line += "no supplementary groups";
    for (size_t i = 0; i < plan.groups.size(); ++i) line += (i ? "," : "groups ") + std::to_string(plan.groups[i]);
  }
  line += ", no capabilities";
  if (plan.as_root && !bounding) line += ", bounding set kept (started without CAP_SETPCAP)";
  if (!plan.note.empty()) line += " (" + plan.note + ")";
  return line;
}

}  // namespace llmsvc::service
