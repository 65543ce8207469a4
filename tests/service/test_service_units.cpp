// SPDX-License-Identifier: Apache-2.0
// llmsvcd's pieces without a model: the TOML configuration, the listening socket (stale
// files replaced, live sockets and other files left alone) and the worker pool's turns.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/file_io.h"
#include "runtime/service/config.h"
#include "runtime/service/listen_socket.h"
#include "runtime/service/worker_pool.h"

namespace llmsvc::service {
namespace {

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/llmsvcd-unit-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)fileio::remove_tree(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

using Config = TempDir;
using ListenSocket = TempDir;

TEST_F(Config, ReadsEveryKey) {
  const std::string path = write("c.toml", R"(
model = "/m.gguf"
state_dir = "/var/lib/llmsvc"
listen = "/run/llmsvc/llmsvc.sock"
socket_mode = "0660"
threads = 3
n_ctx = 2048
kv_budget_bytes = 1073741824
kv_ratio = 0.25
idle_timeout_ms = 30000
exit_idle_ms = 60000
max_calls = 8
stop_timeout_ms = 2000
max_unsent_bytes = 131072
write_timeout_ms = 1500
[quotas]
contexts = 16
context_tokens = 1024
concurrent_calls = 3
connections = 9
kv_share = 0.25
)");
  DaemonConfig c;
  ASSERT_TRUE(load_config_file(path, c).ok());
  EXPECT_EQ(c.model, "/m.gguf");
  EXPECT_EQ(c.state_dir, "/var/lib/llmsvc");
  EXPECT_EQ(c.listen, "/run/llmsvc/llmsvc.sock");
  EXPECT_EQ(c.socket_mode, 0660u);
  EXPECT_EQ(c.threads, 3);
  EXPECT_EQ(c.n_ctx, 2048);
  EXPECT_EQ(c.kv_budget_bytes, 1073741824u);
  EXPECT_DOUBLE_EQ(c.kv_ratio, 0.25);
  EXPECT_EQ(c.idle_timeout_ms, 30000u);
  EXPECT_EQ(c.exit_idle_ms, 60000u);
  EXPECT_EQ(c.max_calls, 8u);
  EXPECT_EQ(c.stop_timeout_ms, 2000);
  EXPECT_EQ(c.max_unsent_bytes, 131072u);
  EXPECT_EQ(c.write_timeout_ms, 1500);
  EXPECT_EQ(c.quotas.defaults.contexts, 16u);
  EXPECT_EQ(c.quotas.defaults.context_tokens, 1024u);
  EXPECT_EQ(c.quotas.defaults.concurrent_calls, 3u);
  EXPECT_EQ(c.quotas.defaults.connections, 9u);
  EXPECT_DOUBLE_EQ(c.quotas.defaults.kv_share, 0.25);
  EXPECT_TRUE(c.quotas.by_uid.empty());
}

// [quotas.app.NAME] by uid or user name: its own keys over the defaults, for that uid only.
TEST_F(Config, PerAppQuotasOverrideTheDefaultsForThatUidOnly) {
  DaemonConfig c;
  ASSERT_TRUE(load_config_file(write("c.toml", R"(
[quotas]
contexts = 4
connections = 2
[quotas.app.1000]
contexts = 64
kv_share = 0.8
[quotas.app.root]
connections = 0
)"),
                               c)
                  .ok());
  EXPECT_EQ(c.quotas.of(1000).contexts, 64u);
  EXPECT_EQ(c.quotas.of(1000).connections, 2u);  // left out: the default
  EXPECT_DOUBLE_EQ(c.quotas.of(1000).kv_share, 0.8);
  EXPECT_EQ(c.quotas.of(0).contexts, 4u);       // "root", resolved to uid 0
  EXPECT_EQ(c.quotas.of(0).connections, 0u);    // no limit for it
  EXPECT_EQ(c.quotas.of(1001).contexts, 4u);    // anyone else: the defaults
  EXPECT_EQ(c.quotas.of(1001).connections, 2u);
  EXPECT_DOUBLE_EQ(c.quotas.of(1001).kv_share, AppQuotas{}.kv_share);  // left out: the code's default
}

TEST_F(Config, PerAppQuotasRefuseUnknownUsersKeysAndDuplicates) {
  for (const char* text : {"[quotas.app.no-such-user-llmsvc]\ncontexts = 1\n", "[quotas.app.1000]\ncontext = 1\n",
                           "[quotas.app.1000]\napp = 1\n", "[quotas]\napp = 3\n", "[quotas.app]\nroot = 3\n",
                           "[quotas.app.0]\ncontexts = 1\n[quotas.app.root]\ncontexts = 2\n",
                           "[quotas.app.99999999999]\ncontexts = 1\n", "[quotas.app.1000]\nkv_share = -0.5\n"}) {
    DaemonConfig c;
    Status st = load_config_file(write("c.toml", text), c);
    EXPECT_EQ(st.code(), Code::invalid_argument) << text;
    EXPECT_NE(st.message().find("quotas.app"), std::string::npos) << st.message();
  }
}

// The configuration installed with the units parses, and so do its commented keys.
TEST_F(Config, TheShippedFileAndItsCommentedKeysParse) {
  std::ifstream in(LLMSVCD_SHIPPED_CONFIG);
  ASSERT_TRUE(in) << LLMSVCD_SHIPPED_CONFIG;
  std::string shipped, uncommented;
  // The live lines are left out of the second: each has its commented twin above the tables.
  for (std::string line; std::getline(in, line);) {
    shipped += line + "\n";
    if (line.rfind("# ", 0) == 0 && (line.find(" = ") != std::string::npos || line[2] == '['))
      uncommented += line.substr(2) + "\n";
  }
  DaemonConfig c;
  Status st = load_config_file(write("shipped.toml", shipped), c);
  EXPECT_TRUE(st.ok()) << st.message();
  // [quotas.app.assistant] names a user this machine may not have: the example's user, else root.
  const bool has_user = resolve_user("assistant").ok();
  if (!has_user) uncommented.replace(uncommented.find("[quotas.app.assistant]"), 22, "[quotas.app.root]");
  DaemonConfig all;
  st = load_config_file(write("uncommented.toml", uncommented), all);
  EXPECT_TRUE(st.ok()) << st.message() << "\n" << uncommented;
  EXPECT_GT(all.quotas.defaults.contexts, 0u);
  EXPECT_EQ(all.quotas.by_uid.size(), 1u);
}

// Quotas and timeouts are on with no configuration at all, and the shipped file states the
// code's defaults (so the two cannot drift apart).
TEST_F(Config, BoundsAreOnByDefaultAndTheShippedFileStatesThem) {
  const DaemonConfig code;
  const AppQuotas& q = code.quotas.defaults;
  EXPECT_GT(q.contexts, 0u);
  EXPECT_GT(q.concurrent_calls, 0u);
  EXPECT_GT(q.connections, 0u);
  EXPECT_GT(q.kv_share, 0.0);
  EXPECT_GT(q.swap_bytes, 0u);
  EXPECT_GT(code.idle_timeout_ms, 0u);
  EXPECT_GT(code.min_rate_bytes_per_s, 0u);
  DaemonConfig shipped;
  Status st = load_config_file(LLMSVCD_SHIPPED_CONFIG, shipped);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(shipped.quotas.defaults.contexts, q.contexts);
  EXPECT_EQ(shipped.quotas.defaults.context_tokens, q.context_tokens);
  EXPECT_EQ(shipped.quotas.defaults.concurrent_calls, q.concurrent_calls);
  EXPECT_EQ(shipped.quotas.defaults.connections, q.connections);
  EXPECT_DOUBLE_EQ(shipped.quotas.defaults.kv_share, q.kv_share);
  EXPECT_EQ(shipped.quotas.defaults.swap_bytes, q.swap_bytes);
  EXPECT_EQ(shipped.idle_timeout_ms, code.idle_timeout_ms);
}

TEST_F(Config, AdaptersByName) {
  DaemonConfig c;
  ASSERT_TRUE(load_config_file(write("c.toml", "[adapters]\nsummarize = \"/a/s.gguf\"\n\"tone.v2\" = \"t.gguf\"\n"), c).ok());
  EXPECT_EQ(c.adapters, (std::vector<std::pair<std::string, std::string>>{{"summarize", "/a/s.gguf"}, {"tone.v2", "t.gguf"}}));
}

TEST_F(Config, MissingKeysKeepDefaults) {
  DaemonConfig c;
  ASSERT_TRUE(load_config_file(write("c.toml", "threads = 1\n"), c).ok());
  EXPECT_EQ(c.threads, 1);
  EXPECT_EQ(c.max_calls, 4u);
  EXPECT_EQ(c.socket_mode, 0666u);
  EXPECT_EQ(c.max_unsent_bytes, 256u << 10);
  EXPECT_EQ(c.write_timeout_ms, 30000);
}

TEST_F(Config, RefusesTyposBadValuesAndBadSyntax) {
  for (const char* text : {"thread = 2\n", "threads = \"two\"\n", "max_calls = 0\n", "kv_ratio = 2.0\n",
                           "socket_mode = \"0999\"\n", "model = 5\n", "threads = [\n", "quotas = 3\n",
                           "[quotas]\ncontext = 1\n", "[quotas]\ncontexts = -1\n", "[quotas]\nconcurrent_calls = \"1\"\n", "[quotas]\nkv_share = 1.5\n", "[quotas]\nswap_bytes = -1\n", "devices = \"cpu\"\n", "devices = [1]\n", "devices = [\"cpu\", \"cpu\"]\n",
                           "adapters = \"a.gguf\"\n", "[adapters]\n\"../x\" = \"a.gguf\"\n", "[adapters]\nx = 1\n",
                           "[adapters]\nx = \"\"\n",
                           "max_unsent_bytes = 1000\n", "write_timeout_ms = 0\n"}) {
    DaemonConfig c;
    Status st = load_config_file(write("c.toml", text), c);
    EXPECT_EQ(st.code(), Code::invalid_argument) << text;
    EXPECT_NE(st.message().find("c.toml"), std::string::npos) << st.message();
  }
  DaemonConfig c;
  EXPECT_FALSE(load_config_file(dir_ + "/missing.toml", c).ok());
}

TEST(ParseMode, Octal) {
  EXPECT_EQ(*parse_mode("0666"), 0666u);
  EXPECT_EQ(*parse_mode("600"), 0600u);
  EXPECT_FALSE(parse_mode("").ok());
  EXPECT_FALSE(parse_mode("0x1").ok());
  EXPECT_FALSE(parse_mode("77777").ok());
}

TEST_F(ListenSocket, CreatesWithTheMode) {
  const std::string path = dir_ + "/s.sock";
  auto fd = listen_unix(path, 0660);
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  ::close(*fd);
}

TEST_F(ListenSocket, ReplacesAStaleSocketButNotALiveOne) {
  const std::string path = dir_ + "/s.sock";
  auto live = listen_unix(path, 0666);
  ASSERT_TRUE(live.ok());
  auto second = listen_unix(path, 0666);  // someone accepts there
  EXPECT_EQ(second.status().code(), Code::exists);
  EXPECT_NE(second.status().message().find("another daemon"), std::string::npos);
  ::close(*live);  // the file stays: a daemon that died
  auto again = listen_unix(path, 0666);
  ASSERT_TRUE(again.ok()) << again.status().message();
  ::close(*again);
}

TEST_F(ListenSocket, NeverRemovesOtherFiles) {
  const std::string path = write("not-a-socket", "data");
  auto fd = listen_unix(path, 0666);
  EXPECT_EQ(fd.status().code(), Code::exists);
  EXPECT_TRUE(fileio::exists(path));
  EXPECT_FALSE(listen_unix(dir_ + "/" + std::string(200, 'x'), 0666).ok());  // too long for sun_path
}

// Bound before start-up, listening after it (llmsvcd binds while still privileged): a
// connection in between is refused; a start-up that fails removes the file; a path another
// daemon took over meanwhile is neither listened on nor removed.
TEST_F(ListenSocket, BoundThenListenedOnOnlyIfStillOurs) {
  const std::string path = dir_ + "/s.sock";
  {
    auto bound = BoundUnixSocket::bind(path, 0666);
    ASSERT_TRUE(bound.ok()) << bound.status().message();
    const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_NE(::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(probe);
  }  // never listened on: gone
  EXPECT_FALSE(fileio::exists(path));
  int second_fd = -1;
  {
    auto first = BoundUnixSocket::bind(path, 0666);
    ASSERT_TRUE(first.ok());
    auto second = listen_unix(path, 0666);  // the first is not listening yet: a stale file to it
    ASSERT_TRUE(second.ok()) << second.status().message();
    second_fd = *second;
    auto late = first->listen();
    EXPECT_EQ(late.status().code(), Code::exists) << late.status().message();
  }  // the first's destructor leaves the second's file alone
  EXPECT_TRUE(fileio::exists(path));
  ::close(second_fd);
}

TEST(SystemdFds, NoneWithoutSystemd) {
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_PID");
  auto fds = systemd_listen_fds();
  ASSERT_TRUE(fds.ok());
  EXPECT_TRUE(fds->empty());
}

// Keys take turns: a key with many tasks queued gets one run, then the other keys' first.
TEST(WorkerPool, KeysTakeTurns) {
  std::mutex mu;
  std::vector<std::string> order;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> blocking;
  {
    WorkerPool pool(1, "test-pool");
    pool.post([&] { blocking.set_value(), released.wait(); }, "a");
    blocking.get_future().wait();  // the one thread is busy; what follows queues
    auto record = [&](const char* name) {
      return [&, name] {
        std::lock_guard l(mu);
        order.push_back(name);
      };
    };
    pool.post(record("a1"), "a");
    pool.post(record("a2"), "a");
    pool.post(record("a3"), "a");
    pool.post(record("b1"), "b");
    pool.post(record("c1"), "c");
    pool.post(record("b2"), "b");
    release.set_value();
  }  // the destructor runs what is queued
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "b1", "c1", "a2", "b2", "a3"}));
}

// A key at its limit waits while other keys use the free threads.
TEST(WorkerPool, AKeyRunsAtMostItsLimitAtOnce) {
  std::promise<void> release_a1;
  std::shared_future<void> a1_released = release_a1.get_future().share();
  std::promise<void> a1_started, b1_done;
  std::atomic<bool> a2_ran{false}, a1_done{false};
  std::atomic<bool> a2_before_a1{false};
  {
    WorkerPool pool(3, "test-pool", 1);
    pool.post([&] { a1_started.set_value(), a1_released.wait(), a1_done = true; }, "a");
    a1_started.get_future().wait();
    pool.post([&] { a2_before_a1 = !a1_done.load(), a2_ran = true; }, "a");
    pool.post([&] { b1_done.set_value(); }, "b");
    b1_done.get_future().wait();  // b ran beside a1, on a free thread
    EXPECT_FALSE(a2_ran.load()) << "a's second task ran while its first was still running";
    release_a1.set_value();
  }
  EXPECT_TRUE(a2_ran.load());
  EXPECT_FALSE(a2_before_a1.load());
}

// The task a key's limit held back starts when the key's running task ends, with the pool
// running on (not only when its destructor drains the queue). Nothing else wakes a thread
// for it: the thread that finished looks for it.
TEST(WorkerPool, AHeldBackTaskStartsWhenItsKeyFinishesOne) {
  std::promise<void> release_a1, a1_started, a2_ran;
  std::shared_future<void> a1_released = release_a1.get_future().share();
  WorkerPool pool(3, "test-pool", 1);
  pool.post([&] { a1_started.set_value(), a1_released.wait(); }, "a");
  a1_started.get_future().wait();
  pool.post([&] { a2_ran.set_value(); }, "a");  // held back: a is at its limit
  release_a1.set_value();
  EXPECT_EQ(a2_ran.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << "a's second task never started after its first ended";
}

// Swaps the lead for a task of `key`, trying again while the pool's other threads are still
// on their way to wait (a new pool's threads start as they please). Gives up after a minute.
bool swap_when_idle(WorkerPool& pool, const std::function<void()>& lead, const std::string& key) {
  for (int i = 0; i < 60000; ++i) {
    if (pool.swap_lead(lead, key)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// Leader/followers: the thread playing the lead swaps it for a task. The task runs on that
// thread, an idle thread takes the lead over, and the two run at once.
TEST(WorkerPool, ASwappedLeadGoesToAnIdleThreadWhileTheTaskRunsHere) {
  std::promise<std::thread::id> first_lead, second_lead;
  std::shared_future<std::thread::id> second = second_lead.get_future().share();
  std::promise<std::pair<bool, std::thread::id>> task_saw;
  std::atomic<int> leads{0};
  std::function<void()> lead;
  WorkerPool pool(2, "test-pool");  // after what its threads use
  lead = [&] {
    if (leads++ > 0) return second_lead.set_value(std::this_thread::get_id());
    first_lead.set_value(std::this_thread::get_id());
    if (!swap_when_idle(pool, lead, "a")) return task_saw.set_value({false, std::thread::id()});
    // The task, here: the new lead starts while it runs.
    const bool overlapped = second.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
    task_saw.set_value({overlapped, std::this_thread::get_id()});
    pool.finish_here("a");
  };
  pool.post_lead(lead);
  const std::thread::id lead1 = first_lead.get_future().get();
  auto [overlapped, task_thread] = task_saw.get_future().get();
  ASSERT_TRUE(overlapped) << "the lead was not taken over while the task ran";
  EXPECT_EQ(task_thread, lead1);
  EXPECT_NE(second.get(), lead1);
}

// No swap without a thread to take the lead over, nor past the task's key limit; and a task
// run here counts against its key's limit until finish_here.
TEST(WorkerPool, ASwapKeepsToTheThreadsAndTheKeyLimit) {
  {
    WorkerPool pool(1, "test-pool");
    std::promise<bool> swapped;
    pool.post_lead([&] { swapped.set_value(pool.swap_lead([] {}, "a")); });
    EXPECT_FALSE(swapped.get_future().get()) << "swapped with no idle thread to take the lead";
  }
  std::promise<void> release_a1, a1_started, b2_ran;
  std::shared_future<void> a1_released = release_a1.get_future().share();
  std::atomic<bool> swapped_a{false}, swapped_b{false}, b2_early{false}, in_here{false};
  WorkerPool pool(3, "test-pool", 1);  // after what its threads use
  pool.post([&] { a1_started.set_value(), a1_released.wait(); }, "a");
  a1_started.get_future().wait();
  pool.post_lead([&] {
    // a is at its limit; b is not. Each round tries a just before b, so a is refused while
    // a thread is idle for the lead (b's swap shows there is one).
    for (int i = 0; i < 60000; ++i) {
      if (pool.swap_lead([] {}, "a")) {
        swapped_a = true;
        return pool.finish_here("a");
      }
      if (pool.swap_lead([] {}, "b")) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    swapped_b = true;
    // b's task runs here; b's next task, posted now, waits for it.
    in_here = true;
    pool.post([&] { b2_early = in_here.load(), b2_ran.set_value(); }, "b");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // room for a wrong start
    in_here = false;
    pool.finish_here("b");
  });
  EXPECT_EQ(b2_ran.get_future().wait_for(std::chrono::seconds(70)), std::future_status::ready);
  EXPECT_FALSE(swapped_a.load()) << "swapped for a task of a key at its limit";
  EXPECT_FALSE(b2_early.load()) << "b's second task ran while its first ran here";
  release_a1.set_value();
}
}  // namespace
}  // namespace llmsvc::service
