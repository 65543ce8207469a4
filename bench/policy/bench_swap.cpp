// SPDX-License-Identifier: Apache-2.0
// Chunk swap benchmarks: encode / decode throughput and compression ratio per codec and KV
// format, and swap latency: store one chunk (fdatasync + directory fsync), read one chunk,
// read one layer of 64 chunks, on io_uring and on the pread fallback, with the files'
// pages dropped from the page cache before every read so that reads reach the disk.
//
// Data: real K/V of the default model (SmolLM2-135M: 30 layers, 3 KV heads x 64) over the
// KJV text of tests/data/golden, 64 chunks of 16 tokens, quantized to q8/q4/q2 as KIVI does;
// synthetic K/V of the same shape (tests/common/kv_synth.h) if the model is absent or
// LLMSVC_BENCH_SYNTHETIC=1. Files go to $LLMSVC_BENCH_DIR (default: the current directory).
//
// Args: codec (0 none, 1 lz4, 2 zstd), KV format bits (16, 8, 4, 2), engine (1 io_uring, 2 threads).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench/policy/real_kv.h"
#include "hal/host/fp16.h"
#include "policy/swap/chunk_file.h"
#include "policy/swap/swap_store.h"
#include "tests/common/kv_synth.h"
#include "tests/common/test_paths.h"

namespace llmsvc::bench {
namespace {

using policy::ChunkCodec;
using policy::ChunkMeta;
using policy::ReaderKind;

constexpr int kChunks = 64;

struct Dataset {
  std::string source;
  uint16_t n_layer = 30, n_head_kv = 3, head_dim = 64, chunk_tokens = 16;
  std::vector<std::vector<uint8_t>> f16;  // per chunk
};

const Dataset& dataset() {
  static const Dataset d = [] {
    Dataset d;
    const char* synth = std::getenv("LLMSVC_BENCH_SYNTHETIC");
    if (!(synth && *synth == '1') && std::filesystem::exists(test::default_model_path())) {
      auto kv = compute_real_kv(test::default_model_path(), test::data_dir() + "/golden/ppl_text.txt", kChunks * 16, 4);
      if (kv.ok()) {
        d.source = "SmolLM2-135M-Instruct Q4_1 over KJV Genesis";
        d.n_layer = static_cast<uint16_t>(kv->n_layer);
        d.n_head_kv = static_cast<uint16_t>(kv->n_head_kv);
        d.head_dim = static_cast<uint16_t>(kv->head_dim);
        d.chunk_tokens = static_cast<uint16_t>(kv->chunk_tokens);
        d.f16 = std::move(kv->chunks);
        return d;
      }
      std::fprintf(stderr, "real K/V unavailable (%s); synthetic data\n", kv.status().message().c_str());
    }
    d.source = "synthetic (tests/common/kv_synth.h)";
    for (int c = 0; c < kChunks; ++c) {
      ChunkMeta m{1, 2, static_cast<uint32_t>(c), c * 16, 16, hal::KvFormat::f16, d.n_layer, d.n_head_kv, d.head_dim};
      d.f16.push_back(test::synth_chunk_payload(m, static_cast<uint32_t>(c)));
    }
    return d;
  }();
  return d;
}

ChunkMeta meta_of(int c, hal::KvFormat f) {
  const Dataset& d = dataset();
  return ChunkMeta{0xabcdef, 0x1000u + c, static_cast<uint32_t>(c), c * d.chunk_tokens, d.chunk_tokens, f,
                   d.n_layer, d.n_head_kv, d.head_dim};
}

// The chunk's payload in format f: f16 as computed, or quantized block by block.
const std::vector<uint8_t>& payload(int c, hal::KvFormat f) {
  static std::vector<uint8_t> cache[4][kChunks];
  const int fi = f == hal::KvFormat::f16 ? 0 : f == hal::KvFormat::q8 ? 1 : f == hal::KvFormat::q4 ? 2 : 3;
  std::vector<uint8_t>& out = cache[fi][c];
  if (!out.empty()) return out;
  const Dataset& d = dataset();
  if (f == hal::KvFormat::f16) return out = d.f16[c];
  const hal::KvBlockShape s{d.chunk_tokens, d.n_head_kv, d.head_dim};
  const size_t n = size_t(s.n_tokens) * s.kv_dim();
  std::vector<float> x(n);
  for (int l = 0; l < d.n_layer; ++l)
    for (int part = 0; part < 2; ++part) {
      const uint8_t* h = d.f16[c].data() + (size_t(2 * l + part) * n) * 2;
      for (size_t i = 0; i < n; ++i) x[i] = hal::fp16_to_fp32(uint16_t(h[2 * i] | (h[2 * i + 1] << 8)));
      test::append_kv_block(out, x, f, part == 0 ? hal::KvPart::key : hal::KvPart::value, s);
    }
  return out;
}

// Converts every chunk to format f outside the timed loops.
void prepare(hal::KvFormat f) {
  for (int c = 0; c < kChunks; ++c) payload(c, f);
}

hal::KvFormat format_arg(int64_t bits) {
  const auto f = static_cast<hal::KvFormat>(bits);
  prepare(f);
  return f;
}

std::string label(ChunkCodec codec, hal::KvFormat f) {
  std::string s = policy::chunk_codec_name(codec);
  s += f == hal::KvFormat::f16 ? "/f16" : "/q";
  if (f != hal::KvFormat::f16) s += std::to_string(hal::kv_format_bits(f));
  return s;
}

void BM_Encode(benchmark::State& state) {
  const auto codec = static_cast<ChunkCodec>(state.range(0));
  const auto f = format_arg(state.range(1));
  std::vector<uint8_t> buf(policy::max_encoded_chunk_bytes(meta_of(0, f)));
  size_t raw = 0, encoded = 0;
  int c = 0;
  for (auto _ : state) {
    auto n = policy::encode_chunk(meta_of(c, f), payload(c, f), {codec, 3}, buf);
    if (!n.ok()) return state.SkipWithError(n.status().message().c_str());
    raw += payload(c, f).size();
    encoded += *n;
    c = (c + 1) % kChunks;
  }
  state.SetBytesProcessed(static_cast<int64_t>(raw));
  state.counters["ratio"] = double(raw) / double(encoded);
  state.counters["chunk_KiB"] = double(payload(0, f).size()) / 1024;
  state.SetLabel(label(codec, f));
}

void BM_Decode(benchmark::State& state) {
  const auto codec = static_cast<ChunkCodec>(state.range(0));
  const auto f = format_arg(state.range(1));
  std::vector<std::vector<uint8_t>> files;
  for (int c = 0; c < kChunks; ++c) files.push_back(policy::encode_chunk(meta_of(c, f), payload(c, f), {codec, 3}).value());
  std::vector<uint8_t> out(payload(0, f).size());
  size_t raw = 0;
  int c = 0;
  for (auto _ : state) {
    auto idx = policy::parse_chunk_file(files[c]);
    const size_t layer = idx->layer_bytes();
    for (size_t l = 0; l < idx->frames.size(); ++l) {
      Status s = policy::decode_layer_from_file(*idx, int(l), files[c], std::span(out).subspan(l * layer, layer));
      if (!s.ok()) return state.SkipWithError(s.message().c_str());
    }
    raw += out.size();
    c = (c + 1) % kChunks;
  }
  state.SetBytesProcessed(static_cast<int64_t>(raw));
  state.SetLabel(label(codec, f));
}

// ---- swap I/O ----

std::string bench_dir() {
  const char* d = std::getenv("LLMSVC_BENCH_DIR");
  std::string tmpl = std::string(d && *d ? d : ".") + "/swap_bench_XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  return tmpl;
}

// Drops a file's pages from the page cache; returns how many stay resident (mincore).
size_t drop_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return SIZE_MAX;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  struct stat st {};
  ::fstat(fd, &st);
  size_t resident = 0;
  if (st.st_size > 0) {
    const size_t len = size_t(st.st_size), page = size_t(::sysconf(_SC_PAGESIZE));
    void* p = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
    std::vector<unsigned char> v((len + page - 1) / page);
    if (p != MAP_FAILED && ::mincore(p, len, v.data()) == 0)
      for (unsigned char b : v) resident += b & 1;
    if (p != MAP_FAILED) ::munmap(p, len);
  }
  ::close(fd);
  return resident;
}

// A swap directory holding all 64 chunks in format f, lz4.
struct SwapFixture {
  std::string dir = bench_dir();
  std::unique_ptr<policy::SwapIo> io;
  std::unique_ptr<policy::SwapStore> store;
  std::vector<policy::ChunkIndex> idx;

  SwapFixture(ReaderKind kind, hal::KvFormat f, bool fill) {
    io = policy::SwapIo::create({kind, 128, 4, {}}).value();
    store = policy::SwapStore::open(*io, dir + "/ctx", {ChunkCodec::lz4, 3}).value();
    if (fill)
      for (int c = 0; c < kChunks; ++c) idx.push_back(store->store(meta_of(c, f), payload(c, f)).value());
  }
  ~SwapFixture() {
    store.reset();
    io.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  bool drop_all() {
    bool ok = true;
    for (int c = 0; c < int(idx.size()); ++c) ok &= drop_cache(store->path(c)) == 0;
    return ok;
  }
};

void BM_SwapStoreChunk(benchmark::State& state) {
  const auto f = format_arg(state.range(0));
  SwapFixture fx(ReaderKind::automatic, f, false);
  int c = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    auto r = fx.store->store(meta_of(c, f), payload(c, f));
    if (!r.ok()) return state.SkipWithError(r.status().message().c_str());
    bytes += r->file_size;
    c = (c + 1) % kChunks;
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.SetLabel(label(ChunkCodec::lz4, f) + " fdatasync+rename+dir fsync");
}

void BM_SwapReadChunk(benchmark::State& state) {
  const auto f = format_arg(state.range(0));
  const auto kind = static_cast<ReaderKind>(state.range(1));
  SwapFixture fx(kind, f, true);
  std::vector<uint8_t> out(payload(0, f).size());
  int c = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if (drop_cache(fx.store->path(c)) != 0) return state.SkipWithError("page cache not dropped");
    state.ResumeTiming();
    auto r = fx.store->read_chunk(meta_of(c, f), out);
    if (!r.ok()) return state.SkipWithError(r.status().message().c_str());
    c = (c + 1) % kChunks;
  }
  state.SetBytesProcessed(state.iterations() * int64_t(out.size()));
  state.SetLabel(label(ChunkCodec::lz4, f) + " " + policy::reader_kind_name(kind) + " cold");
}

void BM_SwapReadLayer64(benchmark::State& state) {
  const auto f = format_arg(state.range(0));
  const auto kind = static_cast<ReaderKind>(state.range(1));
  SwapFixture fx(kind, f, true);
  const size_t layer = fx.idx[0].layer_bytes();
  std::vector<uint8_t> out(layer * kChunks);
  std::vector<policy::LayerTarget> targets;
  for (int c = 0; c < kChunks; ++c) targets.push_back({&fx.idx[c], std::span(out).subspan(c * layer, layer)});
  int l = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if (!fx.drop_all()) return state.SkipWithError("page cache not dropped");
    state.ResumeTiming();
    for (const Status& s : fx.store->read_layer(l, targets))
      if (!s.ok()) return state.SkipWithError(s.message().c_str());
    l = (l + 1) % fx.idx[0].meta.n_layer;
  }
  state.SetBytesProcessed(state.iterations() * int64_t(out.size()));
  state.SetLabel(label(ChunkCodec::lz4, f) + " " + policy::reader_kind_name(kind) + " cold, 64 chunks");
}

void codec_args(benchmark::internal::Benchmark* b) {
  for (int codec : {0, 1, 2})
    for (int bits : {16, 8, 4, 2}) b->Args({codec, bits});
}
void io_args(benchmark::internal::Benchmark* b) {
  for (int bits : {16, 8, 4})
    for (int kind : {1, 2}) b->Args({bits, kind});
}

BENCHMARK(BM_Encode)->Apply(codec_args);
BENCHMARK(BM_Decode)->Apply(codec_args);
BENCHMARK(BM_SwapStoreChunk)->Arg(16)->Arg(8)->Arg(4)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SwapReadChunk)->Apply(io_args)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SwapReadLayer64)->Apply(io_args)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace llmsvc::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("kv_data", llmsvc::bench::dataset().source);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
