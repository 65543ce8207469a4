// SPDX-License-Identifier: Apache-2.0
// llmsvcd's privileges, end to end (runtime/service/privileges.h). Started as root with a user
// it serves as that user (uid, gid and groups, real, effective and saved) with every
// capability set empty, the bounding set included, and its state files are that user's;
// with neither a user nor --allow-root it refuses to start; with --allow-root it stays uid 0
// without capabilities. Read from /proc/<pid>/status of every thread. Needs root (skipped
// otherwise): CI runs as root.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "llmsvc/llmsvc.h"
#include "tests/common/spawn.h"
#include "tests/service/daemon_fixture.h"
#include "tests/service/daemon_process.h"
#include "tests/service/raw_client.h"

namespace llmsvc::test {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The "Name:\tvalue" lines of a /proc status file.
std::map<std::string, std::string> status_fields(const std::string& path) {
  std::map<std::string, std::string> fields;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    const size_t end = line.find_last_not_of(" \t");
    fields[line.substr(0, colon)] = start == std::string::npos ? "" : line.substr(start, end + 1 - start);
  }
  return fields;
}

// Every thread of `pid` holds no capability (none in any set, the bounding set empty), has
// no_new_privs and the syscall filter, and runs as uid/gid (real, effective, saved, fs).
void expect_unprivileged(pid_t pid, uid_t uid, gid_t gid) {
  const std::string u = std::to_string(uid), g = std::to_string(gid);
  size_t threads = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    auto f = status_fields(task.path().string() + "/status");
    if (f.empty()) continue;  // a thread that just ended
    ++threads;
    const std::string who = "thread " + task.path().filename().string() + ": ";
    EXPECT_EQ(f["Uid"], u + "\t" + u + "\t" + u + "\t" + u) << who << "Uid";
    EXPECT_EQ(f["Gid"], g + "\t" + g + "\t" + g + "\t" + g) << who << "Gid";
    for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"})
      EXPECT_EQ(f[set], "0000000000000000") << who << set;
    EXPECT_EQ(f["NoNewPrivs"], "1") << who;
    EXPECT_EQ(f["Seccomp"], "2") << who;
  }
  EXPECT_GE(threads, 2u) << "the engine's threads run";
}

// One real call through the daemon: the model ran as whoever the daemon now is.
void serve_a_call(const std::string& target, const char* id) {
  llmsvc_service* svc = bind_target(target);
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = create_context(svc, id);
  ASSERT_NE(ctx, nullptr);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  auto co = greedy_options(4);
  EXPECT_EQ(llmsvc_call(ctx, "Say hello.", 10, &co, nullptr, nullptr, &r), LLMSVC_OK) << last_api_error();
  EXPECT_GT(r.generated_tokens, 0);
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
}

// Starts llmsvcd with `args` (exactly those: no --allow-root added), its output to `log`.
pid_t spawn(std::vector<std::string> args, const std::string& log) {
  args.insert(args.begin(), LLMSVCD_PATH);
  return llmsvc::test::spawn_logged(std::move(args), log);
}

// Waits for `pid` to exit: its wait status, or -1 after it was SIGKILLed at timeout_ms.
int wait_exit(pid_t pid, int timeout_ms = 60000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status;
}

// Owners of `root` and everything under it that are not `uid` (paths, for the message).
std::string not_owned_by(const std::string& root, uid_t uid) {
  std::string wrong;
  struct stat st {};
  if (::lstat(root.c_str(), &st) != 0 || st.st_uid != uid) wrong += root + " ";
  for (const auto& e : std::filesystem::recursive_directory_iterator(root))
    if (::lstat(e.path().c_str(), &st) != 0 || st.st_uid != uid) wrong += e.path().string() + " ";
  return wrong;
}

class Privileges : public DaemonTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: what llmsvcd does when started as root";
    const passwd* pw = ::getpwnam("nobody");
    if (pw == nullptr) GTEST_SKIP() << "this system has no user 'nobody'";
    nobody_uid_ = pw->pw_uid;
    nobody_gid_ = pw->pw_gid;
    DaemonTest::SetUp();
  }

  // The test directory opened to others and a copy of the model they can read: the daemon,
  // once it is nobody, must reach its state root and read the model (root's home, where the
  // default model lives, is closed to other users).
  std::string open_up_for_nobody() {
    EXPECT_EQ(::chmod(dir_.c_str(), 0755), 0);
    const std::string model = dir_ + "/model.gguf";
    std::filesystem::copy_file(default_model_path(), model);
    EXPECT_EQ(::chmod(model.c_str(), 0644), 0);
    return model;
  }

  std::vector<std::string> base_args(const std::string& model) const {
    return {"--listen", dir_ + "/s.sock", "--state-dir", dir_ + "/state", "--model", model, "--threads", "1"};
  }

  uid_t nobody_uid_ = 0;
  gid_t nobody_gid_ = 0;
};

// --user nobody: the switch, no capability left in any thread, a call served, and a state
// root it made itself (with every file under it) that is nobody's.
TEST_F(Privileges, AsRootWithAUserItServesAsThatUserWithoutCapabilities) {
  const std::string model = open_up_for_nobody();
  ASSERT_FALSE(std::filesystem::exists(dir_ + "/state"));
  // DaemonProcess adds --allow-root as root: a user named beside it still wins.
  DaemonProcess& d = start_daemon({"--user", "nobody"}, [&](DaemonProcess& p) { p.set_model(model); });
  ASSERT_GT(d.pid(), 0);
  serve_a_call(d.target(), "as-nobody");
  expect_unprivileged(d.pid(), nobody_uid_, nobody_gid_);
  const auto f = status_fields("/proc/" + std::to_string(d.pid()) + "/status");
  EXPECT_EQ(f.at("Groups"), std::to_string(nobody_gid_)) << "only nobody's own group";
  EXPECT_EQ(not_owned_by(d.state_dir(), nobody_uid_), "") << "not nobody's";
  const std::string log = read_text(d.log_path());
  EXPECT_NE(log.find("privileges: running as uid " + std::to_string(nobody_uid_) + " (user nobody)"), std::string::npos)
      << log;
}

// `user =` in the configuration file does the same, with a state root prepared for that user
// beforehand (left as it is).
TEST_F(Privileges, TheUserMayComeFromTheConfigurationFile) {
  const std::string model = open_up_for_nobody();
  const std::string state = dir_ + "/state";
  ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
  ASSERT_EQ(::chown(state.c_str(), nobody_uid_, nobody_gid_), 0);
  DaemonProcess& d = start_daemon(config_args("user = \"nobody\"\n"), [&](DaemonProcess& p) { p.set_model(model); });
  ASSERT_GT(d.pid(), 0);
  serve_a_call(d.target(), "configured");
  expect_unprivileged(d.pid(), nobody_uid_, nobody_gid_);
  EXPECT_EQ(not_owned_by(state, nobody_uid_), "");
}

// No user and no --allow-root: it refuses before binding anything, saying what to do; the
// same with allow_root = true in its configuration starts.
TEST_F(Privileges, AsRootWithNeitherAUserNorAllowRootItRefuses) {
  const std::string log = dir_ + "/refused.log";
  const int status = wait_exit(spawn(base_args(default_model_path()), log));
  ASSERT_NE(status, -1) << "still running: " << read_text(log);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_NE(WEXITSTATUS(status), 0);
  const std::string text = read_text(log);
  EXPECT_NE(text.find("started as root"), std::string::npos) << text;
  EXPECT_NE(text.find("--user NAME"), std::string::npos) << text;
  EXPECT_NE(text.find("--allow-root"), std::string::npos) << text;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/s.sock"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/state"));

  std::vector<std::string> args = base_args(default_model_path());
  for (const std::string& a : config_args("allow_root = true\n")) args.push_back(a);
  const std::string allowed_log = dir_ + "/allowed.log";
  const pid_t pid = spawn(args, allowed_log);
  const DaemonProcess socket_of(dir_);  // only its accepts(), on dir_/s.sock
  int early = 0;
  for (int i = 0; i < 6000 && !socket_of.accepts() && ::waitpid(pid, &early, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(socket_of.accepts()) << read_text(allowed_log);
  ::kill(pid, SIGTERM);
  const int stopped = wait_exit(pid);
  EXPECT_TRUE(WIFEXITED(stopped) && WEXITSTATUS(stopped) == 0) << stopped;
  EXPECT_NE(read_text(allowed_log).find("allowed by allow_root"), std::string::npos) << read_text(allowed_log);
}

// --allow-root: uid 0 still, but not one capability (so root's files only by their modes).
TEST_F(Privileges, AllowRootKeepsUidZeroWithoutCapabilities) {
  DaemonProcess& d = start_daemon();
  ASSERT_GT(d.pid(), 0);
  serve_a_call(d.target(), "as-root");
  expect_unprivileged(d.pid(), 0, ::getegid());
  const std::string log = read_text(d.log_path());
  EXPECT_NE(log.find("privileges: running as uid 0 (user root), no capabilities"), std::string::npos) << log;
}

// The daemon names a client by its executable (/proc/PID/exe) where it has no systemd unit.
// Without capabilities it may read that link only for a client holding none either (the
// kernel's ptrace access rule): a root client that dropped its capabilities is named, and
// test_daemon's root clients, which hold them all, are not.
TEST_F(Privileges, AClientWithoutCapabilitiesIsNamedByItsExecutable) {
  DaemonProcess& d = start_daemon();
  const pid_t client = ::fork();
  if (client == 0) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3]{};
    if (::syscall(SYS_capset, &header, none) != 0) ::_exit(1);
    const int fd = raw_connect(d.socket_path());
    if (fd < 0) ::_exit(2);
    raw_send(fd, "GET / HTTP/1.1\r\n\r\n");
    char buf[256];
    while (::recv(fd, buf, sizeof(buf), 0) > 0) {
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(client, &status, 0), client);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  ASSERT_GT(n, 0);
  const std::string who = "protocol error from uid 0 pid " + std::to_string(client) + " exe " +
                          std::string(self, static_cast<size_t>(n)) + ":";
  std::string log;
  for (int waited = 0; waited < 10000 && log.find(who) == std::string::npos; waited += 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    log = read_text(d.log_path());
  }
  EXPECT_NE(log.find(who), std::string::npos) << log;
}

// A state root that exists and is someone else's is not taken over: switching to nobody
// with root's state root, it exits with an error instead of serving.
TEST_F(Privileges, AStateRootOfAnotherUserIsRefused) {
  const std::string model = open_up_for_nobody();
  ASSERT_EQ(::mkdir((dir_ + "/state").c_str(), 0700), 0);
  const std::string log = dir_ + "/refused.log";
  std::vector<std::string> args = base_args(model);
  args.insert(args.end(), {"--user", "nobody"});
  const int status = wait_exit(spawn(args, log));
  ASSERT_NE(status, -1) << "still running: " << read_text(log);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_NE(WEXITSTATUS(status), 0) << read_text(log);
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/state").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u) << "the state root changed hands";
}

}  // namespace
}  // namespace llmsvc::test
