// SPDX-License-Identifier: Apache-2.0
// ClMatmul: GGUF weights repacked into GPU layouts, and the GEMV / GEMM / get_rows kernels over
// them (kernels/matmul.cl, matmul_gemv.cl, matmul_gemm.cl).
//
// The 4-bit types share one GEMV that folds the scale out of the block's dot product; every
// other layout goes through an exact 8-element dequantization shared with get_rows and the GEMM.
//
// Prefill: a GEMV for up to 4 tokens, the f32 GEMM (matmul_gemm.cl) beyond; on NVIDIA GPUs a
// tensor-core GEMM (matmul_mma.cl: the same dequantization, weights and activations rounded
// to f16, f32 sums; about 6x the f32 GEMM on an H200 at 512 tokens) instead of the f32 GEMM.
// It is built only on NVIDIA's platform, and its build doubles as the probe for mma.sync.
// Where a weight's blocks are 32 integer codes with a scale (and min) per block (Q4_0, Q4_1,
// Q4_K, and the int8 layouts with a scale per 32), prefill runs the int8 GEMM instead
// (matmul_mmq.cl: the CPU's integer block sums of the quantized input's codes; mma.sync s8 on
// NVIDIA, each item's own sums elsewhere, which on PoCL is 3.8x the f32 GEMM's prefill).
//
// Inputs: a quantized weight's matmul first quantizes its input as the CPU does (ggml's Q8_0 /
// Q8_1 / Q8_K: kernels/act_quant.cl) into a scratch buffer and multiplies the floats q * d, so
// its sums are the CPU's integer ones to f32 rounding. Weights sharing an input (Q/K/V,
// gate/up) share its quantization.
//
// The 4-bit GEMV reads x as float4: its input (the quantized copy) starts 16-byte aligned.
//
// Decode of the quantized types (1-4 tokens) runs the int8 GEMV by default
// (kernels/matmul_dp4a.cl): the input quantized into its int8 form (codes, and per 32 the scale
// and half-block code sums) by the same one launch (or the producer's fused output), each
// half-block's products summed exactly with dp4a (inline PTX, built on NVIDIA's platform only;
// char products elsewhere and where that build fails). LLMSVC_CL_GEMV_DP4A=0 keeps the float GEMV.
#include "hal/opencl/cl_matmul.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>

#include "hal/opencl/cl_weight_pack.h"
#include "hal/weight_blocks.h"

namespace llmsvc::hal::opencl {

// ClMatmul::Impl holds these two: their names are not file-local, as Impl's is not.

// The 4-bit GEMV's geometry (kernels/matmul_gemv.cl): items per row line, lines per
// work-group, rows per item, whether nibbles become floats through the mantissa (GEMV_MAGIC),
// elements of a block per item (GEMV_S) and steps loaded ahead (GEMV_U).
// LLMSVC_CL_GEMV="lx,ly,nr,magic[,s,u]" overrides them for a measurement
// (bench/opencl/run_cl_matmul.sh sweeps them). The default was the fastest one-token Q4_0
// GEMV of a sweep on an H200 (bench_cl_matmul, 7B shapes): two 64-item lines of 2 rows each,
// half a block per item; 32-item lines, 4 rows per item or 4- and 8-element slices were slower.
struct GemvShape {
  size_t lx = 64, ly = 2, nr = 2;
  int magic = 1;
  size_t s = 16, u = 1;
  size_t wg() const { return lx * ly; }
  size_t rows_per_wg() const { return ly * nr; }
};

struct MatmulKernels {
  ClKernel gemv1, gemv4, gemm, rows;
  ClKernel gemva1, gemva4;  // the float layouts' GEMV that adds alpha times its product (matmul_add)
  ClKernel gemvm1, gemvm4;  // up to three weights sharing x (matmul_multi)
  ClKernel gemvq1, gemvq4, gemvqm1, gemvqm4;  // kernels/matmul_dp4a.cl, for the layouts it reads
  ClKernel mma;  // kernels/matmul_mma.cl, where it is built
  ClKernel mmq;  // kernels/matmul_mmq.cl, for the layouts it reads, where it is built
};

namespace {

// The other layouts' GEMV geometry, fixed in the kernel (GEMVA_*).
constexpr GemvShape kGemvAny{32, 4, 2, 0, 32, 1};

GemvShape gemv_shape() {
  GemvShape g;
  const char* env = std::getenv("LLMSVC_CL_GEMV");
  if (!env) return g;
  GemvShape e;
  if (std::sscanf(env, "%zu,%zu,%zu,%d,%zu,%zu", &e.lx, &e.ly, &e.nr, &e.magic, &e.s, &e.u) < 3) return g;
  // A line is a power of two of items that splits into whole blocks (32 / s items each); an
  // item's partials and loaded codes stay in registers.
  const bool pow2 = e.lx >= 1 && (e.lx & (e.lx - 1)) == 0;
  const bool s_ok = e.s == 4 || e.s == 8 || e.s == 16 || e.s == 32;
  if (!pow2 || !s_ok || e.lx * e.s < 32 || e.ly < 1 || e.nr < 1 || e.nr > 8 || e.u < 1 || e.u > 8 || e.wg() > 1024)
    return g;
  return e;
}

// Must match kernels/matmul_gemv.cl and matmul_gemm.cl.
constexpr int kGemvMaxTokens = 4;        // GEMV_MAXT
constexpr size_t kGemmTile = 64;         // GEMM_TM = GEMM_TN
constexpr size_t kGemmWg = 256;          // 16 x 16

// The layouts the int8 GEMV reads (kernels/matmul_dp4a.cl; the int8 ones with a scale per 16 or
// 32: gs 4 or 5), and its geometry: items per row line, lines per work-group, rows per item.
// LLMSVC_CL_GEMV_DP4A_SHAPE="lx,ly,nr" overrides it for a measurement (llama.cpp's mmvq also
// gives an item 16 elements of a block). The default is the best of a sweep on an H100
// (2026-11-28, bench_e2e, 7B Q4_0 decode): four 64-item lines of one row each, +4 % over two
// lines of two rows (docs/measurements/2026-11-28-opencl-dp4a-gemv.md). A CPU device (PoCL)
// runs a work-group's items as loops, where a 64-item line spends more on the items' loop and
// the reduction than on the sums: 64 lines of 4 items took SmolLM2's decode step from 121 to 43 ms
// on two cores (2026-12-04-opencl-cpu-gemv.md).
constexpr bool dp4a_layout(Layout l) { return l != kF32 && l != kF16 && l != kBF16; }

GemvShape dp4a_shape(bool gpu) {
  GemvShape g = gpu ? GemvShape{64, 4, 1, 0, 16, 1} : GemvShape{4, 64, 1, 0, 16, 1};
  const char* env = std::getenv("LLMSVC_CL_GEMV_DP4A_SHAPE");
  GemvShape e = g;
  if (!env || std::sscanf(env, "%zu,%zu,%zu", &e.lx, &e.ly, &e.nr) != 3) return g;
  const bool pow2 = e.lx >= 2 && (e.lx & (e.lx - 1)) == 0;
  return pow2 && e.ly >= 1 && e.nr >= 1 && e.nr <= 8 && e.wg() <= 1024 ? e : g;
}

// The layouts the int8 GEMM reads (the int8 ones only with a scale per 32: gs 5).
constexpr bool int8_gemm_layout(Layout l) { return l == kQ4_0 || l == kQ4_1 || l == kQ4_K || l == kI8 || l == kI8M; }

// The tensor-core GEMM (kernels/matmul_mma.cl): its tile (rows x tokens, work-group items), and
// from how many tokens it takes over. On an H200 it beat the f32 GEMM at every count measured,
// 8 to 512 tokens, for Q4_0, Q4_1, Q4_K and Q8_0 at 7B shapes (2.6x at 8, 5-6x at 512), so it
// takes over wherever the GEMV hands over. LLMSVC_CL_MMA=N moves that to N tokens for a
// measurement; 0 turns it off.
constexpr size_t kMmaRows = 128, kMmaTokens = 128, kMmaWg = 256;
constexpr int kMmaMinTokens = kGemvMaxTokens + 1;

int mma_threshold() {
  const int v = env_int("LLMSVC_CL_MMA", kMmaMinTokens);
  return v == 0 ? 0 : std::max(v, kMmaMinTokens);
}

}  // namespace

ClView ClWeight::floats() const { return {ClPool::mem(part(0)), part(0).offset()}; }

uint64_t ClWeight::device_bytes() const {
  uint64_t n = 0;
  if (base_) return 0;
  for (const Buffer& b : parts) n += b.size();
  return n;
}

struct ClMatmul::Impl {
  ClDeviceContext* ctx = nullptr;
  ClProgram program;
  GemvShape gemv;
  bool e0m4 = false;  // 4-bit weights repacked as E0M4
  std::array<MatmulKernels, kLayouts> kernels;
  bool gemm_ok = true;  // the device runs 256-item work-groups of the GEMM
  ClProgram act_program;  // kernels/act_quant.cl, built with exact division
  ClKernel act_q8;
  Buffer act_scratch;  // the quantized input of the running matmul
  ClKernel scaled_add;  // y += alpha * p (matmul_add beyond the GEMV)
  Buffer add_scratch;   // matmul_add's product beyond the GEMV
  ClProgram mma_program;
  int mma_min_tokens = 0;  // 0: no tensor-core GEMM on this device
  std::string mma_note;    // why not, where not
  ClProgram mmq_program;
  ClKernel act_q8i;        // kernels/act_quant.cl: the int8 GEMM's input
  bool mmq = false;        // the int8 GEMM runs here
  std::string mmq_note;    // why not, where not
  Buffer mmq_scratch;      // the int8 GEMM's input: codes, scales, sums
  // Split-K where a matmul's tiles are fewer than the compute units (few tokens: a 4096-row
  // weight at 128 tokens is 32 tiles on an H100's 132 SMs): the splits' partial outputs, added
  // by mmq_sum_splits. LLMSVC_CL_MMQ_SPLIT=N forces N splits (1: none) for a test or an A/B.
  ClKernel mmq_sum;
  Buffer mmq_partial;
  int mmq_split = env_int("LLMSVC_CL_MMQ_SPLIT", 0);
  int mmq_nb = 4;  // the kernel's MQ_NB
  ClProgram dp4a_program;  // kernels/matmul_dp4a.cl
  ClKernel act_q8p;        // kernels/act_quant.cl: the int8 GEMV's input
  bool dp4a = false;       // the int8 GEMV runs here
  std::string dp4a_note;   // how it sums where not with PTX dp4a, or why it is off
  GemvShape dp4a_geom;

  // Builds the int8 GEMV: with dp4a through inline PTX on NVIDIA's platform; elsewhere, or
  // where that build fails, the same kernels summing char products.
  Status build_dp4a(std::optional<bool> want);

  // Builds the int8 GEMM: with mma.sync through inline PTX on NVIDIA's platform, elsewhere
  // each item's integer sums in plain OpenCL C (on PoCL 3.8x the f32 GEMM's prefill).
  Status build_mmq(std::optional<bool> want);

  // Builds the tensor-core program where NVIDIA's platform is; any failure (an older GPU, a
  // driver whose PTX lacks mma.sync m16n8k16) leaves the f32 GEMM in charge.
  Status build_mma();

  // The weight's parts as kernel views (a layout's unused part repeats part 0: a valid buffer
  // the kernel never reads).
  static std::array<ClView, 3> parts(const ClWeight& w) {
    std::array<ClView, 3> v;
    for (int i = 0; i < 3; ++i) v[i] = ClView{ClPool::mem(w.part(i) ? w.part(i) : w.part(0)), 0};
    return v;
  }

  // Launches `k` with the weight's arguments first, then `rest`.
  template <class... Rest>
  Status run(const ClWeight& w, cl_kernel k, const ClRange& range, const Rest&... rest) {
    const auto p = parts(w);
    return launch(ctx->queue().handle(), k, range, p[0], p[1], p[2], static_cast<uint32_t>(w.ref().rows),
                  static_cast<uint32_t>(w.ref().cols), w.stride(), w.gs, rest...);
  }
};

ClMatmul::ClMatmul(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClMatmul::~ClMatmul() = default;

Result<std::unique_ptr<ClMatmul>> ClMatmul::create(ClDeviceContext& ctx, std::optional<bool> e0m4,
                                                   std::optional<bool> int8_gemm, std::optional<bool> dp4a) {
  auto impl = std::make_unique<Impl>();
  impl->ctx = &ctx;
  impl->e0m4 = e0m4.value_or(env_switch("LLMSVC_CL_E0M4").value_or(false));
  impl->gemv = gemv_shape();
  const GemvShape& g = impl->gemv;
  const std::string options = "-cl-mad-enable -DGEMV_LX=" + std::to_string(g.lx) + " -DGEMV_LY=" + std::to_string(g.ly) +
                              " -DGEMV_NR=" + std::to_string(g.nr) + " -DGEMV_MAGIC=" + std::to_string(g.magic) +
                              " -DGEMV_S=" + std::to_string(g.s) + " -DGEMV_U=" + std::to_string(g.u);
  auto program = build_kernels(ctx, {"matmul", "gemv_lines", "matmul_gemv", "matmul_gemm"}, options);
  if (!program.ok()) return program.status();
  impl->program = std::move(program).value();
  for (int l = 0; l < kLayouts; ++l) {
    const std::string name = kLayoutNames[l];
    MatmulKernels& k = impl->kernels[l];
    for (auto [slot, prefix] : {std::pair{&k.gemv1, "gemv_"}, std::pair{&k.gemv4, "gemv_"},
                                std::pair{&k.gemvm1, "gemvm_"}, std::pair{&k.gemvm4, "gemvm_"},
                                std::pair{&k.gemm, "gemm_"}, std::pair{&k.rows, "get_rows_"}}) {
      std::string kname = prefix + name;
      if (slot == &k.gemv1 || slot == &k.gemvm1) kname += "_1";
      if (slot == &k.gemv4 || slot == &k.gemvm4) kname += "_4";
      auto made = make_kernel(impl->program.get(), kname.c_str());
      if (!made.ok()) return made.status();
      *slot = std::move(made).value();
    }
    // The GEMV's work-group is fixed by the kernel; a device that cannot run it cannot
    // multiply. The GEMM's is larger: without it, prefill runs as GEMVs.
    const size_t need = is_q4(static_cast<Layout>(l)) ? g.wg() : kGemvAny.wg();
    for (const ClKernel* gk : {&k.gemv4, &k.gemvm4}) {
      auto gemv_wg = max_work_group(gk->get(), ctx.info().device);
      if (!gemv_wg.ok()) return gemv_wg.status();
      if (*gemv_wg < need)
        return Status(Code::unsupported, "opencl: " + ctx.info().description() + " runs " + std::to_string(*gemv_wg) +
                                             " work-items per group of a GEMV of " + name + ", it needs " +
                                             std::to_string(need));
    }
    if (l == kF32 && !impl->scaled_add) {
      auto made = make_kernel(impl->program.get(), "scaled_add");
      if (!made.ok()) return made.status();
      impl->scaled_add = std::move(made).value();
    }
    if (l == kF32 || l == kF16 || l == kBF16) {
      for (auto [slot, suffix] : {std::pair{&k.gemva1, "_1"}, std::pair{&k.gemva4, "_4"}}) {
        auto made = make_kernel(impl->program.get(), ("gemva_" + name + suffix).c_str());
        if (!made.ok()) return made.status();
        *slot = std::move(made).value();
      }
    }
    auto gemm_wg = max_work_group(k.gemm.get(), ctx.info().device);
    if (!gemm_wg.ok()) return gemm_wg.status();
    if (*gemm_wg < kGemmWg) impl->gemm_ok = false;
  }
  auto act = build_kernels(ctx, {"act_quant"}, exact_float_options(ctx.info()));
  if (!act.ok()) return act.status();
  impl->act_program = std::move(act).value();
  auto act_q8 = make_kernel(impl->act_program.get(), "act_q8");
  if (!act_q8.ok()) return act_q8.status();
  impl->act_q8 = std::move(act_q8).value();
  auto act_q8i = make_kernel(impl->act_program.get(), "act_q8i");
  if (!act_q8i.ok()) return act_q8i.status();
  impl->act_q8i = std::move(act_q8i).value();
  auto act_q8p = make_kernel(impl->act_program.get(), "act_q8p");
  if (!act_q8p.ok()) return act_q8p.status();
  impl->act_q8p = std::move(act_q8p).value();
  const Status dp = impl->build_dp4a(dp4a);
  impl->dp4a = dp.ok();
  if (!dp.ok()) impl->dp4a_note = dp.message();
  const Status mma = impl->build_mma();
  if (!mma.ok()) {
    impl->mma_min_tokens = 0;
    impl->mma_note = mma.message();
  }
  const Status mmq = impl->build_mmq(int8_gemm);
  impl->mmq = mmq.ok();
  if (!mmq.ok()) impl->mmq_note = mmq.message();
  return std::unique_ptr<ClMatmul>(new ClMatmul(std::move(impl)));
}

Status ClMatmul::Impl::build_mmq(std::optional<bool> want) {
  if (!want) want = env_switch("LLMSVC_CL_MMQ");
  const bool nvidia = ctx->info().platform_name.find("NVIDIA") != std::string::npos;
  if (want == false) return Status(Code::unsupported, "int8 GEMM turned off");
  if (!gemm_ok) return Status(Code::unsupported, "int8 GEMM: the device runs no GEMM");
  std::string options = "-cl-mad-enable";
  if (nvidia) options += " -DLLMSVC_PTX_HALF -DLLMSVC_PTX_MMA";
  // 32-element blocks per K-step: 4 (two staged tiles of 40 KB each; 9-10 % faster than 2 on
  // an H100) where local memory holds them, else 2. NVIDIA's driver reports 48 KB, yet every
  // GPU with mma.sync m16n8k32 (sm_80 on) gives a work-group 99 KB or more, and a kernel
  // declaring 80 KB runs there (H100: tested). LLMSVC_CL_MMQ_NB=2 / 4 picks one for a measurement.
  cl_ulong local = 0;
  if (clGetDeviceInfo(ctx->info().device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, nullptr) != CL_SUCCESS)
    local = 0;
  if (nvidia) local = std::max<cl_ulong>(local, 99 * 1024);
  int nb = env_int("LLMSVC_CL_MMQ_NB", 0);
  if (nb != 2 && nb != 4) nb = local >= 82 * 1024 ? 4 : 2;
  if (static_cast<uint64_t>(nb) * 20 * 1024 + 64 > local)
    return Status(Code::unsupported, "int8 GEMM: " + std::to_string(local) + " bytes of local memory is too little");
  options += " -DMQ_NB=" + std::to_string(nb);
  mmq_nb = nb;
  auto program = build_kernels(*ctx, {"matmul", "matmul_mmq"}, options);
  if (!program.ok()) return program.status();
  mmq_program = std::move(program).value();
  auto sum = make_kernel(mmq_program.get(), "mmq_sum_splits");
  if (!sum.ok()) return sum.status();
  mmq_sum = std::move(sum).value();
  for (int l = 0; l < kLayouts; ++l) {
    if (!int8_gemm_layout(static_cast<Layout>(l))) continue;
    const std::string kname = std::string("gemm_mmq_") + kLayoutNames[l];
    auto made = make_kernel(mmq_program.get(), kname.c_str());
    if (!made.ok()) return made.status();
    kernels[l].mmq = std::move(made).value();
    auto wg = max_work_group(kernels[l].mmq.get(), ctx->info().device);
    if (!wg.ok()) return wg.status();
    if (*wg < kMmaWg)
      return Status(Code::unsupported, "int8 GEMM: " + kname + " runs " + std::to_string(*wg) + " items a group");
  }
  return Status::Ok();
}

Status ClMatmul::Impl::build_dp4a(std::optional<bool> want) {
  if (!want) want = env_switch("LLMSVC_CL_GEMV_DP4A");
  if (want == false) return Status(Code::unsupported, "turned off (LLMSVC_CL_GEMV_DP4A=0)");
  dp4a_geom = dp4a_shape(ctx->info().is_gpu);
  const GemvShape& g = dp4a_geom;
  const std::string options = "-cl-mad-enable -DDP_LX=" + std::to_string(g.lx) + " -DDP_LY=" + std::to_string(g.ly) +
                              " -DDP_NR=" + std::to_string(g.nr);
  // Inline PTX is NVIDIA's extension (another platform would fail the build, PoCL slowly); its
  // build is the probe for dp4a (sm_61 on).
  Result<ClProgram> program = Status(Code::unsupported, "not an NVIDIA platform");
  if (ctx->info().platform_name.find("NVIDIA") != std::string::npos)
    program = build_kernels(*ctx, {"matmul", "gemv_lines", "matmul_dp4a"}, options + " -DLLMSVC_PTX_HALF -DDP4A_PTX");
  dp4a_note.clear();
  if (!program.ok()) {
    dp4a_note = "char products (no PTX dp4a: " + program.status().message().substr(0, 200) + ")";
    program = build_kernels(*ctx, {"matmul", "gemv_lines", "matmul_dp4a"}, options);
    if (!program.ok()) return program.status();
  }
  dp4a_program = std::move(program).value();
  for (int l = 0; l < kLayouts; ++l) {
    if (!dp4a_layout(static_cast<Layout>(l))) continue;
    MatmulKernels& k = kernels[l];
    for (auto [slot, prefix, t] : {std::tuple{&k.gemvq1, "gemvq_", "_1"}, std::tuple{&k.gemvq4, "gemvq_", "_4"},
                                   std::tuple{&k.gemvqm1, "gemvqm_", "_1"}, std::tuple{&k.gemvqm4, "gemvqm_", "_4"}}) {
      const std::string kname = prefix + std::string(kLayoutNames[l]) + t;
      auto made = make_kernel(dp4a_program.get(), kname.c_str());
      if (!made.ok()) return made.status();
      auto wg = max_work_group(made->get(), ctx->info().device);
      if (!wg.ok()) return wg.status();
      if (*wg < g.wg())
        return Status(Code::unsupported, kname + " runs " + std::to_string(*wg) + " items a group");
      *slot = std::move(made).value();
    }
  }
  return Status::Ok();
}

Status ClMatmul::Impl::build_mma() {
  mma_min_tokens = mma_threshold();
  if (mma_min_tokens == 0) return Status(Code::unsupported, "tensor-core GEMM turned off (LLMSVC_CL_MMA=0)");
  if (!gemm_ok) return Status(Code::unsupported, "tensor-core GEMM: the device runs no GEMM");
  // Inline PTX is NVIDIA's extension; another platform would fail the build anyway, and PoCL
  // could take long to say so.
  if (ctx->info().platform_name.find("NVIDIA") == std::string::npos)
    return Status(Code::unsupported, "tensor-core GEMM: not an NVIDIA platform");
  // The build is the probe: a GPU before sm_80 or a driver whose PTX lacks mma.sync m16n8k16
  // fails it, and the f32 GEMM stays in charge.
  auto program = build_kernels(*ctx, {"matmul", "ptx", "matmul_mma"}, "-cl-mad-enable -DLLMSVC_PTX_HALF");
  if (!program.ok()) return program.status();
  mma_program = std::move(program).value();
  for (int l = 0; l < kLayouts; ++l) {
    const std::string kname = std::string("gemm_mma_") + kLayoutNames[l];
    auto made = make_kernel(mma_program.get(), kname.c_str());
    if (!made.ok()) return made.status();
    kernels[l].mma = std::move(made).value();
    auto wg = max_work_group(kernels[l].mma.get(), ctx->info().device);
    if (!wg.ok()) return wg.status();
    if (*wg < kMmaWg)
      return Status(Code::unsupported, "tensor-core GEMM: " + kname + " runs " + std::to_string(*wg) + " items a group");
  }
  return Status::Ok();
}

bool ClMatmul::uses_tensor_cores(int n_tokens) const {
  return impl_->mma_min_tokens > 0 && n_tokens >= impl_->mma_min_tokens;
}

const std::string& ClMatmul::tensor_core_note() const { return impl_->mma_note; }

bool ClMatmul::uses_int8_gemm(const ClWeight& w, int n_tokens) const {
  const auto l = static_cast<Layout>(w.layout);
  return impl_->mmq && n_tokens >= kMmaMinTokens && int8_gemm_layout(l) && ((l != kI8 && l != kI8M) || w.gs == 5) &&
         w.ref().cols % 32 == 0;
}

const std::string& ClMatmul::int8_gemm_note() const { return impl_->mmq_note; }

bool ClMatmul::uses_dp4a_gemv(const ClWeight& w, int n_tokens) const {
  const auto l = static_cast<Layout>(w.layout);
  return impl_->dp4a && n_tokens >= 1 && n_tokens <= kGemvMaxTokens && !uses_tensor_cores(n_tokens) &&
         act_quant(w.ref().type) != ActQuant::none && dp4a_layout(l) && ((l != kI8 && l != kI8M) || w.gs == 4 || w.gs == 5) &&
         w.ref().cols % 32 == 0;
}

ClDeviceContext& ClMatmul::context() const { return *impl_->ctx; }

const std::string& ClMatmul::dp4a_gemv_note() const { return impl_->dp4a_note; }

bool ClMatmul::supports(WeightType type) const { return is_supported_weight_type(static_cast<uint32_t>(type)); }

Result<std::unique_ptr<ClWeight>> ClMatmul::upload(const WeightRef& w) {
  if (!supports(w.type))
    return Status(Code::unsupported, "opencl matmul: weight type " + std::to_string(static_cast<uint32_t>(w.type)));
  if (w.rows <= 0 || w.cols <= 0 || w.data == nullptr || w.cols % block_elems(w.type) != 0 ||
      w.rows > UINT32_MAX / 2 || w.cols > UINT32_MAX / 2)
    return Status(Code::invalid_argument, "opencl matmul: bad weight shape " + std::to_string(w.rows) + " x " +
                                              std::to_string(w.cols));
  const bool e0m4 = impl_->e0m4 && w.cols % 128 == 0 &&
                    (w.type == WeightType::Q4_0 || w.type == WeightType::Q4_1 || w.type == WeightType::Q4_K);
  const PackedWeight p = e0m4 ? pack_e0m4(w) : pack_weight(w);
  auto out = std::make_unique<ClWeight>();
  out->ref_ = w;
  out->layout = p.layout;
  out->kp = p.kp ? p.kp : static_cast<uint32_t>(w.cols);  // the quantized layouts have no padding
  out->gs = p.gs;
  out->resident_ = w.rows;
  out->resident_cols_ = w.cols;
  auto parts = upload_parts(p);
  if (!parts.ok()) return parts.status();
  for (int i = 0; i < 3; ++i) {
    out->parts[i] = std::move((*parts)[i]);
    out->part_row[i] = p.part[i].size() / static_cast<size_t>(w.rows);
  }
  return out;
}

Result<std::array<Buffer, 3>> ClMatmul::upload_parts(const PackedWeight& p) {
  std::array<Buffer, 3> out;
  for (int i = 0; i < 3; ++i) {
    if (p.part[i].empty()) continue;
    auto buf = impl_->ctx->pool().alloc(p.part[i].size());
    if (!buf.ok()) return buf.status();
    out[i] = std::move(buf).value();
    // Blocking: the host copy goes away when the caller returns.
    const cl_int err = clEnqueueWriteBuffer(impl_->ctx->queue().handle(), ClPool::mem(out[i]), CL_TRUE, 0,
                                            p.part[i].size(), p.part[i].data(), 0, nullptr, nullptr);
    if (err != CL_SUCCESS) return cl_status(err, "uploading a weight");
  }
  return out;
}

ClMatmul::ActQuant ClMatmul::act_quant(WeightType type) {
  switch (type) {
    case WeightType::Q4_0:
    case WeightType::Q4_1:
    case WeightType::Q5_0:
    case WeightType::Q5_1:
    case WeightType::Q8_0: return ActQuant::q8_32;
    case WeightType::Q4_K:
    case WeightType::Q5_K:
    case WeightType::Q6_K: return ActQuant::q8_256;
    default: return ActQuant::none;
  }
}

Status ClMatmul::quantize_input(const ClWeight& w, ClView x, int n_tokens, ClView out) {
  if (n_tokens < 0 || !x.mem || !out.mem) return Status(Code::invalid_argument, "opencl quantize_input: bad arguments");
  const size_t n = static_cast<size_t>(n_tokens) * static_cast<size_t>(w.ref().cols);
  if (n == 0) return Status::Ok();
  const ActQuant mode = act_quant(w.ref().type);
  if (mode == ActQuant::none) {
    if (x.mem == out.mem && x.offset == out.offset) return Status::Ok();
    const cl_int e = clEnqueueCopyBuffer(impl_->ctx->queue().handle(), x.mem, out.mem, x.offset, out.offset,
                                         n * sizeof(float), 0, nullptr, nullptr);
    return e == CL_SUCCESS ? Status::Ok() : cl_status(e, "copying a matmul's input");
  }
  constexpr size_t kWg = 256;  // kernels/act_quant.cl's AQ_WG
  const ClRange r{1, {round_up(n, kWg), 1, 1}, {kWg, 1, 1}};
  return launch(impl_->ctx->queue().handle(), impl_->act_q8.get(), r, x, out, uint64_t{n},
                int32_t{act_quant_block(mode)});
}

Status ClMatmul::quantize_input_q8(const ClWeight& w, ClView x, int n_tokens, ClView out) {
  const ActQuant mode = act_quant(w.ref().type);
  if (n_tokens < 0 || !x.mem || !out.mem || mode == ActQuant::none || w.ref().cols % 32 != 0)
    return Status(Code::invalid_argument, "opencl quantize_input_q8: bad arguments");
  const size_t n = static_cast<size_t>(n_tokens) * static_cast<size_t>(w.ref().cols);
  if (n == 0) return Status::Ok();
  constexpr size_t kWg = 256;  // kernels/act_quant.cl's AQ_WG
  const ClRange r{1, {round_up(n, kWg), 1, 1}, {kWg, 1, 1}};
  return launch(impl_->ctx->queue().handle(), impl_->act_q8p.get(), r, x, out,
                out.at(q8_params_offset(n_tokens, w.ref().cols)), uint64_t{n}, int32_t{act_quant_block(mode)});
}

Status ClMatmul::quantize_for(const ClWeight& w, ClView x, int n_tokens, ClView out) {
  return uses_dp4a_gemv(w, n_tokens) ? quantize_input_q8(w, x, n_tokens, out) : quantize_input(w, x, n_tokens, out);
}

Result<ClView> ClMatmul::input_scratch(int n_tokens, int64_t cols) {
  if (n_tokens < 0 || cols < 0) return Status(Code::invalid_argument, "opencl input_scratch: bad shape");
  // Either form: floats, or codes then the blocks' params (8 bytes per 32).
  const size_t floats = static_cast<size_t>(n_tokens) * static_cast<size_t>(cols) * sizeof(float);
  const size_t bytes = std::max(floats, q8_params_offset(n_tokens, cols) + static_cast<size_t>(n_tokens) *
                                                                               static_cast<size_t>(cols / 32) * 8);
  LLMSVC_RETURN_IF_ERROR(reserve_scratch(impl_->ctx->pool(), impl_->act_scratch, std::max<size_t>(bytes, 64)));
  return ClView{ClPool::mem(impl_->act_scratch), 0};
}

Status ClMatmul::matmul(const ClWeight& w, ClView x, int n_tokens, ClView y) {
  if (n_tokens < 0 || !x.mem || !y.mem) return Status(Code::invalid_argument, "opencl matmul: bad arguments");
  if (n_tokens == 0) return Status::Ok();
  if (act_quant(w.ref().type) == ActQuant::none) return multiply(w, x, n_tokens, y);
  auto xq = input_scratch(n_tokens, w.ref().cols);
  if (!xq.ok()) return xq.status();
  LLMSVC_RETURN_IF_ERROR(quantize_for(w, x, n_tokens, *xq));
  return multiply(w, *xq, n_tokens, y);
}

Status ClMatmul::multiply_int8(const ClWeight& w, ClView x, int n_tokens, ClView y, bool int8_ready) {
  const size_t rows = static_cast<size_t>(w.ref().rows), cols = static_cast<size_t>(w.ref().cols);
  const size_t n = static_cast<size_t>(n_tokens) * cols, blocks = n / 32;
  // Codes, then the per-32 scales and sums, each part 256-byte aligned.
  const size_t d_at = round_up(n, 256), s_at = d_at + round_up(blocks * 4, 256);
  LLMSVC_RETURN_IF_ERROR(reserve_scratch(impl_->ctx->pool(), impl_->mmq_scratch, s_at + blocks * 4));
  const cl_mem m = ClPool::mem(impl_->mmq_scratch);
  const ClView codes{m, 0}, scales{m, d_at}, sums{m, s_at};
  constexpr size_t kWg = 256;  // kernels/act_quant.cl's AQ_WG
  const ClRange qr{1, {round_up(n, kWg), 1, 1}, {kWg, 1, 1}};
  if (!int8_ready)
    LLMSVC_RETURN_IF_ERROR(launch(impl_->ctx->queue().handle(), impl_->act_q8i.get(), qr, x, codes, scales, sums,
                                  uint64_t{n}, int32_t{act_quant_block(act_quant(w.ref().type))}));
  const size_t row_tiles = (rows + kMmaRows - 1) / kMmaRows;
  const size_t token_tiles = (static_cast<size_t>(n_tokens) + kMmaTokens - 1) / kMmaTokens;
  // Split K while the tiles leave compute units idle, each split at least 1,024 columns long
  // (the kernel's K-step is MQ_NB blocks of 32).
  const size_t steps = (cols / 32 + impl_->mmq_nb - 1) / impl_->mmq_nb;
  size_t splits = impl_->mmq_split > 0 ? static_cast<size_t>(impl_->mmq_split)
                                       : static_cast<size_t>(impl_->ctx->info().compute_units) / (row_tiles * token_tiles);
  splits = std::clamp<size_t>(splits, 1, std::max<size_t>(1, cols / 1024));
  const auto split_steps = static_cast<uint32_t>((steps + splits - 1) / splits);
  splits = (steps + split_steps - 1) / split_steps;
  const ClRange r{3, {row_tiles * kMmaWg, token_tiles, splits}, {kMmaWg, 1, 1}};
  const cl_kernel k = impl_->kernels[static_cast<size_t>(w.layout)].mmq.get();
  if (splits == 1)
    return impl_->run(w, k, r, codes, scales, sums, static_cast<uint32_t>(n_tokens), split_steps, y);
  const size_t count = static_cast<size_t>(n_tokens) * rows;
  LLMSVC_RETURN_IF_ERROR(reserve_scratch(impl_->ctx->pool(), impl_->mmq_partial, splits * count * sizeof(float)));
  const ClView partial{ClPool::mem(impl_->mmq_partial), 0};
  LLMSVC_RETURN_IF_ERROR(
      impl_->run(w, k, r, codes, scales, sums, static_cast<uint32_t>(n_tokens), split_steps, partial));
  const ClRange sr{1, {round_up(count, kWg), 1, 1}, {kWg, 1, 1}};
  return launch(impl_->ctx->queue().handle(), impl_->mmq_sum.get(), sr, partial.mem,
                static_cast<uint32_t>(splits), static_cast<uint32_t>(count), y);
}

Status ClMatmul::multiply(const ClWeight& w, ClView x, int n_tokens, ClView y, bool int8_ready) {
  if (uses_int8_gemm(w, n_tokens)) return multiply_int8(w, x, n_tokens, y, int8_ready);
  const MatmulKernels& k = impl_->kernels[static_cast<size_t>(w.layout)];
  const size_t rows = static_cast<size_t>(w.ref().rows), cols = static_cast<size_t>(w.ref().cols);
  if (uses_dp4a_gemv(w, n_tokens)) {  // x: the int8 form
    if (x.offset % 16 != 0) return Status(Code::invalid_argument, "opencl matmul: int8 x must be 16-byte aligned");
    const GemvShape& g = impl_->dp4a_geom;
    const ClRange r{1, {(rows + g.rows_per_wg() - 1) / g.rows_per_wg() * g.wg(), 1, 1}, {g.wg(), 1, 1}};
    return impl_->run(w, (n_tokens == 1 ? k.gemvq1 : k.gemvq4).get(), r, x, x.at(q8_params_offset(n_tokens, w.ref().cols)),
                      static_cast<uint32_t>(n_tokens), y);
  }
  const bool q4 = is_q4(static_cast<Layout>(w.layout));
  if (q4 && x.offset % 16 != 0)
    return Status(Code::invalid_argument, "opencl matmul: x must be 16-byte aligned for 4-bit weights");
  if (uses_tensor_cores(n_tokens)) {
    ClRange r;
    r.dims = 2;
    r.global = {(rows + kMmaRows - 1) / kMmaRows * kMmaWg, (static_cast<size_t>(n_tokens) + kMmaTokens - 1) / kMmaTokens, 1};
    r.local = {kMmaWg, 1, 1};
    return impl_->run(w, k.mma.get(), r, x, static_cast<uint32_t>(n_tokens), y);
  }
  if (n_tokens > kGemvMaxTokens && impl_->gemm_ok) {
    ClRange r;
    r.dims = 2;
    r.global = {(rows + kGemmTile - 1) / kGemmTile * 16, (static_cast<size_t>(n_tokens) + kGemmTile - 1) / kGemmTile * 16, 1};
    r.local = {16, 16, 1};
    return impl_->run(w, k.gemm.get(), r, x, static_cast<uint32_t>(n_tokens), y);
  }
  ClRange r;
  const GemvShape& g = q4 ? impl_->gemv : kGemvAny;
  r.global = {(rows + g.rows_per_wg() - 1) / g.rows_per_wg() * g.wg(), 1, 1};
  r.local = {g.wg(), 1, 1};
  // Up to kGemvMaxTokens tokens per launch (more only where the GEMM cannot run).
  for (int t = 0; t < n_tokens; t += kGemvMaxTokens) {
    const int n = std::min(kGemvMaxTokens, n_tokens - t);
    const size_t done = static_cast<size_t>(t);
    LLMSVC_RETURN_IF_ERROR(impl_->run(w, (n == 1 ? k.gemv1 : k.gemv4).get(), r, x.at(done * cols * 4),
                                      static_cast<uint32_t>(n), y.at(done * rows * 4)));
  }
  return Status::Ok();
}

Status ClMatmul::matmul_add(const ClWeight& w, ClView x, int n_tokens, ClView y, float alpha) {
  const auto l = static_cast<Layout>(w.layout);
  if (n_tokens < 0 || !x.mem || !y.mem || (l != kF32 && l != kF16 && l != kBF16))
    return Status(Code::invalid_argument, "opencl matmul_add: a float weight and its operands");
  if (n_tokens == 0) return Status::Ok();
  const size_t rows = static_cast<size_t>(w.ref().rows);
  // Where matmul() runs the float GEMV, its GEMV that adds: the same sums, one launch.
  if (n_tokens <= kGemvMaxTokens && !uses_tensor_cores(n_tokens)) {
    const MatmulKernels& k = impl_->kernels[static_cast<size_t>(w.layout)];
    const ClRange r{1, {(rows + kGemvAny.rows_per_wg() - 1) / kGemvAny.rows_per_wg() * kGemvAny.wg(), 1, 1},
                    {kGemvAny.wg(), 1, 1}};
    return impl_->run(w, (n_tokens == 1 ? k.gemva1 : k.gemva4).get(), r, x, static_cast<uint32_t>(n_tokens), y, alpha);
  }
  const size_t n = static_cast<size_t>(n_tokens) * rows;
  LLMSVC_RETURN_IF_ERROR(reserve_scratch(impl_->ctx->pool(), impl_->add_scratch, n * sizeof(float)));
  const ClView part{ClPool::mem(impl_->add_scratch), 0};
  LLMSVC_RETURN_IF_ERROR(matmul(w, x, n_tokens, part));
  constexpr size_t kWg = 256;
  const ClRange r{1, {round_up(n, kWg), 1, 1}, {kWg, 1, 1}};
  return launch(impl_->ctx->queue().handle(), impl_->scaled_add.get(), r, y, part, uint64_t{n}, alpha);
}

Status ClMatmul::matmul_multi(const ClWeight* const* ws, const ClView* ys, int n, ClView x, int n_tokens,
                              bool x_quantized) {
  if (n < 1 || n > 3 || n_tokens < 0 || !x.mem) return Status(Code::invalid_argument, "opencl matmul_multi: bad arguments");
  const ClWeight& w0 = *ws[0];
  bool fuse = n > 1 && n_tokens >= 1 && n_tokens <= kGemvMaxTokens && !uses_tensor_cores(n_tokens);
  for (int i = 1; i < n && fuse; ++i)
    fuse = ws[i]->layout == w0.layout && ws[i]->ref().cols == w0.ref().cols && ws[i]->stride() == w0.stride() && ws[i]->gs == w0.gs;
  for (int i = 0; i < n && fuse; ++i) fuse = ys[i].mem != nullptr;
  for (int i = 1; i < n && fuse; ++i) fuse = act_quant(ws[i]->ref().type) == act_quant(w0.ref().type);
  for (int i = 1; i < n; ++i)
    if (ws[i]->ref().cols != w0.ref().cols)
      return Status(Code::invalid_argument, "opencl matmul_multi: weights sharing an input differ in width");
  if (x_quantized) {
    for (int i = 0; i < n; ++i)
      if (act_quant(ws[i]->ref().type) == ActQuant::none || act_quant(ws[i]->ref().type) != act_quant(w0.ref().type) ||
          uses_dp4a_gemv(*ws[i], n_tokens) != uses_dp4a_gemv(w0, n_tokens))
        return Status(Code::invalid_argument, "opencl matmul_multi: a quantized input for weights that quantize differently");
  }
  if (n_tokens == 0) return Status::Ok();
  // The input quantized once for each run of weights that quantize it alike (Q/K/V of a type),
  // in the form each reads (floats, or the int8 form of the int8 GEMV).
  auto quantized = [&](int i) -> Result<ClView> {
    const ActQuant mode = act_quant(ws[i]->ref().type);
    if (mode == ActQuant::none || x_quantized) return x;
    auto out = input_scratch(n_tokens, w0.ref().cols);
    if (!out.ok()) return out.status();
    const bool q8 = uses_dp4a_gemv(*ws[i], n_tokens);
    if (i == 0 || mode != act_quant(ws[i - 1]->ref().type) || q8 != uses_dp4a_gemv(*ws[i - 1], n_tokens))
      LLMSVC_RETURN_IF_ERROR(quantize_for(*ws[i], x, n_tokens, *out));
    return *out;
  };
  if (!fuse) {
    for (int i = 0; i < n; ++i) {
      if (!ys[i].mem) return Status(Code::invalid_argument, "opencl matmul_multi: bad arguments");
      auto xq = quantized(i);
      if (!xq.ok()) return xq.status();
      // Weights quantizing the input alike read the same int8 split of it (Q/K/V, gate/up).
      const bool int8_ready = i > 0 && uses_int8_gemm(*ws[i - 1], n_tokens) && uses_int8_gemm(*ws[i], n_tokens) &&
                              act_quant(ws[i]->ref().type) == act_quant(ws[i - 1]->ref().type);
      LLMSVC_RETURN_IF_ERROR(multiply(*ws[i], *xq, n_tokens, ys[i], int8_ready));
    }
    return Status::Ok();
  }
  auto xq = quantized(0);
  if (!xq.ok()) return xq.status();
  x = *xq;
  const bool q4 = is_q4(static_cast<Layout>(w0.layout)), q8 = uses_dp4a_gemv(w0, n_tokens);  // q8: every weight
  if ((q4 || q8) && x.offset % 16 != 0)
    return Status(Code::invalid_argument, "opencl matmul: x must be 16-byte aligned for 4-bit weights or int8 x");
  const GemvShape& g = q8 ? impl_->dp4a_geom : q4 ? impl_->gemv : kGemvAny;
  // Each weight's rows in whole work-groups of its own, as its single launch would have them.
  uint32_t first[3] = {0, 0, 0};
  size_t groups = 0;
  for (int i = 0; i < n; ++i) {
    first[i] = static_cast<uint32_t>(groups);
    groups += (static_cast<size_t>(ws[i]->ref().rows) + g.rows_per_wg() - 1) / g.rows_per_wg();
  }
  if (groups > UINT32_MAX) return Status(Code::invalid_argument, "opencl matmul_multi: too many rows");
  // Two weights: weight 2's slot repeats weight 1's arguments, its first group past the last.
  if (n == 2) first[2] = static_cast<uint32_t>(groups);
  auto set = [&](int i) {
    const ClWeight& w = *ws[std::min(i, n - 1)];
    const auto p = Impl::parts(w);
    return std::tuple{p[0], p[1], p[2], static_cast<uint32_t>(w.ref().rows), ys[std::min(i, n - 1)]};
  };
  ClRange r;
  r.global = {groups * g.wg(), 1, 1};
  r.local = {g.wg(), 1, 1};
  const MatmulKernels& k = impl_->kernels[static_cast<size_t>(w0.layout)];
  const auto cols = static_cast<uint32_t>(w0.ref().cols), tokens = static_cast<uint32_t>(n_tokens);
  return std::apply(
      [&](const auto&... a) {
        const cl_command_queue q = impl_->ctx->queue().handle();
        if (q8)  // x: codes, then the blocks' params
          return launch(q, (n_tokens == 1 ? k.gemvqm1 : k.gemvqm4).get(), r, a..., cols, w0.stride(), w0.gs, x,
                        x.at(q8_params_offset(n_tokens, cols)), tokens, first[1], first[2]);
        return launch(q, (n_tokens == 1 ? k.gemvm1 : k.gemvm4).get(), r, a..., cols, w0.stride(), w0.gs, x, tokens, first[1],
                      first[2]);
      },
      std::tuple_cat(set(0), set(1), set(2)));
}

Status ClMatmul::get_rows(const ClWeight& w, ClView ids, int n, ClView out) {
  if (n < 0 || !ids.mem || !out.mem) return Status(Code::invalid_argument, "opencl get_rows: bad arguments");
  if (n == 0) return Status::Ok();
  ClRange r;
  r.global = {static_cast<size_t>(n) * static_cast<size_t>((w.ref().cols + 7) / 8), 1, 1};
  return impl_->run(w, impl_->kernels[static_cast<size_t>(w.layout)].rows.get(), r, ids, static_cast<uint32_t>(n), out);
}

}  // namespace llmsvc::hal::opencl
