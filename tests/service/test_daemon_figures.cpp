// SPDX-License-Identifier: Apache-2.0
// The memory policy's figures through a real llmsvcd (protocol version 2): under a small KV
// budget, the same sequence of calls reports the same switch-in counts (chunks loaded and
// recomputed) through the daemon as embedded; stats carry the KV peak, evictions, swap-out and
// switch-in totals; context info counts resident chunks by format. And a version-1 client (a
// raw socket speaking only version 1) still gets version-1 answers, strictly decoded.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/file_io.h"
#include "llmsvc/llmsvc.h"
#include "runtime/protocol/frame.h"
#include "tests/service/daemon_process.h"
#include "tests/service/raw_protocol_client.h"

namespace {

using llmsvc::test::DaemonProcess;
using llmsvc::test::RawProtocolClient;
namespace p = llmsvc::protocol;

std::string last_error() { return llmsvc_last_error(); }

// SmolLM2-135M: 30 layers x 3 KV heads x 64 dims, K and V, f16, 16 tokens a chunk.
constexpr uint64_t kF16Chunk = 2ull * 30 * 3 * 64 * 2 * 16;
// Room for 12 f16 chunks: one context's prompt fits, two do not.
constexpr uint64_t kBudget = 12 * kF16Chunk;

// About 120 tokens of raw text: 8 chunks.
std::string long_prompt(const char* topic) {
  std::string s = std::string("Notes on ") + topic + ".";
  for (int i = 0; i < 8; ++i)
    s += " Paragraph " + std::to_string(i) + " says that " + topic + " matter to everyone who studies them closely.";
  return s;
}

llmsvc_context* new_raw_context(llmsvc_service* svc, const char* id) {
  llmsvc_context_options o;
  llmsvc_context_options_init(&o);
  o.id = id;
  o.raw = 1;
  llmsvc_context* ctx = nullptr;
  EXPECT_EQ(llmsvc_context_new(svc, &o, &ctx), LLMSVC_OK) << id << ": " << last_error();
  return ctx;
}

// What one run of the sequence reports.
struct Figures {
  llmsvc_call_result back{};  // the call that switched context "a" back in
  llmsvc_stats stats{};
  llmsvc_context_info info_a{}, info_b{};
};

// a: a long prompt; b: another (under the budget, a's chunks leave memory); a again: its
// switch-in brings them back (and b's leave). Before b's call and before a's second one a
// scratch context is deleted: a delete flushes the swap writer (docs/ARCHITECTURE.md, "KV
// swap in the engine"), so the chunk files of the call before are durable and the chunks
// evicted next are swapped, not dropped, in both runs alike: without these sync points,
// swapped versus dropped (and so loaded versus recomputed) would depend on the writer's timing.
Figures run_sequence(llmsvc_service* svc) {
  Figures f;
  llmsvc_call_result_init(&f.back);
  llmsvc_stats_init(&f.stats);
  llmsvc_context_info_init(&f.info_a);
  llmsvc_context_info_init(&f.info_b);
  llmsvc_call_options co;
  llmsvc_call_options_init(&co);
  co.max_tokens = 4;
  llmsvc_context* a = new_raw_context(svc, "a");
  llmsvc_context* b = new_raw_context(svc, "b");
  llmsvc_context* scratch = new_raw_context(svc, "scratch");
  llmsvc_context* scratch2 = new_raw_context(svc, "scratch2");
  if (!a || !b || !scratch || !scratch2) return f;
  const std::string pa = long_prompt("rivers"), pb = long_prompt("mountains");
  EXPECT_EQ(llmsvc_call(a, pa.data(), pa.size(), &co, nullptr, nullptr, nullptr), LLMSVC_OK) << last_error();
  llmsvc_context_close(scratch);
  EXPECT_EQ(llmsvc_context_delete(svc, "scratch"), LLMSVC_OK) << last_error();
  EXPECT_EQ(llmsvc_call(b, pb.data(), pb.size(), &co, nullptr, nullptr, nullptr), LLMSVC_OK) << last_error();
  llmsvc_context_close(scratch2);
  EXPECT_EQ(llmsvc_context_delete(svc, "scratch2"), LLMSVC_OK) << last_error();
  const char* again = " In short:";
  EXPECT_EQ(llmsvc_call(a, again, std::strlen(again), &co, nullptr, nullptr, &f.back), LLMSVC_OK) << last_error();
  EXPECT_EQ(llmsvc_get_stats(svc, &f.stats), LLMSVC_OK) << last_error();
  EXPECT_EQ(llmsvc_context_info_get(svc, "a", &f.info_a), LLMSVC_OK) << last_error();
  EXPECT_EQ(llmsvc_context_info_get(svc, "b", &f.info_b), LLMSVC_OK) << last_error();
  llmsvc_context_close(a);
  llmsvc_context_close(b);
  return f;
}

void expect_chunk_counts_add_up(const llmsvc_context_info& i) {
  EXPECT_GT(i.chunks_total, 0) << i.id;
  EXPECT_EQ(i.chunks_resident + i.chunks_swapped + i.chunks_dropped, i.chunks_total) << i.id;
  EXPECT_EQ(i.chunks_f16 + i.chunks_q8 + i.chunks_q4 + i.chunks_q3 + i.chunks_q2, i.chunks_resident) << i.id;
}

class DaemonFigures : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(llmsvc::test::default_model_path()))
        << "default model not found; run tools/scripts/fetch_model.sh";
    char tmpl[] = "/tmp/llmsvcd-figures-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (daemon_ && daemon_->pid() > 0) {
      const int status = daemon_->kill_and_wait(SIGTERM);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "llmsvcd exit status " << status;
    }
    daemon_.reset();
    (void)llmsvc::fileio::remove_tree(dir_);
  }
  // A daemon under the small budget, f16 KV (no compression: chunk sizes are known).
  DaemonProcess& start_daemon() {
    const std::string config = dir_ + "/llmsvcd.toml";
    // No KV share (the default quota caps an app at half the budget): the same budget as embedded.
    std::ofstream(config) << "kv_budget_bytes = " << kBudget << "\nkv_ratio = -1.0\n[quotas]\nkv_share = 0.0\n";
    std::filesystem::create_directory(dir_ + "/daemon");
    daemon_ = std::make_unique<DaemonProcess>(dir_ + "/daemon", std::vector<std::string>{"--config", config});
    EXPECT_TRUE(daemon_->start()) << "llmsvcd did not start; see " << daemon_->log_path();
    return *daemon_;
  }

  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(DaemonFigures, SwitchInFiguresMatchEmbeddedUnderASmallBudget) {
  Figures embedded;
  {
    const std::string model = llmsvc::test::default_model_path(), state = dir_ + "/embedded";
    llmsvc_bind_options o;
    llmsvc_bind_options_init(&o);
    o.target = "embedded";
    o.model_path = model.c_str();
    o.state_dir = state.c_str();
    o.n_threads = 2;
    o.kv_budget_bytes = kBudget;
    o.kv_ratio = -1.0f;
    llmsvc_service* svc = nullptr;
    ASSERT_EQ(llmsvc_bind(&o, &svc), LLMSVC_OK) << last_error();
    embedded = run_sequence(svc);
    llmsvc_unbind(svc);
  }
  // The budget did its work embedded: a's chunks left memory and came back.
  ASSERT_GT(embedded.back.chunks_loaded + embedded.back.chunks_recomputed, 0);
  EXPECT_GT(embedded.back.chunks_loaded, 0) << "its swap files were durable: loaded, not recomputed";

  DaemonProcess& d = start_daemon();
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  const std::string target = d.target();
  o.target = target.c_str();
  llmsvc_service* svc = nullptr;
  ASSERT_EQ(llmsvc_bind(&o, &svc), LLMSVC_OK) << last_error();
  const Figures remote = run_sequence(svc);
  llmsvc_unbind(svc);

  // The call result's switch-in figures.
  EXPECT_EQ(remote.back.chunks_loaded, embedded.back.chunks_loaded);
  EXPECT_EQ(remote.back.chunks_recomputed, embedded.back.chunks_recomputed);
  EXPECT_EQ(remote.back.context_tokens, embedded.back.context_tokens);
  // Stats: the switch-in totals are the app's calls', the same as embedded; the KV peak stays
  // within the budget; chunk files were written.
  EXPECT_EQ(remote.stats.chunks_loaded, embedded.stats.chunks_loaded);
  EXPECT_EQ(remote.stats.chunks_recomputed, embedded.stats.chunks_recomputed);
  EXPECT_GE(remote.stats.chunks_loaded, static_cast<uint64_t>(remote.back.chunks_loaded));
  EXPECT_GT(remote.stats.kv_peak_bytes, 0u);
  EXPECT_LE(remote.stats.kv_peak_bytes, kBudget);
  EXPECT_GE(remote.stats.kv_peak_bytes, remote.stats.kv_bytes);
  EXPECT_GT(remote.stats.swap_out_bytes, 0u);
  EXPECT_EQ(remote.stats.swap_out_failures, 0u);
  EXPECT_GT(embedded.stats.swap_out_bytes, 0u);
  // Context info: the counts by state and by format add up, and are the embedded ones.
  for (const Figures* f : std::initializer_list<const Figures*>{&embedded, &remote}) {
    expect_chunk_counts_add_up(f->info_a);
    expect_chunk_counts_add_up(f->info_b);
    EXPECT_GT(f->info_a.chunks_f16, 0);  // kv_ratio < 0: every resident chunk is f16
  }
  using InfoPair = std::pair<const llmsvc_context_info*, const llmsvc_context_info*>;
  for (auto [e, r] : {InfoPair{&embedded.info_a, &remote.info_a}, InfoPair{&embedded.info_b, &remote.info_b}}) {
    EXPECT_EQ(r->chunks_total, e->chunks_total) << e->id;
    EXPECT_EQ(r->chunks_resident, e->chunks_resident) << e->id;
    EXPECT_EQ(r->chunks_swapped, e->chunks_swapped) << e->id;
    EXPECT_EQ(r->chunks_dropped, e->chunks_dropped) << e->id;
    EXPECT_EQ(r->chunks_f16, e->chunks_f16) << e->id;
    EXPECT_EQ(r->kv_resident_bytes, e->kv_resident_bytes) << e->id;
  }
}

// ---- a version-1 client on a raw socket

TEST_F(DaemonFigures, VersionOneClientGetsVersionOneAnswers) {
  DaemonProcess& d = start_daemon();
  RawProtocolClient c(d.socket_path(), 1);
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send(0, p::Hello{1, 1, p::kDefaultMaxPayload, "a version-1 client"}));
  auto w = c.receive();
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE(std::holds_alternative<p::Welcome>(*w));
  EXPECT_EQ(std::get<p::Welcome>(*w).version, 1);

  ASSERT_TRUE(c.send(1, p::ContextNew{"old", std::nullopt, true}));
  auto opened = c.answer(1);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  ASSERT_TRUE(std::holds_alternative<p::ContextOpened>(*opened));
  p::Call call;
  call.handle = std::get<p::ContextOpened>(*opened).handle;
  call.prompt = long_prompt("lakes");
  call.options.max_tokens = 4;
  ASSERT_TRUE(c.send(2, call));
  auto result = c.answer(2);
  ASSERT_TRUE(result.ok()) << result.status().message();  // strict: no version-2 bytes came
  ASSERT_TRUE(std::holds_alternative<p::CallResult>(*result));
  const p::CallResult& r = std::get<p::CallResult>(*result);
  EXPECT_EQ(r.status, 0u) << r.message;
  EXPECT_EQ(r.stats.generated_tokens, 4);
  EXPECT_GT(r.stats.context_tokens, 100);

  ASSERT_TRUE(c.send(3, p::Stats{}));
  auto stats = c.answer(3);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  ASSERT_TRUE(std::holds_alternative<p::StatsReply>(*stats));
  EXPECT_EQ(std::get<p::StatsReply>(*stats).calls, 1u);
  EXPECT_EQ(std::get<p::StatsReply>(*stats).kv_peak_bytes, 0u);  // not on a version-1 connection

  ASSERT_TRUE(c.send(4, p::ContextInfo{{"old"}}));
  auto info = c.answer(4);
  ASSERT_TRUE(info.ok()) << info.status().message();
  ASSERT_TRUE(std::holds_alternative<p::ContextInfoReply>(*info));
  EXPECT_GT(std::get<p::ContextInfoReply>(*info).chunks_total, 0);
}

}  // namespace
