// SPDX-License-Identifier: Apache-2.0
// The engine with KV swap (ahead-of-time swap-out, loads at switch-in and reopen) on the
// real SmolLM2 model: swapped-and-loaded contexts answer exactly as contexts that never
// left memory (f16, and q8); bad chunk files are recomputed; a new process loads the chunks
// from their files; a full disk loses nothing; 64 contexts stay inside a small budget.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "policy/planning/switch_cost.h"
#include "runtime/core/engine/engine.h"
#include "tests/common/test_paths.h"

namespace llmsvc {
namespace {

namespace fs = std::filesystem;

// SmolLM2: 30 layers x (K, V) x 16 tokens x 192 x 2 bytes = 360 KiB per f16 chunk.
constexpr uint64_t kChunk = 30ull * 2 * 16 * 192 * 2;

std::string root() { return std::getenv("LLMSVC_STATE_DIR"); }

std::unique_ptr<Engine> make_engine(const std::string& state, uint64_t budget, double ratio, bool swap = true,
                                    const std::function<void(EngineOptions&)>& tweak = {}) {
  EngineOptions o;
  o.model_path = test::default_model_path();
  o.n_threads = 2;
  o.n_ctx = 1024;
  o.kv_budget_bytes = budget;
  o.kv_ratio = ratio;
  o.state_dir = state;
  o.kv_swap = swap;
  if (tweak) tweak(o);
  auto e = Engine::create(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

std::string create(Engine& e, const std::string& id) {
  ContextOptions co;
  co.id = id;
  co.raw = true;
  auto r = e.create_context(co);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return id;
}

struct Answer {
  Status status;
  std::string text;
  CallStats stats;
};

Answer call(Engine& e, const std::string& id, const std::string& prompt, int max_tokens = 24) {
  CallParams p;
  p.max_tokens = max_tokens;
  Answer a;
  a.status = e.call(
      id, prompt, p,
      [&a](std::string_view piece, int32_t) {
        a.text += piece;
        return true;
      },
      &a.stats);
  return a;
}

const char* kStarts[] = {"The history of Rome begins", "In a quiet village by the sea", "The recipe for bread needs"};

// Three raw contexts, `rounds` rounds of calls in turn (max_tokens each); `before(round, i)`
// runs before each call. Every answer, in order, and the sum of the calls' switch-in figures.
// With max_tokens 1 every token is evaluated in a batch (the next call's prompt takes the
// generated one), so chunks recomputed from tokens come back bit for bit (see
// test_engine_budget.cpp).
struct Rounds {
  std::vector<std::string> answers;
  int loaded = 0, recomputed = 0, load_failures = 0;
};
Rounds run_rounds(Engine& e, const std::string& tag, const std::function<void(int, int)>& before = {},
                  int max_tokens = 24, int rounds = 4) {
  Rounds out;
  const std::string later = max_tokens == 1 ? " Then, some years later," : " Then";
  for (int i = 0; i < 3; ++i) create(e, tag + std::to_string(i));
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < 3; ++i) {
      if (before) before(round, i);
      Answer a = call(e, tag + std::to_string(i), round == 0 ? kStarts[i] : later, max_tokens);
      EXPECT_TRUE(a.status.ok()) << a.status.message();
      out.answers.push_back(a.text);
      out.loaded += a.stats.chunks_loaded;
      out.recomputed += a.stats.chunks_recomputed;
      out.load_failures += a.stats.chunk_load_failures;
    }
  }
  return out;
}

class EngineSwap : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(test::default_model_path())) << "run tools/scripts/fetch_model.sh";
  }
};

// f16 (no compression): a budget of about one context evicts the others' chunks; their
// files are current (the writes are flushed before each call), so every evicted chunk is
// loaded back, none recomputed, and the answers are those of an engine without pressure.
TEST_F(EngineSwap, F16SwappedChunksLoadBackIdentical) {
  auto free_engine = make_engine(root() + "/f16-free", 0, -1);
  const Rounds reference = run_rounds(*free_engine, "f");
  free_engine.reset();

  auto e = make_engine(root() + "/f16-tight", 10 * kChunk, -1);
  const Rounds pressed = run_rounds(*e, "t", [&](int, int) { e->flush_swap(); });
  EXPECT_EQ(pressed.answers, reference.answers);
  EXPECT_GT(pressed.loaded, 0) << "nothing was swapped: the test proves nothing";
  EXPECT_EQ(pressed.recomputed, 0);
  EXPECT_EQ(pressed.load_failures, 0);
  const EngineStats st = e->stats();
  EXPECT_LE(st.kv_peak_bytes, 10 * kChunk);
  EXPECT_GT(st.swap_out_chunks, 0u);
  EXPECT_GT(st.swap_out_bytes, 0u);
  EXPECT_EQ(st.swap_out_failures, 0u);
}

// 8 bits (kv_ratio 1: every full chunk q8): chunks swapped out in q8 and loaded back are the
// same bytes, so the answers are those of unswapped q8 contexts.
TEST_F(EngineSwap, Q8SwappedChunksLoadBackIdentical) {
  auto free_engine = make_engine(root() + "/q8-free", 0, 1.0);
  const Rounds reference = run_rounds(*free_engine, "f");
  free_engine.reset();

  auto e = make_engine(root() + "/q8-tight", 7 * kChunk, 1.0);
  const Rounds pressed = run_rounds(*e, "t", [&](int, int) { e->flush_swap(); });
  EXPECT_EQ(pressed.answers, reference.answers);
  EXPECT_GT(pressed.loaded, 0) << "nothing was swapped: the test proves nothing";
  EXPECT_EQ(pressed.recomputed, 0);
  auto info = e->context_info("t0");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->chunks_f16 + info->chunks_q8 + info->chunks_q4 + info->chunks_q3 + info->chunks_q2, info->chunks_resident);
  EXPECT_EQ(info->chunks_q4 + info->chunks_q3 + info->chunks_q2, 0);
}

void flip_bit(const fs::path& p, uint64_t offset) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << p;
  f.seekg(static_cast<std::streamoff>(offset));
  char b = 0;
  f.read(&b, 1);
  b = static_cast<char>(b ^ 0x10);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&b, 1);
}

// Damaged chunk files (a flipped bit in a frame, a flipped bit in the header, a truncated
// file, a missing file, another chunk's file in its place) are detected when loaded and
// recomputed; with f16 the answers are still exactly the unpressured ones.
TEST_F(EngineSwap, BadChunkFilesAreRecomputed) {
  auto free_engine = make_engine(root() + "/bad-free", 0, -1);
  const Rounds reference = run_rounds(*free_engine, "f");
  free_engine.reset();

  const std::string state = root() + "/bad-tight";
  auto e = make_engine(state, 10 * kChunk, -1);
  int damaged = 0;
  const Rounds pressed = run_rounds(*e, "t", [&](int round, int i) {
    e->flush_swap();
    if (round != 3 || i != 0) return;
    // Before t0's last call: damage its swapped chunks' files.
    auto info = e->context_info("t0");
    ASSERT_TRUE(info.ok());
    ASSERT_GE(info->chunks_swapped, 5) << "t0 was not swapped out: the test proves nothing";
    const fs::path dir = fs::path(state) / "contexts" / "t0" / "chunks";
    const fs::path f0 = dir / "0.kvc", f1 = dir / "1.kvc", f2 = dir / "2.kvc", f3 = dir / "3.kvc", f4 = dir / "4.kvc";
    flip_bit(f0, fs::file_size(f0) / 2);  // a frame's bytes
    flip_bit(f1, 20);                     // the header (covered by the index checksum)
    fs::resize_file(f2, fs::file_size(f2) - 100);
    fs::remove(f3);
    fs::copy_file(f0.string() + "", dir / "tmp-copy", fs::copy_options::overwrite_existing);
    fs::rename(dir / "tmp-copy", f4);     // chunk 0's file (damaged) as chunk 4's: stale meta
    damaged = 5;
  });
  ASSERT_EQ(damaged, 5);
  EXPECT_EQ(pressed.answers, reference.answers);
  EXPECT_GE(pressed.load_failures, 4);  // the missing file may already count as dropped
  EXPECT_GE(pressed.recomputed, 5);
  EXPECT_GT(pressed.loaded, 0);
}

// With a switch-cost profile that makes storage slow next to recompute, switch-in splits
// the swapped chunks: some load layer by layer while the others are recomputed (the
// swap-recompute pipeline). Every token is evaluated in batches, so recomputed chunks are
// bit-identical too and the answers must equal an engine without pressure. Then every file
// of a context is damaged inside a layer frame (headers intact): the loads fail mid-pass,
// and those chunks plus what the pass recomputed after them are recomputed again.
void write_slow_storage_profile(const std::string& state) {
  fs::create_directories(state);
  policy::SwitchCost slow;
  slow.io_byte_s = 1.0 / 20e6;  // 20 MB/s
  slow.io_chunk_s = 1e-4;
  slow.rc_fixed_s = 1e-4;
  slow.rc_token_s = 2e-5;
  slow.rc_token_ctx_s = 0;
  std::ofstream(fs::path(state) / "switch-profile.json") << policy::switch_cost_to_json(slow);
}

TEST_F(EngineSwap, PipelineSplitsLoadsAndRecomputeAndAnswersAreUnchanged) {
  auto free_engine = make_engine(root() + "/pipe-free", 0, -1);
  const Rounds reference = run_rounds(*free_engine, "f", {}, 1, 12);
  free_engine.reset();

  const std::string state = root() + "/pipe-tight";
  write_slow_storage_profile(state);
  auto e = make_engine(state, 10 * kChunk, -1);
  const Rounds pressed = run_rounds(*e, "t", [&](int, int) { e->flush_swap(); }, 1, 12);
  EXPECT_EQ(pressed.answers, reference.answers);
  EXPECT_GT(pressed.loaded, 0) << "the planner loaded nothing: the overlap was not exercised";
  EXPECT_GT(pressed.recomputed, 0) << "the planner recomputed nothing: the profile did not bite";
  EXPECT_EQ(pressed.load_failures, 0);
}

TEST_F(EngineSwap, PipelineLayerFrameFailuresAreRecomputedAgain) {
  auto free_engine = make_engine(root() + "/pipebad-free", 0, -1);
  const Rounds reference = run_rounds(*free_engine, "f", {}, 1, 12);
  free_engine.reset();

  const std::string state = root() + "/pipebad-tight";
  write_slow_storage_profile(state);
  auto e = make_engine(state, 10 * kChunk, -1);
  int damaged = 0;
  const Rounds pressed = run_rounds(*e, "t", [&](int round, int i) {
    e->flush_swap();
    if (round != 11 || i != 0) return;
    const fs::path dir = fs::path(state) / "contexts" / "t0" / "chunks";
    for (const auto& f : fs::directory_iterator(dir)) {
      if (f.path().extension() != ".kvc") continue;
      flip_bit(f.path(), fs::file_size(f.path()) - 64);  // inside the last layer's frame
      ++damaged;
    }
  }, 1, 12);
  ASSERT_GE(damaged, 3) << "t0 had too few chunk files: the test proves nothing";
  EXPECT_EQ(pressed.answers, reference.answers);
  EXPECT_GT(pressed.load_failures, 0);
}

// A context's chunks survive the process: a new engine opening it loads every chunk from
// its file (none recomputed) and continues exactly as the engine that never stopped, with
// compression at the default ratio too (the chunk table keeps formats and densities).
// long_first: the first prompt is ~300 tokens, past policy::kAllocationHorizonChunks, so at
// ratio 0.5 the allocation narrows chunks below 8 bits (else a young context stays q8).
void restart_case(double ratio, const std::string& tag, bool long_first = false) {
  std::string first = "The history of Rome begins";
  if (long_first)
    for (int i = 0; i < 24; ++i)
      first += " Year " + std::to_string(100 + 7 * i) + ": the city grew, its roads reached the coast and its markets filled.";
  const std::string prompts[] = {first, " Then", " And later", " Finally"};
  std::vector<std::string> reference;
  {
    auto e = make_engine(root() + "/" + tag + "-ref", 0, ratio);
    create(*e, "c");
    for (const std::string& p : prompts) reference.push_back(call(*e, "c", p).text);
  }
  const std::string state = root() + "/" + tag + "-restart";
  std::vector<std::string> answers;
  {
    auto e = make_engine(state, 0, ratio);
    create(*e, "c");
    for (int i = 0; i < 2; ++i) answers.push_back(call(*e, "c", prompts[i]).text);
    if (long_first) {  // narrower than 8 bits: the chunk table must carry those formats
      auto info = e->context_info("c");
      ASSERT_TRUE(info.ok());
      EXPECT_GT(info->chunks_q4 + info->chunks_q3 + info->chunks_q2, 0) << tag;
    }
  }  // the engine's end flushes its swap writes
  for (int i = 2; i < 4; ++i) {
    auto e = make_engine(state, 0, ratio);
    auto stored = e->context_info("c");  // from storage: its chunks are swapped
    ASSERT_TRUE(stored.ok());
    EXPECT_FALSE(stored->loaded);
    EXPECT_GT(stored->chunks_swapped, 0);
    EXPECT_EQ(stored->chunks_swapped + stored->chunks_dropped, stored->chunks_total);
    ASSERT_TRUE(e->open_context("c").ok());
    auto opened = e->context_info("c");
    ASSERT_TRUE(opened.ok());
    EXPECT_EQ(opened->chunks_swapped, stored->chunks_swapped);
    EXPECT_EQ(opened->chunks_resident, 0);
    Answer a = call(*e, "c", prompts[i]);
    ASSERT_TRUE(a.status.ok()) << a.status.message();
    answers.push_back(a.text);
    EXPECT_GT(a.stats.chunks_loaded, 0) << tag;
    EXPECT_EQ(a.stats.chunks_loaded, stored->chunks_swapped) << tag;
    EXPECT_EQ(a.stats.chunks_recomputed, 0) << tag;
    EXPECT_EQ(a.stats.chunk_load_failures, 0) << tag;
  }
  EXPECT_EQ(answers, reference) << tag;
}

TEST_F(EngineSwap, RestartLoadsChunksFromFilesF16) { restart_case(-1, "f16"); }
TEST_F(EngineSwap, RestartLoadsChunksFromFilesCompressed) { restart_case(0.5, "half"); }
TEST_F(EngineSwap, RestartLoadsChunksFromFilesPastTheAllocationHorizon) { restart_case(0.5, "long", true); }

// Swap off: evicted chunks are dropped and recomputed, the answers unchanged (f16).
TEST_F(EngineSwap, SwapOffRecomputes) {
  auto free_engine = make_engine(root() + "/off-free", 0, -1);
  const Rounds reference = run_rounds(*free_engine, "f", {}, 1, 12);
  free_engine.reset();
  auto e = make_engine(root() + "/off-tight", 10 * kChunk, -1, /*swap=*/false);
  const Rounds pressed = run_rounds(*e, "t", {}, 1, 12);
  EXPECT_EQ(pressed.answers, reference.answers);
  EXPECT_EQ(pressed.loaded, 0);
  EXPECT_GT(pressed.recomputed, 0);
  EXPECT_FALSE(fs::exists(fs::path(root()) / "off-tight" / "contexts" / "t0" / "chunks" / "0.kvc"));
}

// The baselines' parts (trace benchmark): each keeps the answers exact.

// No ahead-of-time swap-out: nothing is written when a call returns; a chunk is written
// when it is evicted, and loaded back at switch-in like an AoT one.
TEST_F(EngineSwap, WithoutAotChunksAreWrittenWhenEvicted) {
  auto free_engine = make_engine(root() + "/wb-free", 0, -1);
  const Rounds reference = run_rounds(*free_engine, "f");
  free_engine.reset();
  auto e = make_engine(root() + "/wb-tight", 10 * kChunk, -1, true, [](EngineOptions& o) { o.aot_swap_out = false; });
  int calls = 0;
  const Rounds pressed = run_rounds(*e, "t", [&](int, int) {
    e->flush_swap();
    if (calls++ == 1) {
      EXPECT_EQ(e->stats().swap_out_chunks, 0u) << "written when the call returned";
    }
  });
  EXPECT_EQ(pressed.answers, reference.answers);
  EXPECT_GT(pressed.loaded, 0);
  EXPECT_EQ(pressed.recomputed, 0) << "an evicted chunk was dropped, not written back";
  EXPECT_GT(e->stats().swap_out_chunks, 0u);
  EXPECT_LE(e->stats().kv_peak_bytes, 10 * kChunk);
}

// Whole-context eviction without swap (LMK: kill and recompute): a context is never partly
// resident between calls, and the answers are unchanged.
TEST_F(EngineSwap, WholeContextEvictionRecomputesWholeContexts) {
  auto free_engine = make_engine(root() + "/lmk-free", 0, -1);
  const Rounds reference = run_rounds(*free_engine, "f", {}, 1, 12);
  free_engine.reset();
  auto e = make_engine(root() + "/lmk-tight", 10 * kChunk, -1, false,
                       [](EngineOptions& o) { o.eviction = EngineOptions::Eviction::whole_context; });
  int partly = 0, evicted = 0;
  const Rounds pressed = run_rounds(*e, "t", [&](int round, int) {
    if (round == 0) return;
    for (const char* id : {"t0", "t1", "t2"}) {
      auto info = e->context_info(id);
      ASSERT_TRUE(info.ok());
      if (info->chunks_resident != 0 && info->chunks_resident != info->chunks_total) partly++;
      if (info->chunks_resident == 0) evicted++;
    }
  }, 1, 12);
  EXPECT_EQ(pressed.answers, reference.answers);
  EXPECT_EQ(partly, 0);
  EXPECT_GT(evicted, 0) << "no context was evicted: the test proves nothing";
  EXPECT_EQ(pressed.loaded, 0);
  EXPECT_GT(pressed.recomputed, 0);
}

// Without the pipeline, a profile that favours recompute changes nothing: every swapped
// chunk is loaded (compare PipelineSplitsLoadsAndRecomputeAndAnswersAreUnchanged).
TEST_F(EngineSwap, WithoutPipelineEverySwappedChunkLoads) {
  const std::string state = root() + "/nopipe";
  write_slow_storage_profile(state);
  auto e = make_engine(state, 10 * kChunk, -1, true, [](EngineOptions& o) { o.swap_recompute_pipeline = false; });
  const Rounds pressed = run_rounds(*e, "t", [&](int, int) { e->flush_swap(); }, 1, 12);
  EXPECT_GT(pressed.loaded, 0);
  EXPECT_EQ(pressed.recomputed, 0);
}

// A profile named by EngineOptions::switch_profile is used wherever it lies.
TEST_F(EngineSwap, ProfileNamedByOptionIsUsed) {
  const std::string elsewhere = root() + "/profiles";
  write_slow_storage_profile(elsewhere);
  auto e = make_engine(root() + "/named-profile", 10 * kChunk, -1, true,
                       [&](EngineOptions& o) { o.switch_profile = elsewhere + "/switch-profile.json"; });
  const Rounds pressed = run_rounds(*e, "t", [&](int, int) { e->flush_swap(); }, 1, 12);
  EXPECT_GT(pressed.recomputed, 0) << "the named profile was not used";
}

// Deleting a context removes its chunk files and table with it.
TEST_F(EngineSwap, DeleteRemovesChunkFiles) {
  const std::string state = root() + "/delete";
  auto e = make_engine(state, 0, -1);
  create(*e, "d");
  ASSERT_TRUE(call(*e, "d", kStarts[0]).status.ok());
  const fs::path dir = fs::path(state) / "contexts" / "d";
  ASSERT_TRUE(e->delete_context("d").ok());  // flushes the writes queued for it first
  EXPECT_FALSE(fs::exists(dir));
  e->flush_swap();
  EXPECT_FALSE(fs::exists(dir));
}

// Bytes of the chunk files below `dir` (every context's chunks/).
uint64_t chunk_file_bytes(const fs::path& dir) {
  uint64_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".kvc") bytes += e.file_size();
  return bytes;
}

// A per-app quota on swap files (EngineOptions::swap_bytes, here scope "uid-7"): the app's
// chunk files never take more than it, the chunks it leaves unwritten are recomputed, and
// the answers are those of an engine without pressure. A new engine over the same state
// counts the files it finds, so it writes none past the quota either.
TEST_F(EngineSwap, AnAppsSwapFilesStayWithinItsQuotaAndAnswersAreUnchanged) {
  auto free_engine = make_engine(root() + "/quota-free", 0, -1);
  const Rounds reference = run_rounds(*free_engine, "f", {}, 1, 12);
  free_engine.reset();
  const std::string state = root() + "/quota-tight";
  const uint64_t quota = 6 * kChunk;  // a file is its chunk and a small index: five files
  auto with_quota = [&](EngineOptions& o) { o.swap_bytes = quota; };
  auto e = make_engine(state, 10 * kChunk, -1, true, with_quota);
  const fs::path scope = fs::path(state) / "contexts" / "uid-7";
  uint64_t most = 0;
  const Rounds pressed = run_rounds(
      *e, "uid-7/t",
      [&](int, int) {
        e->flush_swap();
        most = std::max(most, chunk_file_bytes(scope));
      },
      1, 12);
  EXPECT_EQ(pressed.answers, reference.answers);
  EXPECT_GT(pressed.loaded, 0) << "no chunk was written: the quota is too small to show anything";
  EXPECT_GT(pressed.recomputed, 0) << "every chunk was written: the quota is too large to show anything";
  EXPECT_LE(most, quota);
  EXPECT_GT(most, quota / 2);
  EXPECT_EQ(e->stats().swap_out_failures, 0u) << "a chunk over the quota is not a failure";
  e.reset();
  auto again = make_engine(state, 10 * kChunk, -1, true, with_quota);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(call(*again, "uid-7/t" + std::to_string(i), " And then,", 1).status.ok());
      again->flush_swap();
      EXPECT_LE(chunk_file_bytes(scope), quota);
    }
  }
  // Deleting a context gives its files' room back to the app.
  const uint64_t before = chunk_file_bytes(scope);
  ASSERT_TRUE(again->delete_context("uid-7/t0").ok());
  EXPECT_LT(chunk_file_bytes(scope), before);
}

// A small tmpfs (root only; skipped otherwise).
class TmpfsMount {
 public:
  TmpfsMount(const std::string& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size + ",mode=0700").c_str()) == 0;
  }
  ~TmpfsMount() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

// Fills the file system holding `dir` (a filler file); returns its path.
std::string fill(const std::string& dir) {
  const std::string path = dir + "/filler";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  EXPECT_GE(fd, 0);
  std::vector<char> block(64 * 1024, 'x');
  size_t n = block.size();
  while (n > 0) {
    if (::write(fd, block.data(), n) < 0) n /= 2;  // ENOSPC: smaller pieces until none fit
  }
  ::close(fd);
  return path;
}

// Disk full during swap-out: the call still answers (its history fits in what is left) or
// fails with Code::io from the history (nothing kept); nothing acknowledged is lost, and
// once space is freed a new engine reopens the context and answers exactly as an engine
// that never saw a full disk.
TEST_F(EngineSwap, DiskFullDuringSwapOutLosesNothing) {
  const std::string mnt = root() + "/tmpfs";
  TmpfsMount tmpfs(mnt, "24m");
  if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (not root?)";
  const std::string state = mnt + "/state";

  std::vector<std::string> acknowledged;  // prompts whose calls returned OK
  std::vector<std::string> answers;
  {
    auto e = make_engine(state, 0, -1);
    create(*e, "full");
    Answer a = call(*e, "full", kStarts[0]);
    ASSERT_TRUE(a.status.ok()) << a.status.message();
    acknowledged.push_back(kStarts[0]);
    answers.push_back(a.text);
    e->flush_swap();

    // Full except a few pages: the history's record fits, the chunk files do not.
    const std::string filler = fill(mnt);
    fs::resize_file(filler, fs::file_size(filler) - 16 * 1024);
    const uint64_t failures_before = e->stats().swap_out_failures;
    for (int i = 0; i < 3; ++i) {
      Answer b = call(*e, "full", " Then");
      e->flush_swap();
      if (b.status.ok()) {
        acknowledged.push_back(" Then");
        answers.push_back(b.text);
      } else {
        EXPECT_EQ(b.status.code(), Code::io) << b.status.message();
      }
    }
    EXPECT_GT(e->stats().swap_out_failures, failures_before) << "the disk never filled: the test proves nothing";
    // Entirely full: the history cannot be appended; the call fails and keeps nothing.
    (void)fill(mnt);
    auto before = e->context_info("full");
    Answer c = call(*e, "full", " Then");
    if (!c.status.ok()) {
      EXPECT_EQ(c.status.code(), Code::io) << c.status.message();
      auto after = e->context_info("full");
      ASSERT_TRUE(before.ok() && after.ok());
      EXPECT_EQ(after->tokens, before->tokens);
    } else {
      acknowledged.push_back(" Then");
      answers.push_back(c.text);
    }
    e->flush_swap();
    fs::remove(filler);
    fs::remove(mnt + "/filler");
  }
  // Space is back: a new engine reopens it, with every acknowledged turn, and continues.
  {
    auto e = make_engine(state, 0, -1);
    ASSERT_TRUE(e->open_context("full").ok());
    Answer d = call(*e, "full", " Finally");
    ASSERT_TRUE(d.status.ok()) << d.status.message();
    answers.push_back(d.text);
  }
  acknowledged.push_back(" Finally");
  std::vector<std::string> reference;
  {
    auto e = make_engine(root() + "/tmpfs-ref", 0, -1);
    create(*e, "full");
    for (const std::string& p : acknowledged) reference.push_back(call(*e, "full", p).text);
  }
  EXPECT_EQ(answers, reference);
}

size_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// 64 contexts under a budget of 12 f16 chunks, compression at the default ratio: the
// store's accounted bytes never pass the budget (checked after every call), and the
// process's resident memory grows by no more than the budget plus a fixed overhead.
TEST_F(EngineSwap, SixtyFourContextsStayWithinTheBudget) {
  const uint64_t budget = 12 * kChunk;
  auto e = make_engine(root() + "/many", budget, 0.5);
  (void)create(*e, "warm");
  ASSERT_TRUE(call(*e, "warm", "Warm up", 4).status.ok());
  const size_t rss0 = rss_bytes();
  size_t rss_max = rss0;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 64; ++i) {
      std::string id = "m";
      id += std::to_string(i);
      if (round == 0) create(*e, id);
      Answer a = call(*e, id, round == 0 ? kStarts[i % 3] : " Then", 8);  // a chunk each, and more
      ASSERT_TRUE(a.status.ok()) << id << ": " << a.status.message();
      const EngineStats st = e->stats();
      ASSERT_LE(st.kv_bytes, budget) << id;
      ASSERT_LE(st.kv_peak_bytes, budget) << id;
      rss_max = std::max(rss_max, rss_bytes());
    }
  }
  const EngineStats st = e->stats();
  EXPECT_GT(st.kv_evictions, 0u);
  EXPECT_GT(st.chunks_loaded, 0u);
  // Fixed overhead: swap read buffers (16 files at a time), the encoder's, allocator slack.
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_LE(rss_max - rss0, budget + (64u << 20)) << "rss0 " << rss0 << " max " << rss_max;
#endif
}

}  // namespace
}  // namespace llmsvc
