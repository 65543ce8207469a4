// SPDX-License-Identifier: Apache-2.0
// Crash safety under the whole memory policy: a child process replays a long trace of calls
// over several contexts under a tight KV budget (so chunks are evicted, written, loaded and
// recomputed all the time) and reports every acknowledged call through a pipe; it is
// SIGKILLed at random moments (during start-up, calls, swap writes) and restarted, many
// times. Afterwards every context's history holds every acknowledged token, in order, and
// the chunk files the killed processes left behind are good: an engine loading them answers
// exactly as one that recomputes every context from its tokens.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/engine/engine.h"
#include "runtime/core/persist/history_log.h"
#include "runtime/core/persist/state_dir.h"
#include "tests/common/test_paths.h"

namespace llmsvc {
namespace {

namespace fs = std::filesystem;

constexpr int kContexts = 4;
constexpr int kFullTokens = 600;  // a context this long takes no more calls (all of them: the child ends)
constexpr uint64_t kChunk = 30ull * 2 * 16 * 192 * 2;  // SmolLM2 f16 chunk (see test_engine_swap.cpp)
constexpr int32_t kVocab = 49152;

std::unique_ptr<Engine> make_engine(const std::string& state, bool swap) {
  EngineOptions o;
  o.model_path = test::default_model_path();
  o.n_threads = 1;
  o.n_ctx = 1024;
  // The largest context (up to kFullTokens + a call, 39 chunks) must fit while it is in a
  // call; the four together reach about 160 chunks.
  o.kv_budget_bytes = swap ? 48 * kChunk : 0;
  o.kv_ratio = -1;  // f16: loaded and recomputed chunks must agree bit for bit
  o.state_dir = state;
  o.kv_swap = swap;
  auto e = Engine::create(o);
  return e.ok() ? std::move(e).value() : nullptr;
}

std::string ctx_id(int i) {
  std::string id = "c";  // piecewise: GCC 12 warns falsely (-Wrestrict) on "c" + to_string
  return id += std::to_string(i);
}

// One acknowledged call, as the child reports it: the context and the tokens it appended.
struct Ack {
  int32_t context = 0;
  std::vector<int32_t> tokens;
};

bool write_all(int fd, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  while (n > 0) {
    const ssize_t w = write(fd, b, n);
    if (w <= 0) return false;
    b += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    const ssize_t r = read(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// The child: calls contexts in a seeded random order until killed (or a context fills).
[[noreturn]] void child_main(const std::string& state, uint32_t seed, int out_fd) {
  auto e = make_engine(state, true);
  if (!e) _exit(2);
  std::mt19937 rng(seed);
  for (;;) {
    int c = static_cast<int>(rng() % kContexts), full = 0;
    for (; full < kContexts; ++full, c = (c + 1) % kContexts) {
      auto info = e->context_info(ctx_id(c));
      if (!info.ok() || info->tokens < kFullTokens) break;
    }
    if (full == kContexts) _exit(5);  // every context is long enough
    if (!e->open_context(ctx_id(c)).ok()) {
      ContextOptions co;
      co.id = ctx_id(c);
      co.raw = true;
      if (!e->create_context(co).ok()) _exit(3);
    }
    CallParams p;
    p.max_tokens = 1;  // every token evaluated in a batch: recompute is bit-exact
    CallStats st;
    const Status s = e->call(ctx_id(c), " and then, a little later,", p, nullptr, &st);
    if (!s.ok()) {
      std::fprintf(stderr, "child: call on %s failed: %s\n", ctx_id(c).c_str(), s.message().c_str());
      _exit(4);
    }
    std::vector<int32_t> added = st.prompt_ids;
    added.insert(added.end(), st.generated_ids.begin(), st.generated_ids.end());
    const int32_t head[2] = {c, static_cast<int32_t>(added.size())};
    if (!write_all(out_fd, head, sizeof head) || !write_all(out_fd, added.data(), added.size() * sizeof(int32_t)))
      _exit(6);
  }
}

std::vector<int32_t> history(const std::string& state, int c) {
  persist::StateDir dir(state);
  auto h = persist::HistoryLog::peek(dir.history_path(ctx_id(c)), kVocab);
  return h.ok() ? h->tokens : std::vector<int32_t>{};
}

TEST(CrashTrace, SigkillAnywhereLosesNoAcknowledgedTurnAndLeavesGoodChunkFiles) {
  ASSERT_TRUE(fs::exists(test::default_model_path())) << "run tools/scripts/fetch_model.sh";
  const std::string state = std::string(std::getenv("LLMSVC_STATE_DIR")) + "/crash-trace";
  fs::remove_all(state);
  std::mt19937 rng(20261122);
  // What each context must start with: every acknowledged token so far (a call in flight at
  // the kill may or may not have landed; what storage holds then becomes the new base).
  std::vector<std::vector<int32_t>> acked(kContexts);
  int total_acks = 0, kills = 0;
  for (int run = 0; run < 30; ++run) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(fds[0]);
      child_main(state, rng(), fds[1]);
    }
    close(fds[1]);
    // Acknowledged calls to wait for (0: killed during start-up or its first call), then a
    // random delay: the kill lands anywhere in a call, its switch-in or its swap writes.
    const int wait_acks = static_cast<int>(rng() % 5);
    for (int i = 0; i < wait_acks; ++i) {
      int32_t head[2];
      if (!read_all(fds[0], head, sizeof head)) break;
      ASSERT_TRUE(head[0] >= 0 && head[0] < kContexts && head[1] > 0 && head[1] < 4096);
      std::vector<int32_t> added(static_cast<size_t>(head[1]));
      ASSERT_TRUE(read_all(fds[0], added.data(), added.size() * sizeof(int32_t)));
      acked[head[0]].insert(acked[head[0]].end(), added.begin(), added.end());
      total_acks++;
    }
    usleep(static_cast<useconds_t>(rng() % 200000));
    kills += kill(child, SIGKILL) == 0;
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    if (WIFEXITED(status)) {
      ASSERT_EQ(WEXITSTATUS(status), 5) << "the child failed (its reason is above)";
    }
    close(fds[0]);
    for (int c = 0; c < kContexts; ++c) {
      const std::vector<int32_t> h = history(state, c);
      ASSERT_GE(h.size(), acked[c].size()) << "context " << c << " lost acknowledged tokens after run " << run;
      ASSERT_TRUE(std::equal(acked[c].begin(), acked[c].end(), h.begin())) << "context " << c << " after run " << run;
      acked[c] = h;
    }
  }
  EXPECT_GT(total_acks, 20) << "too few calls were acknowledged for the kills to mean much";
  EXPECT_GT(kills, 20);

  // The chunk files left behind: loading them (tight budget, swap on) must answer exactly as
  // recomputing every context from its tokens (no budget, swap off, on a copy).
  const std::string copy = state + "-recompute";
  fs::remove_all(copy);
  fs::copy(state, copy, fs::copy_options::recursive);
  std::vector<std::string> loaded_answers, recomputed_answers;
  int loaded = 0;
  for (const auto& [dir, swap] : {std::pair{state, true}, std::pair{copy, false}}) {
    auto e = make_engine(dir, swap);
    ASSERT_TRUE(e);
    for (int c = 0; c < kContexts; ++c) {
      if (acked[c].empty()) continue;
      CallParams p;
      p.max_tokens = 8;
      std::string text;
      CallStats st;
      const Status s = e->call(
          ctx_id(c), " Finally,", p,
          [&text](std::string_view piece, int32_t) {
            text += piece;
            return true;
          },
          &st);
      ASSERT_TRUE(s.ok()) << s.message();
      (swap ? loaded_answers : recomputed_answers).push_back(text);
      if (swap) loaded += st.chunks_loaded;
    }
  }
  EXPECT_EQ(loaded_answers, recomputed_answers);
  std::printf("%d runs, %d kills, %d acknowledged calls; %d chunks loaded at the end; contexts of", 30, kills, total_acks,
              loaded);
  for (const auto& a : acked) std::printf(" %zu", a.size());
  std::printf(" tokens\n");
  EXPECT_GT(loaded, 0) << "no chunk file survived to be loaded: the test proves nothing";
}

}  // namespace
}  // namespace llmsvc
