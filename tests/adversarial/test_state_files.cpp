// SPDX-License-Identifier: Apache-2.0
// The state directory as hostile territory, against a real llmsvcd and the embedded engine:
//  - links planted in the state directory (a history.log, a context's chunks/, an app's scope
//    directory contexts/uid-<uid>) are refused: what they point to is never appended to,
//    truncated, written, listed into or deleted; the client gets a clear error naming no
//    absolute server path; the daemon stays up and serves the other contexts and apps;
//  - the state root's owner and mode: open to others or another user's, the daemon refuses to
//    start and the embedded engine to bind; --fix-state-permissions (fix_state_permissions =
//    true) makes a root of ours 0700, and never touches another user's;
//  - what an interrupted creation leaves is removed when the daemon starts, complete contexts
//    kept.
// Run as root (the daemon tests do): an app of another uid, and a root of another uid.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "llmsvc/llmsvc.h"
#include "tests/common/file_facts.h"
#include "tests/common/spawn.h"
#include "tests/service/daemon_fixture.h"

namespace llmsvc::test {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kOtherUid = 65534;  // nobody
constexpr const char* kDeadPid = "999999999";  // above any pid_max: no live process

// Every entry below `dir` (relative) with its contents ("<dir>" for directories), sorted.
std::vector<std::string> snapshot(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).string();
    out.push_back(rel + "=" + (e.is_directory() ? std::string("<dir>") : slurp(e.path().string())));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One call on `ctx` (a few tokens, greedy); its status.
llmsvc_status call(llmsvc_context* ctx, const char* prompt = "Say hello.") {
  llmsvc_call_options o = greedy_options(3);
  return llmsvc_call(ctx, prompt, std::strlen(prompt), &o, nullptr, nullptr, nullptr);
}

int32_t tokens_of(llmsvc_service* svc, const char* id) {
  llmsvc_context_info i;
  llmsvc_context_info_init(&i);
  EXPECT_EQ(llmsvc_context_info_get(svc, id, &i), LLMSVC_OK) << id << ": " << last_api_error();
  return i.tokens;
}

class StateFiles : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    if (::geteuid() != 0) GTEST_SKIP() << "plays other uids (an app, a state root's owner): needs root";
  }

  // A clear refusal that names no absolute path of the daemon's (its state lives in dir_).
  void expect_clear_error(llmsvc_status st, const std::string& what) const {
    const std::string msg = last_api_error();
    EXPECT_EQ(st, LLMSVC_ERR_IO) << what << ": " << msg;
    EXPECT_NE(msg.find("symbolic link"), std::string::npos) << what << ": " << msg;
    EXPECT_EQ(msg.find(dir_), std::string::npos) << what << ": " << msg;
    EXPECT_EQ(msg.find("/tmp/"), std::string::npos) << what << ": " << msg;
  }

  // Runs llmsvcd to its exit (it is expected to refuse to start): its wait status; its log
  // in *log. Not a DaemonProcess: that one reaps a daemon that does not come up.
  int run_to_exit(const std::string& state, std::vector<std::string> extra, std::string* log) {
    const std::string log_path = dir_ + "/refused.log";
    std::vector<std::string> args = {LLMSVCD_PATH, "--listen", dir_ + "/refused.sock", "--state-dir", state,
                                      "--model", default_model_path(), "--threads", "1", "--allow-root"};
    args.insert(args.end(), extra.begin(), extra.end());
    const pid_t pid = spawn_logged(std::move(args), log_path, /*truncate=*/true);
    int status = -1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (::waitpid(pid, &status, WNOHANG) != pid) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        ADD_FAILURE() << "llmsvcd did not exit";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    *log = slurp(log_path);
    return status;
  }

  // Stops a daemon started by start_daemon: SIGTERM, clean exit.
  static void stop(DaemonProcess& d) {
    const int status = d.kill_and_wait(SIGTERM);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "llmsvcd exit status " << status;
  }
};

// An app of uid kOtherUid (a forked child), whose scope directory is a planted link: creating
// and listing contexts fail with a clear error. "" on success, else what went wrong.
std::string other_app_is_refused(const std::string& target, const std::string& dir) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    if (::setgid(kOtherUid) != 0 || ::setuid(kOtherUid) != 0) {
      out = "setuid failed";
    } else {
      llmsvc_bind_options o;
      llmsvc_bind_options_init(&o);
      o.target = target.c_str();
      llmsvc_service* svc = nullptr;
      if (llmsvc_bind(&o, &svc) != LLMSVC_OK) {
        out = std::string("bind: ") + llmsvc_last_error();
      } else {
        llmsvc_context_options co;
        llmsvc_context_options_init(&co);
        co.id = "mine";
        llmsvc_context* ctx = nullptr;
        const llmsvc_status st = llmsvc_context_new(svc, &co, &ctx);
        const std::string msg = llmsvc_last_error();
        if (st != LLMSVC_ERR_IO || msg.find("symbolic link") == std::string::npos || msg.find(dir) != std::string::npos)
          out = "create: " + std::string(llmsvc_status_name(st)) + ": " + msg;
        const llmsvc_status ls = llmsvc_context_list(svc, [](const char*, void*) { return 0; }, nullptr);
        const std::string lmsg = llmsvc_last_error();
        if (out.empty() && (ls != LLMSVC_ERR_IO || lmsg.find("symbolic link") == std::string::npos))
          out = "list: " + std::string(llmsvc_status_name(ls)) + ": " + lmsg;
        llmsvc_context_close(ctx);
        llmsvc_unbind(svc);
      }
    }
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) return "the app's process died (status " + std::to_string(status) + ")";
  return out;
}

TEST_F(StateFiles, PlantedLinksAreRefusedAndNothingOutsideIsTouched) {
  // Contexts made by a first daemon.
  {
    DaemonProcess& d = start_daemon();
    llmsvc_service* svc = bind_target(d.target());
    ASSERT_NE(svc, nullptr);
    for (const char* id : {"victim", "chunky", "healthy"}) {
      llmsvc_context* ctx = create_context(svc, id);
      ASSERT_NE(ctx, nullptr);
      ASSERT_EQ(call(ctx), LLMSVC_OK) << id << ": " << last_api_error();
      llmsvc_context_close(ctx);
    }
    llmsvc_unbind(svc);
    stop(d);
  }
  const std::string state = dir_ + "/state";
  const std::string scope = state + "/contexts/uid-0";
  ASSERT_TRUE(fs::exists(scope + "/chunky/chunks")) << "no chunk directory to replace";
  ASSERT_FALSE(fs::is_empty(scope + "/chunky/chunks")) << "no chunk written to swap";

  // Outside the state directory: a history with a torn tail (opening it for appending would
  // cut the tail off), a directory of chunk-like and temporary files, and a scope holding an
  // unfinished context (what the start-up scan removes, were it followed).
  const std::string out = dir_ + "/outside";
  fs::create_directories(out + "/chunks");
  fs::create_directories(out + "/scope/debris/chunks");
  fs::copy_file(scope + "/victim/history.log", out + "/secret.log");
  std::ofstream(out + "/secret.log", std::ios::app | std::ios::binary) << "torn tail";
  fs::copy(scope + "/chunky/chunks", out + "/chunks");
  std::ofstream(out + "/chunks/keep.txt") << "keep";
  std::ofstream(out + "/chunks/.0.kvc." + std::string(kDeadPid) + ".0.tmp") << "bait";
  std::ofstream(out + "/scope/debris/history.log") << "bait";
  const std::vector<std::string> outside_before = snapshot(out);

  // The plants: the victim's history, the chunky context's chunks/, a creation's history, and
  // the scope of another app (uid kOtherUid).
  fs::remove(scope + "/victim/history.log");
  fs::create_symlink(out + "/secret.log", scope + "/victim/history.log");
  fs::remove_all(scope + "/chunky/chunks");
  fs::create_directory_symlink(out + "/chunks", scope + "/chunky/chunks");
  fs::create_directories(scope + "/fresh");
  fs::create_symlink(out + "/secret.log", scope + "/fresh/history.log");
  fs::create_directory_symlink(out + "/scope", state + "/contexts/uid-" + std::to_string(kOtherUid));

  // A second daemon over the planted state (its start-up scan passes over every plant).
  DaemonProcess& d = start_daemon();
  // Another app, whose scope is the planted link: refused, clearly. (First: the app is a
  // forked child, forked while this process holds no connection of the library's.)
  ::chmod(dir_.c_str(), 0711);  // it reaches the socket through dir_
  EXPECT_EQ(other_app_is_refused(d.target(), dir_), "");
  llmsvc_service* svc = bind_target(d.target());
  ASSERT_NE(svc, nullptr);

  // The victim: no open (its history would be appended to or truncated), no info.
  llmsvc_context* ctx = nullptr;
  expect_clear_error(llmsvc_context_open(svc, "victim", &ctx), "open victim");
  llmsvc_context_info info;
  llmsvc_context_info_init(&info);
  expect_clear_error(llmsvc_context_info_get(svc, "victim", &info), "info victim");
  // Deleting it removes the link, never what it points to.
  EXPECT_EQ(llmsvc_context_delete(svc, "victim"), LLMSVC_OK) << last_api_error();
  EXPECT_FALSE(fs::exists(fs::symlink_status(scope + "/victim")));

  // The chunky context: its history is sound, so it works, with its chunks recomputed rather
  // than read from or written to the link (the daemon logs why).
  ASSERT_EQ(llmsvc_context_open(svc, "chunky", &ctx), LLMSVC_OK) << last_api_error();
  EXPECT_EQ(call(ctx), LLMSVC_OK) << last_api_error();
  llmsvc_context_close(ctx);
  // A creation over planted debris: the link is cleared, the context made fresh.
  ctx = create_context(svc, "fresh");
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(call(ctx), LLMSVC_OK) << last_api_error();
  llmsvc_context_close(ctx);
  EXPECT_FALSE(fs::is_symlink(scope + "/fresh/history.log"));

  // Nothing outside changed; the daemon is up and serves the healthy context.
  EXPECT_EQ(snapshot(out), outside_before);
  EXPECT_TRUE(d.accepts());
  ASSERT_EQ(llmsvc_context_open(svc, "healthy", &ctx), LLMSVC_OK) << last_api_error();
  EXPECT_EQ(call(ctx), LLMSVC_OK) << last_api_error();
  llmsvc_context_close(ctx);
  EXPECT_EQ(list_context_ids(svc), (std::set<std::string>{"chunky", "fresh", "healthy"}));
  llmsvc_unbind(svc);
  const std::string log = slurp(d.log_path());
  EXPECT_NE(log.find("chunks will not be swapped"), std::string::npos) << log;
  EXPECT_EQ(snapshot(out), outside_before);
}

TEST_F(StateFiles, DaemonRefusesAStateRootOthersCanWriteUnlessToldToFixIt) {
  const std::string state = dir_ + "/state";
  ASSERT_EQ(::mkdir(state.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(state.c_str(), 0777), 0);
  std::string log;
  const int status = run_to_exit(state, {}, &log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << "status " << status << "\n" << log;
  EXPECT_NE(log.find("state directory '" + state + "' can be written by its group and others (mode 0777)"),
            std::string::npos) << log;
  EXPECT_NE(log.find("--fix-state-permissions"), std::string::npos) << log;
  EXPECT_EQ(mode_of(state), 0777u);  // refused: untouched

  // Told to fix it (flag): 0700, logged, and it serves.
  DaemonProcess& d = start_daemon({"--fix-state-permissions"});
  EXPECT_EQ(mode_of(state), 0700u);
  EXPECT_NE(slurp(d.log_path()).find("mode 0777 -> 0700"), std::string::npos) << slurp(d.log_path());
  llmsvc_service* svc = bind_target(d.target());
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = create_context(svc, "works");
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(call(ctx), LLMSVC_OK) << last_api_error();
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
  stop(d);

  // The same through the configuration file.
  ASSERT_EQ(::chmod(state.c_str(), 0770), 0);
  DaemonProcess& d2 = start_daemon(config_args("fix_state_permissions = true\n"));
  EXPECT_EQ(mode_of(state), 0700u);
  stop(d2);
}

TEST_F(StateFiles, DaemonRefusesAnotherUsersStateRootAndNeverChangesIt) {
  const std::string state = dir_ + "/state";
  for (mode_t mode : {0700u, 0777u}) {
    SCOPED_TRACE(mode);
    ASSERT_EQ(::mkdir(state.c_str(), mode), 0);
    ASSERT_EQ(::chmod(state.c_str(), mode), 0);
    ASSERT_EQ(::chown(state.c_str(), kOtherUid, kOtherUid), 0);
    for (bool fix : {false, true}) {
      std::string log;
      const int status = run_to_exit(state, fix ? std::vector<std::string>{"--fix-state-permissions"}
                                                : std::vector<std::string>{}, &log);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << "status " << status << "\n" << log;
      EXPECT_NE(log.find("state directory '" + state + "' belongs to uid 65534"), std::string::npos) << log;
      EXPECT_EQ(owner_of(state), kOtherUid);
      EXPECT_EQ(mode_of(state), mode);
      EXPECT_TRUE(fs::is_empty(state));
    }
    fs::remove_all(state);
  }
}

TEST_F(StateFiles, EmbeddedRefusesAnUnsafeStateRoot) {
  const std::string state = dir_ + "/embedded";
  ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
  auto bind_embedded = [&](llmsvc_service** svc) {
    llmsvc_bind_options o;
    llmsvc_bind_options_init(&o);
    o.target = "embedded";
    o.state_dir = state.c_str();
    o.n_threads = 2;
    return llmsvc_bind(&o, svc);
  };
  llmsvc_service* svc = nullptr;
  ASSERT_EQ(::chmod(state.c_str(), 0777), 0);
  EXPECT_EQ(bind_embedded(&svc), LLMSVC_ERR_IO);
  EXPECT_NE(last_api_error().find("can be written by"), std::string::npos) << last_api_error();
  EXPECT_EQ(mode_of(state), 0777u);
  ASSERT_EQ(::chmod(state.c_str(), 0700), 0);
  ASSERT_EQ(::chown(state.c_str(), kOtherUid, kOtherUid), 0);
  EXPECT_EQ(bind_embedded(&svc), LLMSVC_ERR_IO);
  EXPECT_NE(last_api_error().find("belongs to uid 65534"), std::string::npos) << last_api_error();
  EXPECT_TRUE(fs::is_empty(state));
  // Ours and closed: it binds and makes contexts.
  ASSERT_EQ(::chown(state.c_str(), 0, 0), 0);
  ASSERT_EQ(bind_embedded(&svc), LLMSVC_OK) << last_api_error();
  llmsvc_context* ctx = create_context(svc, "ok");
  EXPECT_NE(ctx, nullptr);
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
}

TEST_F(StateFiles, InterruptedCreationsAreClearedAtStartAndCompleteContextsKept) {
  int32_t before = 0;
  {
    DaemonProcess& d = start_daemon();
    llmsvc_service* svc = bind_target(d.target());
    ASSERT_NE(svc, nullptr);
    llmsvc_context* ctx = create_context(svc, "kept");
    ASSERT_NE(ctx, nullptr);
    ASSERT_EQ(call(ctx), LLMSVC_OK) << last_api_error();
    llmsvc_context_close(ctx);
    before = tokens_of(svc, "kept");
    llmsvc_unbind(svc);
    stop(d);
  }
  const std::string state = dir_ + "/state";
  const std::string scope = state + "/contexts/uid-0";
  const std::string dead(kDeadPid);
  // What crashes leave: a creation cut after its history, one cut after its first mkdir,
  // temporary files of writes to the complete context and to the root.
  fs::create_directories(scope + "/half/chunks");
  fs::copy_file(scope + "/kept/history.log", scope + "/half/history.log");
  fs::create_directories(scope + "/empty");
  std::ofstream(scope + "/kept/.context.json." + dead + ".0.tmp") << "{";
  std::ofstream(scope + "/kept/.chunks.table." + dead + ".1.tmp") << "x";
  std::ofstream(scope + "/kept/chunks/.0.kvc." + dead + ".2.tmp") << "x";
  std::ofstream(state + "/.switch-profile.json." + dead + ".3.tmp") << "x";
  const std::vector<std::string> kept_files = {scope + "/kept/context.json", scope + "/kept/history.log",
                                               scope + "/kept/chunks.table"};

  DaemonProcess& d = start_daemon();
  const std::string log = slurp(d.log_path());
  EXPECT_NE(log.find("removed 6 leftovers of interrupted writes (4 temporary files, 2 unfinished context "
                     "directories)"), std::string::npos) << log;
  for (const std::string& gone : {scope + "/half", scope + "/empty", scope + "/kept/.context.json." + dead + ".0.tmp",
                                  scope + "/kept/.chunks.table." + dead + ".1.tmp",
                                  scope + "/kept/chunks/.0.kvc." + dead + ".2.tmp",
                                  state + "/.switch-profile.json." + dead + ".3.tmp"})
    EXPECT_FALSE(fs::exists(gone)) << gone;
  for (const std::string& f : kept_files) EXPECT_TRUE(fs::exists(f)) << f;
  // The complete context goes on where it was.
  llmsvc_service* svc = bind_target(d.target());
  ASSERT_NE(svc, nullptr);
  EXPECT_EQ(list_context_ids(svc), (std::set<std::string>{"kept"}));
  EXPECT_EQ(tokens_of(svc, "kept"), before);
  llmsvc_context* ctx = nullptr;
  ASSERT_EQ(llmsvc_context_open(svc, "kept", &ctx), LLMSVC_OK) << last_api_error();
  EXPECT_EQ(call(ctx), LLMSVC_OK) << last_api_error();
  llmsvc_context_close(ctx);
  EXPECT_GT(tokens_of(svc, "kept"), before);
  llmsvc_unbind(svc);
}

}  // namespace
}  // namespace llmsvc::test
