// SPDX-License-Identifier: Apache-2.0
// llmsvcd end to end: a real daemon (child process) on a real socket, reached through the
// public C API bound to "unix:PATH", compared with the embedded engine; cancellation,
// concurrency, SIGKILL and restart, SIGTERM, hostile bytes on the socket, and two users'
// isolation (as root, children drop to two unprivileged uids). Skipped when the default
// model is not fetched.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/file_io.h"
#include "llmsvc/llmsvc.h"
#include "tests/service/daemon_fixture.h"
#include "tests/service/daemon_process.h"
#include "tests/service/raw_client.h"

namespace {

using namespace llmsvc::test;  // the fixture's helpers: bind_target, create_context, collect_piece ...

std::set<std::string> list_ids(llmsvc_service* svc, llmsvc_status* st = nullptr) {
  std::set<std::string> ids;
  llmsvc_status s = llmsvc_context_list(
      svc, [](const char* id, void* u) { static_cast<std::set<std::string>*>(u)->insert(id); return 0; }, &ids);
  if (st) *st = s;
  return ids;
}

// The shared fixture (daemon_fixture.h), with this file's short names.
class Daemon : public llmsvc::test::DaemonTest {
 protected:
  DaemonProcess& start(std::vector<std::string> args = {}, const std::function<void(DaemonProcess&)>& setup = {}) {
    return start_daemon(std::move(args), setup);
  }
  llmsvc_service* start_and_bind() { return bind_target(start().target()); }
};

// Whether llmsvcd, which holds no capability, may read this process's /proc/PID/exe to name
// it: the kernel allows it only to a peer holding no capability either, so not to a test run
// as root (test_privileges checks the naming of a root client without capabilities).
bool daemon_may_read_our_exe() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("CapPrm:", 0) == 0) return line.find_first_not_of("0", line.find_first_not_of(" \t", 7)) == std::string::npos;
  return false;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_F(Daemon, GreedyCallMatchesEmbeddedAndPiecesMakeTheResult) {
  const char* prompt = "Name three colors.";
  Collected embedded;
  llmsvc_call_result er;
  llmsvc_call_result_init(&er);
  {
    llmsvc_service* svc = bind_embedded();
    ASSERT_NE(svc, nullptr);
    llmsvc_context* ctx = create_context(svc, "same");
    auto co = greedy_options(24);
    ASSERT_EQ(llmsvc_call(ctx, prompt, strlen(prompt), &co, collect_piece, &embedded, &er), LLMSVC_OK) << last_api_error();
    llmsvc_context_close(ctx);
    llmsvc_unbind(svc);
  }
  DaemonProcess& d = start();
  llmsvc_service* svc = bind_target(d.target());
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = create_context(svc, "same");
  Collected remote;
  llmsvc_call_result rr;
  llmsvc_call_result_init(&rr);
  auto co = greedy_options(24);
  ASSERT_EQ(llmsvc_call(ctx, prompt, strlen(prompt), &co, collect_piece, &remote, &rr), LLMSVC_OK) << last_api_error();
  EXPECT_EQ(remote.text, embedded.text);
  EXPECT_EQ(remote.tokens, embedded.tokens);
  EXPECT_FALSE(remote.text.empty());
  EXPECT_GT(remote.pieces.load(), 1);  // streamed, not one block
  EXPECT_EQ(rr.generated_tokens, er.generated_tokens);
  EXPECT_EQ(rr.prompt_tokens, er.prompt_tokens);
  EXPECT_EQ(rr.context_tokens, er.context_tokens);
  EXPECT_EQ(rr.finish_reason, er.finish_reason);
  EXPECT_GT(rr.ttft_ms, 0.0);
  llmsvc_stats stats;
  llmsvc_stats_init(&stats);
  ASSERT_EQ(llmsvc_get_stats(svc, &stats), LLMSVC_OK) << last_api_error();
  EXPECT_EQ(stats.calls, 1u);
  EXPECT_EQ(stats.known_contexts, 1);
  EXPECT_EQ(stats.open_contexts, 1);
  EXPECT_GT(stats.weight_bytes, 0u);
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
}

TEST_F(Daemon, ListInfoDeleteAndErrors) {
  llmsvc_service* svc = start_and_bind();
  ASSERT_NE(svc, nullptr);
  llmsvc_context* a = create_context(svc, "a");
  llmsvc_context* b = create_context(svc, "b", true);
  llmsvc_context* dup = nullptr;
  llmsvc_context_options o;
  llmsvc_context_options_init(&o);
  o.id = "a";
  EXPECT_EQ(llmsvc_context_new(svc, &o, &dup), LLMSVC_ERR_EXISTS);
  EXPECT_NE(last_api_error().find("'a'"), std::string::npos) << last_api_error();
  EXPECT_EQ(last_api_error().find("uid-"), std::string::npos) << "the app's scope leaked: " << last_api_error();
  // A generated id.
  llmsvc_context* g = nullptr;
  ASSERT_EQ(llmsvc_context_new(svc, nullptr, &g), LLMSVC_OK) << last_api_error();
  const std::string gid = llmsvc_context_id(g);
  EXPECT_EQ(gid.rfind("ctx-", 0), 0u) << gid;
  EXPECT_EQ(list_ids(svc), (std::set<std::string>{"a", "b", gid}));

  auto co = greedy_options(4);
  ASSERT_EQ(llmsvc_call(a, "Hi", 2, &co, nullptr, nullptr, nullptr), LLMSVC_OK) << last_api_error();
  llmsvc_context_info info;
  llmsvc_context_info_init(&info);
  ASSERT_EQ(llmsvc_context_info_get(svc, "a", &info), LLMSVC_OK) << last_api_error();
  EXPECT_STREQ(info.id, "a");
  EXPECT_EQ(info.turns, 1);
  EXPECT_GT(info.tokens, 4);
  ASSERT_EQ(llmsvc_context_info_get(svc, "b", &info), LLMSVC_OK) << last_api_error();
  EXPECT_EQ(info.raw, 1);
  EXPECT_EQ(info.tokens, 0);

  EXPECT_EQ(llmsvc_context_delete(svc, "a"), LLMSVC_ERR_BUSY);
  llmsvc_context_close(a);
  EXPECT_EQ(llmsvc_context_delete(svc, "a"), LLMSVC_OK) << last_api_error();
  EXPECT_EQ(llmsvc_context_info_get(svc, "a", &info), LLMSVC_ERR_NOT_FOUND);
  llmsvc_context* again = nullptr;
  EXPECT_EQ(llmsvc_context_open(svc, "a", &again), LLMSVC_ERR_NOT_FOUND);
  EXPECT_EQ(llmsvc_context_delete(svc, "nope"), LLMSVC_ERR_NOT_FOUND);
  // Bad options are refused by the daemon's copy of the C API's rules, too.
  co.top_p = 2.0f;
  EXPECT_EQ(llmsvc_call(b, "x", 1, &co, nullptr, nullptr, nullptr), LLMSVC_ERR_INVALID_ARGUMENT);
  llmsvc_context_close(b);
  llmsvc_context_close(g);
  EXPECT_EQ(list_ids(svc), (std::set<std::string>{"b", gid}));
  llmsvc_unbind(svc);
}

TEST_F(Daemon, CancelFromAnotherThread) {
  llmsvc_service* svc = start_and_bind();
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = create_context(svc, "long", true);
  Collected got;
  std::thread canceller([&] {
    while (got.pieces.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(llmsvc_context_cancel(ctx), LLMSVC_OK);
  });
  auto co = greedy_options(4000);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  const char* prompt = "Once upon a time";
  EXPECT_EQ(llmsvc_call(ctx, prompt, strlen(prompt), &co, collect_piece, &got, &r), LLMSVC_ERR_CANCELLED) << last_api_error();
  canceller.join();
  EXPECT_EQ(r.finish_reason, LLMSVC_FINISH_CANCELLED);
  EXPECT_GE(r.generated_tokens, 2);
  EXPECT_LT(r.generated_tokens, 4000);
  // The context is usable afterwards, and a cancel while idle is a no-op.
  EXPECT_EQ(llmsvc_context_cancel(ctx), LLMSVC_OK);
  auto co2 = greedy_options(2);
  EXPECT_EQ(llmsvc_call(ctx, " and", 4, &co2, nullptr, nullptr, nullptr), LLMSVC_OK) << last_api_error();
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
}

TEST_F(Daemon, TwoConcurrentCallsOnTwoContexts) {
  llmsvc_service* svc = start_and_bind();
  ASSERT_NE(svc, nullptr);
  llmsvc_context* c1 = create_context(svc, "one");
  llmsvc_context* c2 = create_context(svc, "two");
  Collected r1, r2;
  llmsvc_status s1 = LLMSVC_ERR_INTERNAL, s2 = LLMSVC_ERR_INTERNAL;
  std::thread t1([&] {
    auto co = greedy_options(16);
    s1 = llmsvc_call(c1, "Tell me about cats.", 19, &co, collect_piece, &r1, nullptr);
  });
  std::thread t2([&] {
    auto co = greedy_options(16);
    s2 = llmsvc_call(c2, "Tell me about cats.", 19, &co, collect_piece, &r2, nullptr);
  });
  t1.join();
  t2.join();
  EXPECT_EQ(s1, LLMSVC_OK);
  EXPECT_EQ(s2, LLMSVC_OK);
  EXPECT_FALSE(r1.text.empty());
  EXPECT_EQ(r1.text, r2.text);  // same prompt, same state, greedy: the same reply
  llmsvc_context_close(c1);
  llmsvc_context_close(c2);
  llmsvc_unbind(svc);
}

// A call's RESULT goes out from its worker before the event loop has done the bookkeeping
// of the call's end; the app's next request on the context, sent the moment it has that
// answer, must still find the context free: never BUSY, never a lost turn, and a close and a
// delete right after the last answer succeed. Two threads, so answers of two contexts
// interleave on one connection.
TEST_F(Daemon, BackToBackCallsOnAContextAreNeverBusy) {
  llmsvc_service* svc = start_and_bind();
  ASSERT_NE(svc, nullptr);
  constexpr int kCalls = 60;
  auto run = [&](const char* id, std::string* failure) {
    llmsvc_context* ctx = create_context(svc, id, /*raw=*/true);
    if (!ctx) return void(*failure = "create: " + last_api_error());
    int32_t expected_tokens = 0;
    for (int i = 0; i < kCalls; ++i) {
      llmsvc_call_result r;
      llmsvc_call_result_init(&r);
      auto co = greedy_options(1);
      const llmsvc_status st = llmsvc_call(ctx, " a", 2, &co, nullptr, nullptr, &r);
      if (st != LLMSVC_OK) {
        *failure = "call " + std::to_string(i) + ": status " + std::to_string(st) + ": " + last_api_error();
        break;
      }
      expected_tokens += r.prompt_tokens + r.generated_tokens;
      if (r.context_tokens != expected_tokens) {
        *failure = "call " + std::to_string(i) + ": context holds " + std::to_string(r.context_tokens) +
                   " tokens, expected " + std::to_string(expected_tokens);
        break;
      }
    }
    llmsvc_context_close(ctx);
    if (llmsvc_context_delete(svc, id) != LLMSVC_OK && failure->empty()) *failure = "delete: " + last_api_error();
  };
  std::string f1, f2;
  std::thread t1([&] { run("back1", &f1); });
  std::thread t2([&] { run("back2", &f2); });
  t1.join();
  t2.join();
  EXPECT_EQ(f1, "");
  EXPECT_EQ(f2, "");
  EXPECT_TRUE(list_ids(svc).empty());
  llmsvc_unbind(svc);
}

// Per-app quotas from the configuration: past each, QUOTA_EXCEEDED and nothing changes.
TEST_F(Daemon, QuotasAnswerQuotaExceededAndChangeNothing) {
  const std::string target =
      start(config_args("[quotas]\ncontexts = 2\ncontext_tokens = 64\nconcurrent_calls = 1\n")).target();
  llmsvc_service* svc = bind_target(target);
  ASSERT_NE(svc, nullptr);
  auto tokens_of = [&](const char* id) {
    llmsvc_context_info info;
    llmsvc_context_info_init(&info);
    EXPECT_EQ(llmsvc_context_info_get(svc, id, &info), LLMSVC_OK) << last_api_error();
    return info.tokens;
  };

  // Contexts: two, then a refusal; deleting one makes room.
  llmsvc_context* one = create_context(svc, "one", true);
  llmsvc_context* two = create_context(svc, "two", true);
  ASSERT_TRUE(one && two);
  llmsvc_context_options o;
  llmsvc_context_options_init(&o);
  o.id = "three";
  llmsvc_context* three = nullptr;
  EXPECT_EQ(llmsvc_context_new(svc, &o, &three), LLMSVC_ERR_QUOTA_EXCEEDED);
  EXPECT_NE(last_api_error().find("quota"), std::string::npos) << last_api_error();
  EXPECT_EQ(three, nullptr);
  EXPECT_EQ(list_ids(svc), (std::set<std::string>{"one", "two"}));
  llmsvc_context_close(two);
  ASSERT_EQ(llmsvc_context_delete(svc, "two"), LLMSVC_OK) << last_api_error();
  three = create_context(svc, "three", true);
  EXPECT_NE(three, nullptr);

  // Tokens per context: a prompt past 64 is refused and leaves the context as it was;
  // generation stops at the quota.
  std::string longer;
  for (int i = 0; i < 80; ++i) longer += " word";
  auto co = greedy_options(8);
  EXPECT_EQ(llmsvc_call(one, longer.data(), longer.size(), &co, nullptr, nullptr, nullptr), LLMSVC_ERR_QUOTA_EXCEEDED);
  EXPECT_EQ(tokens_of("one"), 0);
  auto many = greedy_options(200);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  const char* count = "1, 2, 3, 4, 5,";
  ASSERT_EQ(llmsvc_call(one, count, std::strlen(count), &many, nullptr, nullptr, &r), LLMSVC_OK) << last_api_error();
  EXPECT_EQ(r.finish_reason, LLMSVC_FINISH_CONTEXT_FULL);
  EXPECT_LE(tokens_of("one"), 64);
  EXPECT_GT(r.generated_tokens, 40);

  // Calls in flight: one per app, on all its connections. A second, on a fresh context from
  // another connection while the first generates, is refused for that reason.
  llmsvc_context_close(one);
  ASSERT_EQ(llmsvc_context_delete(svc, "one"), LLMSVC_OK) << last_api_error();
  llmsvc_context* four = create_context(svc, "four", true);
  ASSERT_NE(four, nullptr);
  llmsvc_service* svc2 = bind_target(target);
  ASSERT_NE(svc2, nullptr);
  llmsvc_context* other = nullptr;
  ASSERT_EQ(llmsvc_context_open(svc2, "three", &other), LLMSVC_OK) << last_api_error();
  Collected got;
  llmsvc_status first = LLMSVC_ERR_INTERNAL;
  llmsvc_call_result first_result;
  llmsvc_call_result_init(&first_result);
  std::thread runner([&] {
    auto co48 = greedy_options(48);
    first = llmsvc_call(other, count, std::strlen(count), &co48, collect_piece, &got, &first_result);
  });
  // Sent right after the first piece: the other call has 47 tokens to go.
  while (got.pieces.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const llmsvc_status second = llmsvc_call(four, "x", 1, &co, nullptr, nullptr, nullptr);
  const std::string second_error = last_api_error();
  runner.join();
  EXPECT_EQ(second, LLMSVC_ERR_QUOTA_EXCEEDED) << second_error << "; the first call generated "
                                               << first_result.generated_tokens << " tokens";
  EXPECT_NE(second_error.find("in flight"), std::string::npos) << second_error;
  EXPECT_EQ(first, LLMSVC_OK);
  EXPECT_EQ(tokens_of("four"), 0);
  llmsvc_context_close(other);
  llmsvc_unbind(svc2);
  // Once it ended, the next call runs.
  EXPECT_EQ(llmsvc_call(four, "x", 1, &co, nullptr, nullptr, nullptr), LLMSVC_OK) << last_api_error();
  llmsvc_context_close(four);
  llmsvc_context_close(three);
  llmsvc_unbind(svc);
}

// Connections per app: past the quota a connection gets ERROR on stream 0 and is closed, and
// llmsvc_bind says QUOTA_EXCEEDED; closing one makes room. Other apps are not counted.
TEST_F(Daemon, ConnectionsPastTheQuotaAreRefused) {
  DaemonProcess& d = start(config_args("[quotas]\nconnections = 3\n"));
  std::vector<int> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(raw_connect(d.socket_path()));
    ASSERT_GE(held.back(), 0);
    raw_send(held.back(), kRawHello);
    EXPECT_EQ(frame_types(read_frame(held.back())), std::vector<uint16_t>{kRawWelcome});
  }
  llmsvc_service* svc = bind_target(d.target());  // the third
  ASSERT_NE(svc, nullptr) << last_api_error();
  int over = raw_connect(d.socket_path());
  ASSERT_GE(over, 0);
  EXPECT_EQ(frame_types(read_to_eof(over)), std::vector<uint16_t>{kRawError});
  ::close(over);
  llmsvc_bind_options bo;
  llmsvc_bind_options_init(&bo);
  const std::string target = d.target();
  bo.target = target.c_str();
  // Every time, from many threads at once: the daemon refuses at accept and may have closed
  // before HELLO is written (a client descheduled after connect: the write then fails with
  // EPIPE, but the ERROR waiting to be read is the answer, not "broken pipe").
  {
    std::vector<std::thread> binders;
    std::mutex mu;
    std::vector<std::string> wrong;
    for (int t = 0; t < 8; ++t) {
      binders.emplace_back([&] {
        for (int i = 0; i < 40; ++i) {
          llmsvc_service* got = nullptr;
          const llmsvc_status st = llmsvc_bind(&bo, &got);
          if (st != LLMSVC_ERR_QUOTA_EXCEEDED || got) {
            std::lock_guard lock(mu);
            wrong.push_back(std::string(llmsvc_status_name(st)) + ": " + last_api_error());
            llmsvc_unbind(got);
          }
        }
      });
    }
    for (auto& b : binders) b.join();
    EXPECT_TRUE(wrong.empty()) << wrong.size() << " of 320 binds were not refused for the quota; first: "
                               << (wrong.empty() ? "" : wrong.front());
  }
  // The third connection still works; closing another makes room for a new one.
  auto co = greedy_options(1);
  llmsvc_context* ctx = create_context(svc, "c", true);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(llmsvc_call(ctx, "Hi", 2, &co, nullptr, nullptr, nullptr), LLMSVC_OK) << last_api_error();
  ::close(held.back());
  held.pop_back();
  llmsvc_service* again = nullptr;
  for (int i = 0; i < 200 && !again; ++i) {  // the daemon sees the close in its own time
    if (llmsvc_bind(&bo, &again) != LLMSVC_OK) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(again, nullptr) << last_api_error();
  llmsvc_unbind(again);
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
  for (int fd : held) ::close(fd);
  const std::string log = read_text(d.log_path());
  EXPECT_NE(log.find("refusing a connection of uid"), std::string::npos) << log;
}

TEST_F(Daemon, SigkillMidCallThenRestartKeepsEveryAcknowledgedTurn) {
  DaemonProcess* d = &start();
  llmsvc_service* svc = bind_target(d->target());
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = create_context(svc, "survivor");
  auto co = greedy_options(8);
  ASSERT_EQ(llmsvc_call(ctx, "Hello!", 6, &co, nullptr, nullptr, nullptr), LLMSVC_OK) << last_api_error();
  llmsvc_context_info before;
  llmsvc_context_info_init(&before);
  ASSERT_EQ(llmsvc_context_info_get(svc, "survivor", &before), LLMSVC_OK) << last_api_error();
  ASSERT_EQ(before.turns, 1);

  Collected got;
  std::thread killer([&] {
    while (got.pieces.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    d->kill_and_wait(SIGKILL);
  });
  auto long_call = greedy_options(4000);
  const char* prompt = "Write a long story about the sea.";
  EXPECT_EQ(llmsvc_call(ctx, prompt, strlen(prompt), &long_call, collect_piece, &got, nullptr), LLMSVC_ERR_UNAVAILABLE);
  killer.join();
  EXPECT_FALSE(last_api_error().empty());
  // While the daemon is down, the service says so.
  llmsvc_context_info info;
  llmsvc_context_info_init(&info);
  EXPECT_EQ(llmsvc_context_info_get(svc, "survivor", &info), LLMSVC_ERR_UNAVAILABLE);

  d = &start();  // the same socket and state
  ASSERT_EQ(llmsvc_context_info_get(svc, "survivor", &info), LLMSVC_OK) << last_api_error();
  EXPECT_EQ(info.turns, before.turns);  // the acknowledged turn, not the interrupted one
  EXPECT_EQ(info.tokens, before.tokens);
  // The old context handle works again: reconnected and reopened by id.
  ASSERT_EQ(llmsvc_call(ctx, "Bye!", 4, &co, nullptr, nullptr, nullptr), LLMSVC_OK) << last_api_error();
  ASSERT_EQ(llmsvc_context_info_get(svc, "survivor", &info), LLMSVC_OK) << last_api_error();
  EXPECT_EQ(info.turns, 2);
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
}

TEST_F(Daemon, SigtermFinishesOrCancelsCallsAndExitsZero) {
  DaemonProcess& d = start({"--stop-timeout-ms", "500"});
  llmsvc_service* svc = bind_target(d.target());
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = create_context(svc, "t", true);
  Collected got;
  llmsvc_status st = LLMSVC_ERR_INTERNAL;
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  std::thread caller([&] {
    auto co = greedy_options(100000);
    st = llmsvc_call(ctx, "Once upon a time", 16, &co, collect_piece, &got, &r);
  });
  while (got.pieces.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const int status = d.kill_and_wait(SIGTERM);
  caller.join();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The call in flight was cancelled within the bound and still got its RESULT.
  EXPECT_EQ(st, LLMSVC_ERR_CANCELLED) << last_api_error();
  EXPECT_EQ(r.finish_reason, LLMSVC_FINISH_CANCELLED);
  EXPECT_FALSE(std::filesystem::exists(d.socket_path()));
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
}

// Hostile clients use the raw socket helpers of tests/service/raw_client.h.

TEST_F(Daemon, GarbageAndTruncatedFramesDoNotHurtOtherClients) {
  DaemonProcess& d = start();
  llmsvc_service* svc = bind_target(d.target());
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = create_context(svc, "victim", true);
  Collected got;
  llmsvc_status st = LLMSVC_ERR_INTERNAL;
  std::thread caller([&] {
    auto co = greedy_options(48);
    st = llmsvc_call(ctx, "The quick brown fox", 19, &co, collect_piece, &got, nullptr);
  });
  // Garbage: answered with an ERROR frame ("LLMS" magic) and closed.
  int g = raw_connect(d.socket_path());
  ASSERT_GE(g, 0);
  raw_send(g, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string answer = read_to_eof(g);
  ::close(g);
  EXPECT_EQ(answer.substr(0, 4), "LLMS");
  // A header announcing more than the handshake limit: refused the same way.
  int h = raw_connect(d.socket_path());
  ASSERT_GE(h, 0);
  std::string big("LLMS\x01\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\x7f", 16);
  raw_send(h, big);
  EXPECT_EQ(read_to_eof(h).substr(0, 4), "LLMS");
  ::close(h);
  // Truncated frames: half a header, half a HELLO, then gone.
  for (size_t cut : {size_t{3}, size_t{10}, size_t{20}}) {
    int t = raw_connect(d.socket_path());
    ASSERT_GE(t, 0);
    raw_send(t, kRawHello.substr(0, cut));
    ::close(t);
  }
  // Random bytes from many connections at once.
  std::vector<int> fds;
  for (int i = 0; i < 16; ++i) {
    int f = raw_connect(d.socket_path());
    ASSERT_GE(f, 0);
    std::string junk(512, '\0');
    for (size_t k = 0; k < junk.size(); ++k) junk[k] = static_cast<char>((k * 131 + static_cast<size_t>(i) * 7) & 0xff);
    raw_send(f, junk);
    fds.push_back(f);
  }
  for (int f : fds) ::close(f);
  caller.join();
  EXPECT_EQ(st, LLMSVC_OK) << last_api_error();
  EXPECT_FALSE(got.text.empty());
  // The log names who sent the garbage from the kernel's word: this process's uid and pid,
  // and its systemd unit, or else its executable.
  {
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    ASSERT_GT(n, 0);
    const std::string who = "protocol error from uid " + std::to_string(::getuid()) + " pid " + std::to_string(::getpid());
    const std::string log = read_text(d.log_path());
    const size_t at = log.find(who);
    ASSERT_NE(at, std::string::npos) << log;
    const std::string rest = log.substr(at + who.size(), log.find('\n', at) - at - who.size());
    EXPECT_TRUE(rest.rfind(" unit ", 0) == 0 || rest.rfind(" exe " + std::string(self, static_cast<size_t>(n)) + ":", 0) == 0 ||
                (!daemon_may_read_our_exe() && rest.rfind(":", 0) == 0))
        << rest;
  }
  // The daemon is still there for everyone.
  auto co = greedy_options(2);
  EXPECT_EQ(llmsvc_call(ctx, " again", 6, &co, nullptr, nullptr, nullptr), LLMSVC_OK) << last_api_error();
  llmsvc_service* other = bind_target(d.target());
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(list_ids(other), (std::set<std::string>{"victim"}));
  llmsvc_unbind(other);
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
}

// Under systemd, where stderr is the journal ($JOURNAL_STREAM names it), the log goes to the
// journal natively with the app's fields. The journal is the test's datagram socket, mounted
// over /run/systemd/journal in the daemon's own mount namespace; nothing of it reaches stderr.
TEST_F(Daemon, LogsToTheJournalWithTheAppsFields) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a mount namespace for the daemon)";
  const pid_t probe = ::fork();
  if (probe == 0) ::_exit(::unshare(CLONE_NEWNS) == 0 ? 0 : 1);
  int probe_status = 0;
  ::waitpid(probe, &probe_status, 0);
  if (!WIFEXITED(probe_status) || WEXITSTATUS(probe_status) != 0) GTEST_SKIP() << "no mount namespaces here";

  const std::string jdir = dir_ + "/journal";
  ASSERT_EQ(::mkdir(jdir.c_str(), 0755), 0);
  const int journal = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  ASSERT_GE(journal, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string jsock = jdir + "/socket";
  ASSERT_LT(jsock.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, jsock.c_str(), jsock.size() + 1);
  ASSERT_EQ(::bind(journal, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  // JOURNAL_STREAM names the daemon's stderr (its log file) by device and inode.
  DaemonProcess* dp = nullptr;
  DaemonProcess& d = start({}, [&](DaemonProcess& p) {
    dp = &p;
    const int log = ::open(p.log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    struct stat st {};
    ASSERT_EQ(::fstat(log, &st), 0);
    ::close(log);
    p.add_env("JOURNAL_STREAM=" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino));
    p.before_exec([jdir] {
      if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(120);
      (void)::mkdir("/run/systemd", 0755);
      (void)::mkdir("/run/systemd/journal", 0755);
      if (::mount(jdir.c_str(), "/run/systemd/journal", nullptr, MS_BIND, nullptr) != 0) ::_exit(121);
    });
  });
  ASSERT_EQ(dp, &d);
  int g = raw_connect(d.socket_path());
  ASSERT_GE(g, 0);
  raw_send(g, "GET / HTTP/1.1\r\n\r\n");
  (void)read_to_eof(g);
  ::close(g);

  // The protocol error's entry: KEY=value lines, one datagram per entry.
  std::string entry;
  for (int waited = 0; entry.empty() && waited < 30000; waited += 10) {
    char buf[65536];
    ssize_t n;
    while ((n = ::recv(journal, buf, sizeof(buf), 0)) > 0) {
      const std::string dgram(buf, static_cast<size_t>(n));
      if (dgram.find("MESSAGE=protocol error from") != std::string::npos) entry = dgram;
    }
    if (entry.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::close(journal);
  ASSERT_FALSE(entry.empty()) << "no entry reached the journal; the daemon's stderr:\n" << read_text(d.log_path());
  auto has = [&](const std::string& line) { return ("\n" + entry).find("\n" + line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("PRIORITY=4")) << entry;
  EXPECT_TRUE(has("SYSLOG_IDENTIFIER=llmsvcd")) << entry;
  EXPECT_TRUE(has("LLMSVC_UID=" + std::to_string(::getuid()))) << entry;
  EXPECT_TRUE(has("LLMSVC_PID=" + std::to_string(::getpid()))) << entry;
  EXPECT_TRUE(entry.find("\nLLMSVC_UNIT=") != std::string::npos || entry.find("\nLLMSVC_EXE=") != std::string::npos ||
              !daemon_may_read_our_exe())
      << entry;
  EXPECT_EQ(read_text(d.log_path()).find("protocol error"), std::string::npos) << "also on stderr";
}

TEST_F(Daemon, MoreConcurrentCallsThanMaxCallsWaitTheirTurn) {
  DaemonProcess& d = start({"--max-calls", "2"});
  llmsvc_service* svc = bind_target(d.target());
  ASSERT_NE(svc, nullptr);
  constexpr int kCalls = 5;
  std::vector<llmsvc_context*> ctx;
  for (char name[] = "c0"; name[1] < '0' + kCalls; ++name[1]) ctx.push_back(create_context(svc, name));
  std::vector<llmsvc_status> st(kCalls, LLMSVC_ERR_INTERNAL);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      auto co = greedy_options(6);
      st[i] = llmsvc_call(ctx[i], "Hi", 2, &co, nullptr, nullptr, nullptr);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kCalls; ++i) EXPECT_EQ(st[i], LLMSVC_OK) << i;
  for (auto* c : ctx) llmsvc_context_close(c);
  llmsvc_unbind(svc);
}

// A datagram socket standing in for systemd's notify socket. Like systemd it reads all the
// time: a datagram queue holds only net.unix.max_dgram_qlen messages (10 here), and a
// sender blocks once it is full.
class NotifySocket {
 public:
  explicit NotifySocket(std::string path) : path_(std::move(path)), fd_(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    timeval tv{0, 50000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    reader_ = std::thread([this] {
      char buf[4096];
      while (!stop_) {
        const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
        if (n <= 0) continue;
        std::lock_guard<std::mutex> lock(mu_);
        notes_.append(buf, static_cast<size_t>(n)).push_back('\n');
      }
    });
  }
  ~NotifySocket() {
    stop_ = true;
    reader_.join();
    ::close(fd_);
  }
  std::string env() const { return "NOTIFY_SOCKET=" + path_; }
  // Every notification received so far, one per line.
  std::string received() {
    std::lock_guard<std::mutex> lock(mu_);
    return notes_;
  }

 private:
  std::string path_;
  int fd_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string notes_;
  std::thread reader_;
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
  return n;
}

TEST_F(Daemon, SocketActivatedBySystemdAndNotifies) {
  NotifySocket notify(dir_ + "/notify");
  DaemonProcess& d = start({}, [&](DaemonProcess& p) {
    p.socket_activated();
    p.add_env(notify.env());
  });
  llmsvc_service* svc = bind_target(d.target());  // the first connection starts llmsvcd
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = create_context(svc, "activated");
  auto co = greedy_options(2);
  EXPECT_EQ(llmsvc_call(ctx, "Hi", 2, &co, nullptr, nullptr, nullptr), LLMSVC_OK) << last_api_error();
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
  const int status = d.kill_and_wait(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(std::filesystem::exists(d.socket_path()));  // systemd's socket is not the daemon's to remove
  const std::string notes = notify.received();
  EXPECT_NE(notes.find("READY=1"), std::string::npos) << notes;
  EXPECT_NE(notes.find("STATUS=serving"), std::string::npos) << notes;
  EXPECT_NE(notes.find("STOPPING=1"), std::string::npos) << notes;
}

// Socket-activated with --exit-idle-ms: once its last client is gone it exits 0 by itself
// (systemd keeps the socket); meanwhile it feeds the watchdog every half interval.
TEST_F(Daemon, SocketActivatedExitsWhenIdleAndFeedsTheWatchdog) {
  NotifySocket notify(dir_ + "/notify");
  DaemonProcess& d = start({"--exit-idle-ms", "1500"}, [&](DaemonProcess& p) {
    p.socket_activated();
    p.add_env(notify.env());
    p.add_env("WATCHDOG_USEC=200000");
  });
  llmsvc_service* svc = bind_target(d.target());
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = create_context(svc, "idle");
  auto co = greedy_options(2);
  EXPECT_EQ(llmsvc_call(ctx, "Hi", 2, &co, nullptr, nullptr, nullptr), LLMSVC_OK) << last_api_error();
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
  const int status = d.wait_exit(30000);
  ASSERT_NE(status, -1) << "still running long after its last client left; its log:\n" << read_text(d.log_path());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::string notes = notify.received();
  EXPECT_GE(count(notes, "WATCHDOG=1"), 5u) << notes;  // 1.5 s idle at least, one every 100 ms
  EXPECT_NE(notes.find("STOPPING=1"), std::string::npos) << notes;
  const std::string text = read_text(d.log_path());
  EXPECT_NE(text.find("listening on the socket systemd passed"), std::string::npos) << text;
  EXPECT_NE(text.find("no clients for 1500 ms: exiting"), std::string::npos) << text;
}

TEST_F(Daemon, SilentConnectionsTimeOutAndIdleClientsKeepAlive) {
  DaemonProcess& d = start({"--idle-timeout-ms", "300"});
  // No HELLO within 5 s: closed.
  const int silent = raw_connect(d.socket_path());
  ASSERT_GE(silent, 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(read_to_eof(silent), "");
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::seconds(4));
  EXPECT_LT(waited, std::chrono::seconds(10));
  ::close(silent);
  // Handshaken, then silent for longer than the idle timeout: closed.
  const int idle = raw_connect(d.socket_path());
  ASSERT_GE(idle, 0);
  raw_send(idle, kRawHello);
  const std::string welcome = read_to_eof(idle);
  EXPECT_EQ(welcome.substr(0, 6), std::string("LLMS\x02\x00", 6));  // WELCOME, then the close
  ::close(idle);
  // A bound client idle for longer than the idle timeout is still connected (it pings).
  llmsvc_service* svc = bind_target(d.target());
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = create_context(svc, "idle");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  auto co = greedy_options(2);
  EXPECT_EQ(llmsvc_call(ctx, "Hi", 2, &co, nullptr, nullptr, nullptr), LLMSVC_OK) << last_api_error();
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
}

// Runs `body` in a child process as `uid`; returns its exit code (0: every check passed;
// otherwise the number of the failed check).
int as_user(uid_t uid, const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(100);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

TEST_F(Daemon, TwoUidsCannotSeeEachOthersContexts) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (drops to two unprivileged uids)";
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);  // the socket's directory, reachable by both
  DaemonProcess& d = start();
  const std::string target = d.target();
  constexpr uid_t kAlice = 65534, kBob = 65533;
  auto exists_for_caller = [&](const char* id) {
    llmsvc_service* svc = bind_target(target);
    llmsvc_context_info info;
    llmsvc_context_info_init(&info);
    const llmsvc_status st = llmsvc_context_info_get(svc, id, &info);
    llmsvc_unbind(svc);
    return st;
  };
  // Alice makes a context with one turn.
  EXPECT_EQ(as_user(kAlice, [&] {
              llmsvc_service* svc = bind_target(target);
              if (!svc) return 1;
              llmsvc_context* c = create_context(svc, "secret");
              if (!c) return 2;
              auto co = greedy_options(4);
              if (llmsvc_call(c, "My PIN is 1234.", 15, &co, nullptr, nullptr, nullptr) != LLMSVC_OK) return 3;
              llmsvc_context_close(c);
              llmsvc_unbind(svc);
              return 0;
            }),
            0);
  // Bob cannot list, open, describe or delete it; his "secret" is his own.
  EXPECT_EQ(as_user(kBob, [&] {
              llmsvc_service* svc = bind_target(target);
              if (!svc) return 1;
              if (!list_ids(svc).empty()) return 2;
              llmsvc_context* c = nullptr;
              if (llmsvc_context_open(svc, "secret", &c) != LLMSVC_ERR_NOT_FOUND) return 3;
              if (exists_for_caller("secret") != LLMSVC_ERR_NOT_FOUND) return 4;
              if (llmsvc_context_delete(svc, "secret") != LLMSVC_ERR_NOT_FOUND) return 5;
              c = create_context(svc, "secret");
              if (!c) return 6;
              llmsvc_context_close(c);
              if (list_ids(svc) != std::set<std::string>{"secret"}) return 7;
              if (llmsvc_context_delete(svc, "secret") != LLMSVC_OK) return 8;
              llmsvc_stats stats;
              llmsvc_stats_init(&stats);
              if (llmsvc_get_stats(svc, &stats) != LLMSVC_OK || stats.calls != 0 || stats.known_contexts != 0) return 9;
              llmsvc_unbind(svc);
              return 0;
            }),
            0);
  // Alice's context is untouched, and root (another uid) does not see it either.
  EXPECT_EQ(as_user(kAlice, [&] {
              llmsvc_service* svc = bind_target(target);
              if (list_ids(svc) != std::set<std::string>{"secret"}) return 1;
              llmsvc_context_info info;
              llmsvc_context_info_init(&info);
              if (llmsvc_context_info_get(svc, "secret", &info) != LLMSVC_OK || info.turns != 1) return 2;
              llmsvc_unbind(svc);
              return 0;
            }),
            0);
  EXPECT_EQ(exists_for_caller("secret"), LLMSVC_ERR_NOT_FOUND);
  // On storage: one directory per uid, 0700.
  struct stat st {};
  const std::string alice_dir = d.state_dir() + "/contexts/uid-65534";
  ASSERT_EQ(::stat(alice_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(std::filesystem::exists(alice_dir + "/secret/context.json"));
}

// [quotas.app.NAME]: an app named in the configuration gets its own limits; the others keep
// the defaults. Here every app may hold one context and uid 65534 three.
TEST_F(Daemon, PerAppQuotaOverridesApplyToThatAppOnly) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a second app under another uid)";
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  constexpr uid_t kOther = 65534;
  const std::string target =
      start(config_args("[quotas]\ncontexts = 1\n[quotas.app." + std::to_string(kOther) + "]\ncontexts = 3\n")).target();
  // How many of four contexts an app could create (the rest: QUOTA_EXCEEDED), as an exit code.
  auto created = [&] {
    llmsvc_service* svc = bind_target(target);
    if (!svc) return 100;
    int n = 0;
    for (int i = 0; i < 4; ++i) {
      llmsvc_context_options o;
      llmsvc_context_options_init(&o);
      const char* const ids[] = {"c0", "c1", "c2", "c3"};
      o.id = ids[i];
      llmsvc_context* ctx = nullptr;
      const llmsvc_status st = llmsvc_context_new(svc, &o, &ctx);
      if (st == LLMSVC_OK) ++n;
      else if (st != LLMSVC_ERR_QUOTA_EXCEEDED) n = 50;
      llmsvc_context_close(ctx);
    }
    llmsvc_unbind(svc);
    return n;
  };
  EXPECT_EQ(as_user(kOther, created), 3);
  EXPECT_EQ(created(), 1);  // this app (root): the default
}

// The KV share (kv_share 0.5 of an 8 MiB budget, for every app or for this app, root, alone):
// an app whose contexts need more than its share loses its own chunks, never another app's.
// Without shares, the budget's LRU eviction takes the other app's idle context first.
class DaemonKvShare : public Daemon, public ::testing::WithParamInterface<const char*> {};
INSTANTIATE_TEST_SUITE_P(EveryAppOrOne, DaemonKvShare,
                         ::testing::Values("[quotas]\nkv_share = 0.5\n", "[quotas.app.root]\nkv_share = 0.5\n"));

TEST_P(DaemonKvShare, AnAppPastItsKvShareLosesOnlyItsOwnChunks) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a second app under another uid)";
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  constexpr uint64_t kBudget = 8u << 20;  // a call's ~85 tokens need 2.2 MiB (f16) while it runs
  const std::string target =
      start(config_args("kv_budget_bytes = " + std::to_string(kBudget) + "\n" + GetParam())).target();
  std::string text;
  for (int i = 0; i < 12; ++i) text += " The river runs past the mill.";  // ~85 tokens
  constexpr uid_t kOther = 65534;
  // The other app's context, and how many of its chunks are in memory (the exit code).
  ASSERT_EQ(as_user(kOther, [&] {
              llmsvc_service* svc = bind_target(target);
              llmsvc_context* ctx = svc ? create_context(svc, "kept", true) : nullptr;
              auto co = greedy_options(4);
              const bool ok = ctx && llmsvc_call(ctx, text.data(), text.size(), &co, nullptr, nullptr, nullptr) == LLMSVC_OK;
              llmsvc_context_close(ctx);
              llmsvc_unbind(svc);
              return ok ? 0 : 1;
            }),
            0);
  auto others_resident = [&] {
    return as_user(kOther, [&] {
      llmsvc_service* svc = bind_target(target);
      llmsvc_context_info info;
      llmsvc_context_info_init(&info);
      const bool ok = svc && llmsvc_context_info_get(svc, "kept", &info) == LLMSVC_OK;
      llmsvc_unbind(svc);
      return ok ? std::min(info.chunks_resident, 199) : 200;
    });
  };
  const int before = others_resident();
  ASSERT_GT(before, 0);
  ASSERT_LT(before, 200);

  // This app: eight such contexts (about 1.1 MiB each at 8 bits), more than its 4 MiB share
  // and more than the whole budget.
  llmsvc_service* svc = bind_target(target);
  ASSERT_NE(svc, nullptr);
  for (int i = 0; i < 8; ++i) {
    llmsvc_context* ctx = create_context(svc, ("big-" + std::to_string(i)).c_str(), true);
    ASSERT_NE(ctx, nullptr);
    auto co = greedy_options(4);
    EXPECT_EQ(llmsvc_call(ctx, text.data(), text.size(), &co, nullptr, nullptr, nullptr), LLMSVC_OK) << last_api_error();
    llmsvc_context_close(ctx);
  }
  llmsvc_stats stats;
  llmsvc_stats_init(&stats);
  ASSERT_EQ(llmsvc_get_stats(svc, &stats), LLMSVC_OK);
  EXPECT_LE(stats.kv_bytes, kBudget / 2) << "this app's resident KV";
  EXPECT_GT(stats.swap_out_bytes, 0u);
  llmsvc_unbind(svc);
  EXPECT_EQ(others_resident(), before) << "the other app's chunks were taken";
}

// The swap quota (swap_bytes): an app whose contexts are swapped out under a small budget
// keeps at most that many bytes of chunk files on storage; the chunks past it are dropped
// and recomputed, and every call succeeds.
TEST_F(Daemon, AnAppsSwapFilesStayWithinItsSwapQuota) {
  constexpr uint64_t kQuota = 2u << 20;
  DaemonProcess& d = start(config_args("kv_budget_bytes = " + std::to_string(8u << 20) + "\n[quotas]\nswap_bytes = " +
                                       std::to_string(kQuota) + "\n"));
  std::string text;
  for (int i = 0; i < 12; ++i) text += " The river runs past the mill.";  // ~85 tokens
  llmsvc_service* svc = bind_target(d.target());
  ASSERT_NE(svc, nullptr);
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 8; ++i) {
      const std::string id = "s-" + std::to_string(i);
      llmsvc_context* ctx = round == 0 ? create_context(svc, id.c_str(), true) : nullptr;
      if (round > 0) {
        ASSERT_EQ(llmsvc_context_open(svc, id.c_str(), &ctx), LLMSVC_OK) << last_api_error();
      }
      ASSERT_NE(ctx, nullptr);
      auto co = greedy_options(4);
      EXPECT_EQ(llmsvc_call(ctx, text.data(), text.size(), &co, nullptr, nullptr, nullptr), LLMSVC_OK) << last_api_error();
      llmsvc_context_close(ctx);
    }
  }
  llmsvc_unbind(svc);
  ASSERT_EQ(d.kill_and_wait(SIGTERM), 0);  // its swap writes end before it does
  uint64_t files = 0;
  const std::filesystem::path scope = std::filesystem::path(d.state_dir()) / "contexts" / ("uid-" + std::to_string(::geteuid()));
  for (const auto& e : std::filesystem::recursive_directory_iterator(scope))
    if (e.is_regular_file() && e.path().extension() == ".kvc") files += e.file_size();
  EXPECT_GT(files, kQuota / 2) << "little was swapped: the test shows nothing";
  EXPECT_LE(files, kQuota);
}

// A device that is not here (by flag or in the configuration): the daemon does not start,
// and its log names the device and those present; "cpu" by name starts.
TEST_F(Daemon, ADeviceNotPresentIsRefusedAtStartAndNamed) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--device", "npu"}, config_args("devices = [\"npu\"]\n")}) {
    DaemonProcess d(dir_, args);
    const size_t before = read_text(d.log_path()).size();  // the log is appended to
    ASSERT_FALSE(d.start(60000));
    const std::string log = read_text(d.log_path()).substr(before);
    EXPECT_NE(log.find("'npu'"), std::string::npos) << log;
    EXPECT_NE(log.find("present: cpu"), std::string::npos) << log;
  }
  llmsvc_service* svc = bind_target(start({"--device", "cpu"}).target());
  EXPECT_NE(svc, nullptr);
  llmsvc_unbind(svc);
}

// Two devices: the model split layer by layer over the CPU and a second CPU device with its own
// memory ("cpu:1"), embedded (the list in bind options) and in llmsvcd (the configuration's
// devices and placement), answers with the very tokens one device gives.
TEST_F(Daemon, AModelSplitOverTwoDevicesAnswersAsOneDeviceDoes) {
  const char* prompt = "Name three colors.";
  // The tokens of the reply, embedded on `device`.
  auto embedded = [&](const char* device) {
    std::vector<int32_t> tokens;
    llmsvc_service* svc = bind_embedded(device);
    if (!svc) return tokens;
    std::string id = std::string("split-") + device;  // a context of its own per binding
    std::replace_if(id.begin(), id.end(), [](char c) { return c == ',' || c == ':'; }, '.');
    llmsvc_context* ctx = create_context(svc, id.c_str());
    auto co = greedy_options(16);
    Collected got;
    EXPECT_EQ(llmsvc_call(ctx, prompt, strlen(prompt), &co, collect_piece, &got, nullptr), LLMSVC_OK) << last_api_error();
    llmsvc_context_close(ctx);
    llmsvc_unbind(svc);
    tokens = got.tokens;
    return tokens;
  };
  const std::vector<int32_t> one = embedded("cpu");
  ASSERT_FALSE(one.empty());
  EXPECT_EQ(embedded("cpu,cpu:1"), one);

  DaemonProcess& d = start(config_args("devices = [\"cpu\", \"cpu:1\"]\nplacement = \"layers:15\"\n"));
  llmsvc_service* svc = bind_target(d.target());
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = create_context(svc, "split");
  Collected remote;
  auto co = greedy_options(16);
  ASSERT_EQ(llmsvc_call(ctx, prompt, strlen(prompt), &co, collect_piece, &remote, nullptr), LLMSVC_OK) << last_api_error();
  EXPECT_EQ(remote.tokens, one);
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
}

// The model on the OpenCL device (PoCL in CI) answers through llmsvcd with the very tokens it
// gives embedded on that device: the daemon's sandbox (the seccomp allowlist, from start-up on)
// leaves the device's kernels runnable. Compared against OpenCL embedded, not the CPU: a GPU's
// numerics differ slightly from the CPU's, so a rare token may too.
TEST_F(Daemon, AModelOnOpenClAnswersAsEmbeddedDoes) {
  const char* prompt = "Name three colors.";
  auto co = greedy_options(16);
  Collected embedded;
  {
    llmsvc_service* svc = bind_embedded("opencl");
    ASSERT_NE(svc, nullptr);
    llmsvc_context* ctx = create_context(svc, "on-opencl");
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(llmsvc_call(ctx, prompt, strlen(prompt), &co, collect_piece, &embedded, nullptr), LLMSVC_OK)
        << last_api_error();
    llmsvc_context_close(ctx);
    llmsvc_unbind(svc);
  }
  ASSERT_FALSE(embedded.tokens.empty()) << "no reply embedded on opencl: the comparison would show nothing";

  // The driver's own cache is empty in the daemon's environment, as a fresh service's would be
  // (the embedded run above filled this user's): PoCL makes each kernel's code when it is
  // first launched, after the filter came on (from llmsvc's cached program binaries, 268 files
  // for SmolLM2), so a filter that stopped it would fail the call. llmsvc's program cache
  // stays the test run's: building every program from source again took 100 s on two cores.
  const std::string user_cache = dir_ + "/user-cache";
  DaemonProcess& d = start_daemon(config_args("devices = [\"opencl\"]\n"), [&](DaemonProcess& p) {
    p.add_env("XDG_CACHE_HOME=" + user_cache);
    p.add_env("POCL_CACHE_DIR=" + user_cache + "/pocl");
  }, 400000);
  llmsvc_service* svc = bind_target(d.target());
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = create_context(svc, "on-opencl");
  ASSERT_NE(ctx, nullptr);
  Collected remote;
  EXPECT_EQ(llmsvc_call(ctx, prompt, strlen(prompt), &co, collect_piece, &remote, nullptr), LLMSVC_OK)
      << last_api_error() << "; see " << d.log_path();
  EXPECT_EQ(remote.tokens, embedded.tokens) << "daemon: '" << remote.text << "', embedded: '" << embedded.text << "'";
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
}

// Fair scheduling: one app's long generations do not hold every call worker. An app (uid
// 65534, a child process) starts four long calls at once; another app's short call, sent
// while they generate, finishes before any of them, because an app runs at most two calls at
// a time (the daemon has four workers) and running calls take turns token by token. Before,
// the short call waited in line behind whole generations. An order, not a timing.
TEST_F(Daemon, OneAppsLongCallsDoNotHoldAnotherAppsShortCall) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a second app under another uid)";
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);  // the socket's directory, reachable by both
  const std::string target = start().target();
  constexpr int kLong = 4, kLongTokens = 48;
  int events[2];
  ASSERT_EQ(::pipe(events), 0);
  // The long app reports on the pipe: 'S' when a call's first piece arrives, then 'D' (done,
  // all tokens) or 'E' (any failure) when it returns.
  const pid_t long_app = ::fork();
  if (long_app == 0) {
    ::close(events[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(100);
    llmsvc_service* svc = bind_target(target);
    if (!svc) ::_exit(101);
    std::vector<std::thread> calls;
    for (int i = 0; i < kLong; ++i) {
      calls.emplace_back([&, i] {
        llmsvc_context* ctx = create_context(svc, ("long-" + std::to_string(i)).c_str(), true);
        auto first = [](const char*, size_t, int32_t, void* fd) -> int {
          static thread_local bool said = false;
          if (!said) said = ::write(*static_cast<int*>(fd), "S", 1) == 1;
          return 0;
        };
        auto opt = greedy_options(kLongTokens);
        llmsvc_call_result r;
        llmsvc_call_result_init(&r);
        const char* prompt = "1, 2, 3, 4, 5, 6, 7,";  // counting goes on: no early end of text
        const bool ok = ctx && llmsvc_call(ctx, prompt, std::strlen(prompt), &opt, first, &events[1], &r) == LLMSVC_OK &&
                        r.generated_tokens == kLongTokens;
        (void)!::write(events[1], ok ? "D" : "E", 1);
        llmsvc_context_close(ctx);
      });
    }
    for (auto& t : calls) t.join();
    llmsvc_unbind(svc);
    ::_exit(0);
  }
  ASSERT_GT(long_app, 0);
  ::close(events[1]);
  std::string seen;
  auto read_event = [&] {
    char c = 0;
    const bool got = ::read(events[0], &c, 1) == 1;
    if (got) seen += c;
    return got;
  };
  // Two of its calls are generating (the other two wait for its turn).
  while (std::count(seen.begin(), seen.end(), 'S') < 2 && read_event()) {
  }
  ASSERT_EQ(std::count(seen.begin(), seen.end(), 'S'), 2) << seen;

  llmsvc_service* svc = bind_target(target);
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = create_context(svc, "short", true);
  ASSERT_NE(ctx, nullptr);
  auto opt = greedy_options(4);
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  EXPECT_EQ(llmsvc_call(ctx, "The sky is", 10, &opt, nullptr, nullptr, &r), LLMSVC_OK) << last_api_error();
  EXPECT_EQ(r.generated_tokens, 4);
  // What the long app reported until now: no call of it has returned.
  ASSERT_EQ(::fcntl(events[0], F_SETFL, O_NONBLOCK), 0);
  while (read_event()) {
  }
  EXPECT_EQ(seen.find_first_of("DE"), std::string::npos) << "the long app's events before the short call ended: " << seen;
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);

  ASSERT_EQ(::fcntl(events[0], F_SETFL, 0), 0);
  while (read_event()) {
  }
  ::close(events[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(long_app, &status, 0), long_app);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 'D'), kLong) << "every long call ends well: " << seen;
}

// The running daemon is confined by its seccomp allowlist: the kernel reports a filter on
// it, its own start-up probes (an IPv4 socket, an execve, a fork) were refused with EPERM
// (clone3 with ENOSYS), and it still serves calls (every other test here runs under the
// filter too).
TEST_F(Daemon, RunsUnderItsSyscallFilter) {
  DaemonProcess& d = start();
  llmsvc_service* svc = bind_target(d.target());
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = create_context(svc, "confined");
  auto co = greedy_options(4);
  EXPECT_EQ(llmsvc_call(ctx, "Hello", 5, &co, nullptr, nullptr, nullptr), LLMSVC_OK) << last_api_error();
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
  const std::string status = read_text("/proc/" + std::to_string(d.pid()) + "/status");
  EXPECT_NE(status.find("Seccomp:\t2"), std::string::npos) << status;
  EXPECT_NE(status.find("NoNewPrivs:\t1"), std::string::npos) << status;
  const std::string log = read_text(d.log_path());
  EXPECT_NE(log.find("system-call filter on (socket(AF_INET): Operation not permitted, execve: Operation not permitted, "
                     "fork: Operation not permitted, clone3: Function not implemented)"),
            std::string::npos)
      << log;
}

}  // namespace
