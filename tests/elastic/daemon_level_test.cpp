// SPDX-License-Identifier: Apache-2.0
// A call's elastic level through a real llmsvcd (protocol 7: CALL.options.level_percent, RESULT's
// stats.level_percent), on an elastic model made by elastify from a committed random model: a
// call at a level reports it and gives the tokens the embedded library gives at that level; a
// level the file lacks is refused naming its levels, through the daemon as embedded; memory
// pressure (systemd's protocol, on a FIFO) gives back weights the larger levels read.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <string>
#include <vector>

#include "tests/elastic/elastic_util.h"
#include "tests/model/bad_input_util.h"
#include "tests/service/daemon_fixture.h"

namespace llmsvc::test {
namespace {

struct Reply {
  llmsvc_status status = LLMSVC_ERR_INTERNAL;
  std::string error;
  std::vector<int32_t> tokens;
  int32_t level = -1;
};

int add_tokens(const llmsvc_piece* piece, void* user) {
  auto* ids = static_cast<std::vector<int32_t>*>(user);
  ids->insert(ids->end(), piece->tokens, piece->tokens + piece->n_tokens);
  return 0;
}

// A greedy call at `level` on a new raw context of `svc` (deleted after).
Reply call_at(llmsvc_service* svc, const std::string& id, int32_t level) {
  Reply out;
  llmsvc_context* ctx = create_context(svc, id.c_str(), /*raw=*/true);
  if (!ctx) return out;
  llmsvc_call_options o = greedy_options(12);
  o.level_percent = level;
  o.on_tokens = add_tokens;
  o.on_tokens_user = &out.tokens;
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  const std::string prompt = "The lighthouse keeper wrote in his log every evening:";
  out.status = llmsvc_call(ctx, prompt.data(), prompt.size(), &o, nullptr, nullptr, &r);
  out.error = last_api_error();
  if (out.status == LLMSVC_OK) out.level = r.level_percent;
  llmsvc_context_close(ctx);
  EXPECT_EQ(llmsvc_context_delete(svc, id.c_str()), LLMSVC_OK) << last_api_error();
  return out;
}

using ElasticDaemon = DaemonTest;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(ElasticDaemon, ACallAtALevelReportsItAsEmbedded) {
  const std::string model = dir_ + "/elastic.gguf";
  auto rep = elastify::run(small_options(test_model(kLlama), model));
  ASSERT_TRUE(rep.ok()) << rep.status().message();

  DaemonProcess& d = start_daemon({}, [&](DaemonProcess& p) { p.set_model(model); });
  llmsvc_service* remote = bind_target(d.target());
  ASSERT_TRUE(remote);
  llmsvc_service* local = bind_embedded_model(model, dir_ + "/embedded-state");
  ASSERT_TRUE(local);

  std::vector<int32_t> smallest;
  for (int32_t level : {20, 60, 100, 0}) {
    SCOPED_TRACE(level);
    const Reply daemon = call_at(remote, "at-" + std::to_string(level), level);
    const Reply embedded = call_at(local, "at-" + std::to_string(level), level);
    ASSERT_EQ(daemon.status, LLMSVC_OK) << daemon.error;
    ASSERT_EQ(embedded.status, LLMSVC_OK) << embedded.error;
    EXPECT_EQ(daemon.level, level == 0 ? 100 : level);
    EXPECT_EQ(daemon.level, embedded.level);
    EXPECT_FALSE(daemon.tokens.empty());
    EXPECT_EQ(daemon.tokens, embedded.tokens);
    if (level == 20) smallest = daemon.tokens;  // another model than the full one: its reply differs
    if (level == 100) {
      EXPECT_NE(daemon.tokens, smallest);
    }
  }
  for (int32_t level : {25, 101}) {
    SCOPED_TRACE(level);
    const Reply daemon = call_at(remote, "bad", level);
    EXPECT_EQ(daemon.status, LLMSVC_ERR_INVALID_ARGUMENT);
    EXPECT_NE(daemon.error.find("level_percent"), std::string::npos) << daemon.error;
    if (level == 25) {
      EXPECT_NE(daemon.error.find("20, 30, 40, 50, 60, 70, 80, 90, 100"), std::string::npos) << daemon.error;
    }
    EXPECT_EQ(call_at(local, "bad", level).status, LLMSVC_ERR_INVALID_ARGUMENT);
  }
  llmsvc_unbind(remote);
  llmsvc_unbind(local);
}

uint64_t weight_bytes(llmsvc_service* svc) {
  llmsvc_stats s;
  llmsvc_stats_init(&s);
  EXPECT_EQ(llmsvc_get_stats(svc, &s), LLMSVC_OK) << last_api_error();
  return s.weight_bytes;
}

// systemd's memory-pressure protocol: $MEMORY_PRESSURE_WATCH names a FIFO, anything written to
// it is pressure. llmsvcd gives back the weight rows only larger levels read (its weight
// figure falls, its log says so), and a call at the full level takes them back and answers
// as before.
TEST_F(ElasticDaemon, MemoryPressureGivesBackWhatLargerLevelsRead) {
  const std::string model = dir_ + "/elastic.gguf";
  auto rep = elastify::run(small_options(test_model(kLlama), model));
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  const std::string fifo = dir_ + "/pressure";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);

  DaemonProcess& d = start_daemon({}, [&](DaemonProcess& p) {
    p.set_model(model);
    p.add_env("MEMORY_PRESSURE_WATCH=" + fifo);
  });
  llmsvc_service* remote = bind_target(d.target());
  ASSERT_TRUE(remote);
  const Reply full = call_at(remote, "before", 100);
  ASSERT_EQ(full.status, LLMSVC_OK) << full.error;
  const uint64_t held = weight_bytes(remote);

  const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(w, 0);
  ASSERT_EQ(::write(w, "!", 1), 1);
  ::close(w);
  uint64_t now = held;
  for (int i = 0; i < 500 && now == held; ++i) {  // the loop sees it at its next round
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    now = weight_bytes(remote);
  }
  EXPECT_LT(now, held);
  EXPECT_NE(read_file(d.log_path()).find("memory pressure: gave back"), std::string::npos);
  EXPECT_NE(read_file(d.log_path()).find("memory pressure: fifo " + fifo), std::string::npos);

  const Reply again = call_at(remote, "after", 100);
  ASSERT_EQ(again.status, LLMSVC_OK) << again.error;
  EXPECT_EQ(again.tokens, full.tokens);
  EXPECT_EQ(weight_bytes(remote), held);
  llmsvc_unbind(remote);
}

}  // namespace
}  // namespace llmsvc::test
