// SPDX-License-Identifier: Apache-2.0
// ClOps: one program (kernels/ops.cl then kernels/attention.cl) built at create(), its kernels
// made once; each op checks its shapes, sets arguments and enqueues. Attention's scratch
// (scores, block stats, split partial sums) lives in the device's pool and only grows.
#include "hal/opencl/cl_ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "hal/host/fp16.h"
#include "hal/opencl/cl_pool.h"

namespace llmsvc::hal::opencl {
namespace {

// Must match ops.cl's ROW_WG and attention.cl's KB and RT.
constexpr size_t kWg = 256;  // elementwise and row kernels
constexpr int kKeyBlock = 64;
constexpr int kRowTile = 8;
constexpr int kMaxHeadDim = kKeyBlock * 4;
// Attention's score matrix is at most this many floats (64 MiB); longer calls run in passes
// of fewer query tokens.
constexpr size_t kMaxScoreFloats = size_t(16) << 20;
// attn_decode's limits (its DW, DG, DQ, DK): items, query heads per kv head, query floats and
// scores of a group.
constexpr size_t kDecodeItems = 256, kDecodeGroup = 8, kDecodeQuery = 2048, kDecodeScores = 8192;
// attention_mma.cl's AM_WG and AM_ROWS: items and query rows of a work-group.
constexpr size_t kMmaAttnItems = 128, kMmaAttnRows = 64;
// attention.cl's MR: query rows whose key mass attn_mass_parts sums in one item.
constexpr size_t kMassRows = 64;


size_t ceil_div(size_t n, size_t m) { return (n + m - 1) / m; }

// ggml's GELU table as the CPU backend builds it (hal/cpu/activation_ops.cpp): for every f16
// value h, f16(0.5 h (1 + tanh(sqrt(2/pi) h (1 + 0.044715 h^2)))) with the same f32 steps and
// the same libm tanh, so a table lookup on the device gives the CPU's GEGLU bit for bit.
std::vector<uint16_t> gelu_table() {
  constexpr float kGeluA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  std::vector<uint16_t> t(1 << 16);
  for (uint32_t i = 0; i < t.size(); ++i) {
    const float x = fp16_to_fp32(static_cast<uint16_t>(i));
    t[i] = fp32_to_fp16((0.5f * x) * (1.0f + std::tanh((kSqrt2OverPi * x) * std::fma(x, kGeluA * x, 1.0f))));
  }
  return t;
}

// A 1-D range of n items (rounded up to whole work-groups of wg).
ClRange range1(size_t n, size_t wg) { return ClRange{1, {round_up(n, wg), 1, 1}, {wg, 1, 1}}; }

}  // namespace

struct ClOps::Impl {
  explicit Impl(ClDeviceContext& c) : ctx(c) {}
  ClDeviceContext& ctx;
  ClProgram program;
  ClKernel rms_norm, add_rms_norm, rms_norm_q, add_rms_norm_q, swiglu_q, geglu_q, rope, rope_qk, swiglu, geglu, add, add_bias, scale, store_kv;
  ClKernel attn_scores, attn_pv, attn_reduce, attn_mass_parts, attn_parts_mass, attn_decode, attn_units_mass, attn_dec_scores,
      attn_dec_pv;
  ClKernel act_q8p;  // attention's int8-form output where its kernels do not write it
  // Prefill attention on tensor cores (kernels/attention_mma.cl) for head_dim 64 and 128, where
  // it builds (NVIDIA's platform); otherwise the note says why. LLMSVC_CL_ATTN_MMA=0 turns it
  // off for an A/B.
  ClProgram mma_program;
  ClKernel attn_mma64, attn_mma128;
  std::string mma_note;
  Buffer mass_parts;  // key mass shares, a row of keys per part (attn_parts_mass adds them)
  Buffer gelu;  // 65536 halves
  // Attention scratch: scores [row][key], (max, sum) per row and key block, (max, 1 / sum) per
  // row, partial outputs per row and split.
  Buffer scores, block_stats, row_stats, partial;
  // Decode steps' key mass as integer shares (attn_decode, attn_dec_pv): a row of n_valid uints
  // per attention call, kept until flush_units, whose one launch (attn_units_mass) adds the
  // rows to the mass in order and zeroes them again.
  Buffer mass_units;
  ClView pending_mass;
  int pending_n = 0, pending_rows = 0;
  static constexpr int kUnitRows = 64;  // rows a buffer holds: a step's layers, mostly
  // The one-launch decode kernel: the longest context it takes (its scores in local memory
  // bound it too), and its channel split where forced (0: from the compute units).
  // LLMSVC_CL_DECODE_KEYS / LLMSVC_CL_DECODE_CSPLIT set them for a measurement or a test.
  // Past 256 keys the split path's three launches win (H100, 7B at context 1,024: 166 tok/s
  // against 132 with the one-launch kernel, whose item per key reads K rows 256 bytes apart).
  int decode_keys = env_int("LLMSVC_CL_DECODE_KEYS", 256);
  int decode_csplit = env_int("LLMSVC_CL_DECODE_CSPLIT", 0);
  // A long context's decode scores by teams of items per key row (attn_dec_scores) rather
  // than attn_scores' row tiles; LLMSVC_CL_DEC_SCORES=0 turns it off for an A/B.
  bool dec_scores = env_switch("LLMSVC_CL_DEC_SCORES").value_or(true);
  // Its P.V in work-groups of 256 items (attn_dec_pv), this many per compute unit;
  // LLMSVC_CL_DEC_PV=0 keeps attn_pv for an A/B.
  bool dec_pv = env_switch("LLMSVC_CL_DEC_PV").value_or(true);
  int dec_pv_per_cu = std::max(1, env_int("LLMSVC_CL_DEC_PV_PER_CU", 2));
  bool kv_fast = env_switch("LLMSVC_CL_KV_FAST").value_or(true);

  cl_command_queue queue() const { return ctx.queue().handle(); }
  Status reserve(Buffer& b, size_t bytes) { return reserve_scratch(ctx.pool(), b, bytes); }
  // The next row of mass_units for `mass` over n keys (zeros); what waits for another mass or
  // another n is added first.
  Result<ClView> units_row(ClView mass, int n) {
    if (pending_rows > 0 && (mass.mem != pending_mass.mem || mass.offset != pending_mass.offset || n != pending_n ||
                             pending_rows == kUnitRows))
      LLMSVC_RETURN_IF_ERROR(flush_units());
    const size_t before = mass_units ? mass_units.size() : 0;  // a new buffer is larger
    LLMSVC_RETURN_IF_ERROR(reserve(mass_units, size_t{kUnitRows} * n * sizeof(uint32_t)));
    if (mass_units.size() != before) {  // (nothing waits: a row count below kUnitRows fits)
      const uint32_t zero = 0;
      const cl_int err = clEnqueueFillBuffer(queue(), ClPool::mem(mass_units), &zero, sizeof zero, 0,
                                             mass_units.size() / 4 * 4, 0, nullptr, nullptr);
      if (err != CL_SUCCESS) return cl_status(err, "attention: clearing the key mass units");
    }
    pending_mass = mass;
    pending_n = n;
    return ClView{ClPool::mem(mass_units), size_t(pending_rows++) * n * sizeof(uint32_t)};
  }
  Status flush_units() {
    if (pending_rows == 0) return Status::Ok();
    const int rows = pending_rows;
    pending_rows = 0;
    return launch(queue(), attn_units_mass.get(), range1(pending_n, kKeyBlock), ClPool::mem(mass_units), pending_n,
                  int32_t{rows}, pending_mass);
  }
  Status build_mma();
};

Status ClOps::Impl::build_mma() {
  if (env_switch("LLMSVC_CL_ATTN_MMA") == false) return Status(Code::unsupported, "turned off (LLMSVC_CL_ATTN_MMA=0)");
  // Inline PTX is NVIDIA's extension (another platform would fail the build, PoCL slowly).
  if (ctx.info().platform_name.find("NVIDIA") == std::string::npos)
    return Status(Code::unsupported, "not an NVIDIA platform");
  auto built = build_kernels(ctx, {"act_quant", "ops", "attention", "ptx", "attention_mma"},
                             exact_float_options(ctx.info()) + " -DLLMSVC_PTX_HALF");
  if (!built.ok()) return built.status();
  mma_program = std::move(built).value();
  for (auto [k, name] : {std::pair{&attn_mma64, "attn_mma_64"}, std::pair{&attn_mma128, "attn_mma_128"}}) {
    auto made = make_kernel(mma_program.get(), name);
    if (!made.ok()) return made.status();
    auto wg = max_work_group(made->get(), ctx.info().device);
    if (!wg.ok()) return wg.status();
    if (*wg < kMmaAttnItems)
      return Status(Code::unsupported, std::string(name) + " runs " + std::to_string(*wg) + " items a group");
    *k = std::move(made).value();
  }
  return Status::Ok();
}

ClOps::ClOps(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClOps::~ClOps() = default;

Result<std::unique_ptr<ClOps>> ClOps::create(ClDeviceContext& ctx) {
  auto impl = std::make_unique<Impl>(ctx);
  auto program = build_kernels(ctx, {"act_quant", "ops", "attention"}, exact_float_options(ctx.info()));
  if (!program.ok()) return program.status();
  impl->program = std::move(program).value();
  const struct {
    ClKernel* k;
    const char* name;
  } kernels[] = {{&impl->rms_norm, "rms_norm"},
                 {&impl->rope, "rope"},
                 {&impl->rope_qk, "rope_qk"},
                 {&impl->add_rms_norm, "add_rms_norm"},
                 {&impl->rms_norm_q, "rms_norm_q"},
                 {&impl->add_rms_norm_q, "add_rms_norm_q"},
                 {&impl->swiglu, "swiglu"},
                 {&impl->geglu, "geglu"},
                 {&impl->swiglu_q, "swiglu_q"},
                 {&impl->geglu_q, "geglu_q"},
                 {&impl->add, "add"},
                 {&impl->add_bias, "add_bias"},
                 {&impl->scale, "scale"},
                 {&impl->store_kv, "store_kv"},
                 {&impl->attn_scores, "attn_scores"},
                 {&impl->attn_pv, "attn_pv"},
                 {&impl->attn_reduce, "attn_reduce"},
                 {&impl->attn_mass_parts, "attn_mass_parts"},
                 {&impl->attn_parts_mass, "attn_parts_mass"},
                 {&impl->attn_decode, "attn_decode"},
                 {&impl->attn_units_mass, "attn_units_mass"},
                 {&impl->attn_dec_scores, "attn_dec_scores"},
                 {&impl->attn_dec_pv, "attn_dec_pv"},
                 {&impl->act_q8p, "act_q8p"}};
  for (const auto& k : kernels) {
    auto r = make_kernel(impl->program.get(), k.name);
    if (!r.ok()) return r.status();
    *k.k = std::move(r).value();
  }
  const std::vector<uint16_t> table = gelu_table();
  const size_t bytes = table.size() * sizeof(uint16_t);
  LLMSVC_RETURN_IF_ERROR(impl->reserve(impl->gelu, bytes));
  const cl_int err = clEnqueueWriteBuffer(impl->queue(), ClPool::mem(impl->gelu), CL_TRUE, 0, bytes, table.data(), 0,
                                          nullptr, nullptr);
  if (err != CL_SUCCESS) return cl_status(err, "uploading the GELU table");
  if (const Status mma = impl->build_mma(); !mma.ok()) {
    impl->attn_mma64.reset();
    impl->attn_mma128.reset();
    impl->mma_note = "tensor-core attention: " + mma.message();
  }
  return std::unique_ptr<ClOps>(new ClOps(std::move(impl)));
}

namespace {

// A quantized second output's block: 0 (none), or 32 / 256 dividing n (at most max_n) with q given.
Status check_qblock(ClView q, int qblock, size_t n, size_t max_n = SIZE_MAX) {
  if (qblock == 0) return Status::Ok();
  if ((qblock != 32 && qblock != 256) || !q.mem || n % static_cast<size_t>(qblock) != 0 || n > max_n)
    return Status(Code::invalid_argument, "opencl: a quantized output needs blocks of 32 or 256 that divide the row");
  return Status::Ok();
}

// The params argument of a quantizing kernel: q8params, or q where the output is floats (a
// valid buffer the kernel does not touch).
ClView q8_params_or(ClView q, ClView q8params) { return q8params.mem ? q8params : q; }

}  // namespace

Status ClOps::rms_norm(ClView x, ClView weight, int n_rows, int dim, float eps, ClView out, ClView q, int qblock,
                       ClView q8params) {
  if (n_rows <= 0 || dim <= 0) return Status::Ok();
  LLMSVC_RETURN_IF_ERROR(check_qblock(q, qblock, static_cast<size_t>(dim), kMaxQuantRow));
  const ClRange r{1, {static_cast<size_t>(n_rows) * kWg, 1, 1}, {kWg, 1, 1}};
  const int32_t has_w = weight.mem != nullptr;
  if (qblock == 0) return launch(impl_->queue(), impl_->rms_norm.get(), r, x, weight, has_w, dim, eps, out);
  return launch(impl_->queue(), impl_->rms_norm_q.get(), r, x, weight, has_w, dim, eps, out, q, int32_t{qblock},
                q8_params_or(q, q8params), int32_t{q8params.mem != nullptr});
}

Status ClOps::add_rms_norm(ClView y, ClView a, ClView weight, int n_rows, int dim, float eps, ClView out, ClView q,
                           int qblock, ClView q8params) {
  if (n_rows <= 0 || dim <= 0) return Status::Ok();
  LLMSVC_RETURN_IF_ERROR(check_qblock(q, qblock, static_cast<size_t>(dim), kMaxQuantRow));
  const ClRange r{1, {static_cast<size_t>(n_rows) * kWg, 1, 1}, {kWg, 1, 1}};
  const int32_t has_w = weight.mem != nullptr;
  if (qblock == 0) return launch(impl_->queue(), impl_->add_rms_norm.get(), r, y, a, weight, has_w, dim, eps, out);
  return launch(impl_->queue(), impl_->add_rms_norm_q.get(), r, y, a, weight, has_w, dim, eps, out, q, int32_t{qblock},
                q8_params_or(q, q8params), int32_t{q8params.mem != nullptr});
}

Status ClOps::rope(ClView x, int n_tokens, int n_heads, int head_dim, int rot_dims, ClView angles, RopeStyle style) {
  if (rot_dims % 2 != 0 || rot_dims > head_dim) {
    return Status(Code::invalid_argument, "rope: rot_dims must be even and at most head_dim");
  }
  if (n_tokens <= 0 || n_heads <= 0 || rot_dims == 0) return Status::Ok();
  const ClRange r{3, {static_cast<size_t>(rot_dims / 2), static_cast<size_t>(n_heads), static_cast<size_t>(n_tokens)}};
  return launch(impl_->queue(), impl_->rope.get(), r, x, angles, n_tokens, n_heads, head_dim, rot_dims / 2,
                int32_t{style == RopeStyle::neox});
}

Status ClOps::rope_qk(ClView q, int n_heads_q, ClView k, int n_heads_k, int n_tokens, int head_dim, int rot_dims,
                      ClView angles, RopeStyle style) {
  return launch_rope_qk(q, n_heads_q, k, n_heads_k, n_tokens, head_dim, rot_dims, angles, style, {}, {}, nullptr, 0,
                        std::nullopt);
}

Status ClOps::rope_qk_store_kv(ClView q, int n_heads_q, ClView k, ClView v, int n_tokens, int rot_dims, ClView angles,
                               RopeStyle style, ClView positions, const ClKv& kv, int layer,
                               std::optional<float> q_scale) {
  if (layer < 0 || layer >= kv.n_layer || kv.chunk_tokens <= 0) {
    return Status(Code::invalid_argument, "store_kv: layer or chunk size out of range");
  }
  return launch_rope_qk(q, n_heads_q, k, kv.n_head_kv, n_tokens, kv.head_dim, rot_dims, angles, style, v, positions,
                        &kv, layer, q_scale);
}

Status ClOps::launch_rope_qk(ClView q, int n_heads_q, ClView k, int n_heads_k, int n_tokens, int head_dim,
                             int rot_dims, ClView angles, RopeStyle style, ClView v, ClView positions, const ClKv* kv,
                             int layer, std::optional<float> q_scale) {
  if (q_scale && !kv) return Status(Code::invalid_argument, "rope: q's scale goes only with the store");
  if (rot_dims % 2 != 0 || rot_dims > head_dim) {
    return Status(Code::invalid_argument, "rope: rot_dims must be even and at most head_dim");
  }
  if (n_tokens <= 0 || n_heads_q < 0 || n_heads_k <= 0 || (rot_dims == 0 && !kv)) return Status::Ok();
  // Without a store only the pairs have work; with one every element of a K / V row has.
  const size_t dim0 = static_cast<size_t>(kv ? head_dim : rot_dims / 2);
  const ClRange r{3, {dim0, static_cast<size_t>(n_heads_q + n_heads_k), static_cast<size_t>(n_tokens)}};
  const ClKv none{};
  const ClKv& c = kv ? *kv : none;
  // Without a store its buffer arguments are never read; any valid buffer stands in for them.
  const ClView stand_in{k.mem, 0};
  return launch(impl_->queue(), impl_->rope_qk.get(), r, q, k, angles, n_tokens, n_heads_q, n_heads_k, head_dim,
                rot_dims / 2, int32_t{style == RopeStyle::neox}, int32_t{kv != nullptr}, kv ? v : stand_in,
                kv ? positions : stand_in, kv ? c.arena : k.mem, kv ? c.table : stand_in, c.chunk_tokens, layer,
                int32_t{q_scale.has_value()}, q_scale.value_or(1.0f));
}

Status ClOps::swiglu(ClView gate, ClView up, size_t n, ClView q, int qblock, ClView q8params) {
  if (n == 0) return Status::Ok();
  LLMSVC_RETURN_IF_ERROR(check_qblock(q, qblock, n));
  if (qblock == 0) return launch(impl_->queue(), impl_->swiglu.get(), range1(n, kWg), gate, up, uint64_t{n});
  return launch(impl_->queue(), impl_->swiglu_q.get(), range1(n, kWg), gate, up, uint64_t{n}, q, int32_t{qblock},
                q8_params_or(q, q8params), int32_t{q8params.mem != nullptr});
}

Status ClOps::geglu(ClView gate, ClView up, size_t n, ClView q, int qblock, ClView q8params) {
  if (n == 0) return Status::Ok();
  LLMSVC_RETURN_IF_ERROR(check_qblock(q, qblock, n));
  const cl_mem table = ClPool::mem(impl_->gelu);
  if (qblock == 0) return launch(impl_->queue(), impl_->geglu.get(), range1(n, kWg), gate, up, uint64_t{n}, table);
  return launch(impl_->queue(), impl_->geglu_q.get(), range1(n, kWg), gate, up, uint64_t{n}, q, int32_t{qblock},
                q8_params_or(q, q8params), int32_t{q8params.mem != nullptr}, table);
}

Status ClOps::add(ClView y, ClView x, size_t n) {
  if (n == 0) return Status::Ok();
  return launch(impl_->queue(), impl_->add.get(), range1(n, kWg), y, x, uint64_t{n});
}

Status ClOps::add_bias(ClView y, ClView bias, int n_rows, int dim) {
  if (n_rows <= 0 || dim <= 0) return Status::Ok();
  const size_t n = static_cast<size_t>(n_rows) * dim;
  return launch(impl_->queue(), impl_->add_bias.get(), range1(n, kWg), y, bias, dim, uint64_t{n});
}

Status ClOps::scale(ClView x, size_t n, float s) {
  if (n == 0) return Status::Ok();
  return launch(impl_->queue(), impl_->scale.get(), range1(n, kWg), x, uint64_t{n}, s);
}

Status ClOps::store_kv(ClView k, ClView v, int n_tokens, ClView positions, const ClKv& kv, int layer) {
  if (layer < 0 || layer >= kv.n_layer || kv.chunk_tokens <= 0) {
    return Status(Code::invalid_argument, "store_kv: layer or chunk size out of range");
  }
  if (n_tokens <= 0) return Status::Ok();
  const int kv_dim = kv.n_head_kv * kv.head_dim;
  const ClRange r{2, {round_up(static_cast<size_t>(kv_dim), 64), static_cast<size_t>(n_tokens), 1}, {64, 1, 1}};
  return launch(impl_->queue(), impl_->store_kv.get(), r, k, v, positions, kv.arena, kv.table, kv.chunk_tokens, kv_dim,
                layer);
}

Status ClOps::attention(ClView q, int n_tokens, ClView positions, const ClKv& kv, int layer, int n_valid,
                        const AttentionParams& p, ClView out, ClView mass, bool defer_mass, const ClQ8Out& q8,
                        bool* fused_q8) {
  bool fused = false;
  const size_t n = static_cast<size_t>(std::max(n_tokens, 0)) * std::max(p.n_head, 0) * std::max(p.head_dim, 0);
  if (q8.block != 0 && ((q8.block != 32 && q8.block != 256) || !q8.codes.mem || !q8.params.mem ||
                        static_cast<size_t>(p.n_head) * std::max(p.head_dim, 0) % q8.block != 0))
    return Status(Code::invalid_argument, "attention: a quantized output needs blocks of 32 or 256 that divide a row");
  LLMSVC_RETURN_IF_ERROR(attend(q, n_tokens, positions, kv, layer, n_valid, p, out, mass, defer_mass, q8, &fused));
  if (fused_q8) *fused_q8 = fused;
  if (q8.block == 0 || fused || n == 0) return Status::Ok();
  return launch(impl_->queue(), impl_->act_q8p.get(), range1(n, kWg), out, q8.codes, q8.params, uint64_t{n},
                int32_t{q8.block});
}

Status ClOps::attend(ClView q, int n_tokens, ClView positions, const ClKv& kv, int layer, int n_valid,
                     const AttentionParams& p, ClView out, ClView mass, bool defer_mass, const ClQ8Out& q8,
                     bool* fused_q8) {
  if (p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0 || p.head_dim <= 0 || p.head_dim > kMaxHeadDim ||
      p.head_dim % 4 != 0) {
    return Status(Code::unsupported, "attention: heads must group evenly and head_dim be a multiple of 4 up to " +
                                         std::to_string(kMaxHeadDim));
  }
  if (kv.n_head_kv != p.n_head_kv || kv.head_dim != p.head_dim || layer < 0 || layer >= kv.n_layer ||
      kv.chunk_tokens <= 0 || n_valid < 0 || n_valid > static_cast<int64_t>(kv.n_chunks) * kv.chunk_tokens) {
    return Status(Code::invalid_argument, "attention: the KV cache does not match the call");
  }
  if (n_tokens <= 0) return Status::Ok();
  Impl& m = *impl_;
  const size_t D = static_cast<size_t>(p.head_dim);
  const size_t row_bytes = static_cast<size_t>(p.n_head) * D * sizeof(float);  // one token of q / out
  if (n_valid == 0) {  // no key: zeros, as the CPU gives a query that sees none
    const float zero = 0.0f;
    const cl_int err = clEnqueueFillBuffer(m.queue(), out.mem, &zero, sizeof zero, out.offset, row_bytes * n_tokens, 0,
                                           nullptr, nullptr);
    return err == CL_SUCCESS ? Status::Ok() : cl_status(err, "attention: clearing the output");
  }

  const int G = p.n_head / p.n_head_kv;
  // The kernels' head stride within a kv head's group (attention.cl's q_head): 1, or n_head_kv
  // for rank-major heads.
  const int32_t hs = p.rank_major && p.n_head_kv > 1 && G > 1 ? p.n_head_kv : 1;
  // Every chunk f16 and chunks a power of two long: the kernels' faster path (attention.cl,
  // c_shift); LLMSVC_CL_KV_FAST=0 turns it off for an A/B.
  const int C = kv.chunk_tokens;
  const int32_t c_shift = kv.all_f16 && m.kv_fast && (C & (C - 1)) == 0 ? std::countr_zero(static_cast<unsigned>(C)) : -1;
  // Decode over a short context: one launch (attention.cl, attn_decode), and with key mass a
  // second that adds its integer shares to mass (their sum fits a uint for up to 256 heads).
  if (n_tokens == 1 && n_valid <= m.decode_keys && static_cast<size_t>(G) <= kDecodeGroup &&
      static_cast<size_t>(G) * D <= kDecodeQuery && static_cast<size_t>(G) * n_valid <= kDecodeScores &&
      p.n_head <= 256) {
    // Fewer kv heads than compute units: a work-group per query head instead (each re-reads its
    // kv head's keys); Gemma-3-270M's one kv head took 70 us an H100 layer in one work-group.
    // Then P.V's channels split while that leaves a wave of work-groups (every one computes
    // its heads' scores: a kv head's keys read once per split): H100, 7B at context 128, 205
    // -> 219 tok/s.
    const int cu = std::max(1, m.ctx.info().compute_units);
    const int split = p.n_head_kv < cu ? G : 1;
    int csplit = 1;
    const auto splits_channels = [&](int c) { return (D / 4) % c == 0 && D / c >= 16; };
    if (m.decode_csplit > 0) {
      csplit = splits_channels(m.decode_csplit) ? m.decode_csplit : 1;
    } else {
      while (2 * p.n_head_kv * split * csplit <= cu && splits_channels(2 * csplit)) csplit *= 2;
    }
    // A quantized output from the kernel: each work-group's outputs must be whole blocks (its
    // G / split heads side by side without a channel split, else D / csplit channels a head).
    // Halving the split once for it trades little (SmolLM2, 7B: a split still computes every
    // score); more does not: Gemma-3's blocks of 256 over a head of 256 would take the split
    // from 16 to 1 and double the launch's time (H200: 94 against 46 us), so there the output
    // stays float and act_q8p quantizes it after.
    const size_t qb = static_cast<size_t>(q8.block);
    // Rank-major heads are not side by side: each head's D channels must be whole blocks.
    const auto whole_blocks = [&](int c) {
      return c == 1 ? (static_cast<size_t>(hs == 1 ? G / split : 1) * D) % qb == 0 : (D / c) % qb == 0;
    };
    bool fuse = qb != 0 && whole_blocks(csplit);
    if (qb != 0 && !fuse && csplit > 1 && whole_blocks(csplit / 2)) {
      csplit /= 2;
      fuse = true;
    }
    const size_t groups = static_cast<size_t>(p.n_head_kv) * split * csplit;
    const ClRange r{1, {groups * kDecodeItems, 1, 1}, {kDecodeItems, 1, 1}};
    ClView units{out.mem, 0};  // not written without mass
    if (mass.mem) {
      auto row = m.units_row(mass, n_valid);
      if (!row.ok()) return row.status();
      units = *row;
    }
    LLMSVC_RETURN_IF_ERROR(launch(m.queue(), m.attn_decode.get(), r, q, positions, kv.arena, kv.table, p.n_head,
                                  p.n_head_kv, hs, p.head_dim, kv.chunk_tokens, c_shift, layer, n_valid, p.sliding_window,
                                  p.scale, out, int32_t{split}, int32_t{csplit}, units, int32_t{mass.mem != nullptr},
                                  fuse ? q8.codes : out, fuse ? q8.params : out, int32_t{fuse ? q8.block : 0}));
    *fused_q8 = fuse;
    return defer_mass ? Status::Ok() : m.flush_units();
  }

  // Prefill on tensor cores (attention_mma.cl): the scores stay in registers; with key mass,
  // each work-group writes its share per key and attn_parts_mass adds them. Only over f16 chunks:
  // compressed ones dequantized to f16 moved outputs ~1.2e-3 from the CPU's (H100), past the
  // split path's 1e-3. A tile of 64 rows a kv head leaves few work-groups for a handful of
  // tokens: those take the split path too.
  const cl_kernel mma = p.head_dim == 64 ? m.attn_mma64.get() : p.head_dim == 128 ? m.attn_mma128.get() : nullptr;
  if (mma && kv.all_f16 && static_cast<size_t>(n_tokens) * G >= kMmaAttnRows) {
    const size_t tiles = ceil_div(static_cast<size_t>(n_tokens) * G, kMmaAttnRows);
    const size_t parts = tiles * static_cast<size_t>(p.n_head_kv);
    ClView part{out.mem, 0};  // not read without mass
    if (mass.mem) {
      const size_t bytes = parts * static_cast<size_t>(n_valid) * sizeof(uint32_t);
      LLMSVC_RETURN_IF_ERROR(m.reserve(m.mass_parts, bytes));
      part = ClView{ClPool::mem(m.mass_parts), 0};
      const uint32_t zero = 0;
      const cl_int err = clEnqueueFillBuffer(m.queue(), part.mem, &zero, sizeof zero, 0, bytes, 0, nullptr, nullptr);
      if (err != CL_SUCCESS) return cl_status(err, "attention: clearing the key mass shares");
    }
    const ClRange r{2, {tiles * kMmaAttnItems, static_cast<size_t>(p.n_head_kv), 1}, {kMmaAttnItems, 1, 1}};
    LLMSVC_RETURN_IF_ERROR(launch(m.queue(), mma, r, q, positions, kv.arena, kv.table, n_tokens, p.n_head,
                                  p.n_head_kv, hs, kv.chunk_tokens, c_shift, layer, n_valid, p.sliding_window, p.scale, out,
                                  part, int32_t{mass.mem != nullptr}));
    if (!mass.mem) return Status::Ok();
    LLMSVC_RETURN_IF_ERROR(m.flush_units());  // what waits is added first (the CPU's order)
    return launch(m.queue(), m.attn_parts_mass.get(), range1(n_valid, kKeyBlock), part.mem, static_cast<int32_t>(parts),
                  n_valid, mass);
  }
  const int n_blocks = static_cast<int>(ceil_div(static_cast<size_t>(n_valid), kKeyBlock));
  const int s_stride = n_blocks * kKeyBlock;
  const size_t token_floats = static_cast<size_t>(p.n_head) * s_stride;
  const int pass_tokens = static_cast<int>(std::clamp<size_t>(kMaxScoreFloats / token_floats, 1, n_tokens));
  LLMSVC_RETURN_IF_ERROR(m.reserve(m.scores, pass_tokens * token_floats * sizeof(float)));
  LLMSVC_RETURN_IF_ERROR(
      m.reserve(m.block_stats, static_cast<size_t>(pass_tokens) * p.n_head * n_blocks * 2 * sizeof(float)));
  LLMSVC_RETURN_IF_ERROR(m.reserve(m.row_stats, static_cast<size_t>(pass_tokens) * p.n_head * 2 * sizeof(float)));
  const cl_mem scores = ClPool::mem(m.scores), block_stats = ClPool::mem(m.block_stats);
  const cl_mem row_stats = ClPool::mem(m.row_stats);

  for (int t0 = 0; t0 < n_tokens; t0 += pass_tokens) {
    const int nt = std::min(pass_tokens, n_tokens - t0);
    const ClView qv = q.at(t0 * row_bytes), pv = positions.at(t0 * sizeof(int32_t)), ov = out.at(t0 * row_bytes);
    const size_t tiles = ceil_div(static_cast<size_t>(nt) * G, kRowTile);
    // Decode has few tiles: split the keys so that every compute unit holds enough work-groups
    // (16 of 64 items, or dec_pv_per_cu of 256) to keep its loads of V in flight.
    const bool dec_pv = nt == 1 && m.dec_pv && kDecodeItems % (D / 4) == 0 && static_cast<size_t>(G) <= kDecodeGroup &&
                        p.n_head <= 256;
    const size_t groups = tiles * p.n_head_kv;
    const size_t cu = static_cast<size_t>(std::max(1, m.ctx.info().compute_units));
    const size_t target = dec_pv ? m.dec_pv_per_cu * cu : 16 * cu;
    const size_t want = std::clamp<size_t>(ceil_div(target, groups), 1, n_blocks);
    const size_t split_blocks = ceil_div(n_blocks, want);
    const int n_splits = static_cast<int>(ceil_div(n_blocks, split_blocks));
    cl_mem partial = nullptr;
    if (n_splits > 1) {
      LLMSVC_RETURN_IF_ERROR(m.reserve(m.partial, static_cast<size_t>(nt) * p.n_head * n_splits * D * sizeof(float)));
      partial = ClPool::mem(m.partial);
    }
    const size_t nkv = static_cast<size_t>(p.n_head_kv);
    // One token's scores: teams of items per key row (attn_dec_scores), where a team of
    // head_dim / 8 items divides a work-group and the partial dots fit its local memory.
    const size_t team = D / 8;
    if (nt == 1 && m.dec_scores && D % 8 == 0 && kDecodeItems % team == 0 && team <= 32 &&
        static_cast<size_t>(kKeyBlock) * team * G <= kDecodeScores && static_cast<size_t>(G) <= kDecodeGroup) {
      const ClRange rs{2, {static_cast<size_t>(n_blocks) * kDecodeItems, nkv, 1}, {kDecodeItems, 1, 1}};
      const detail::Local part{static_cast<size_t>(kKeyBlock) * team * G * sizeof(float)};
      LLMSVC_RETURN_IF_ERROR(launch(m.queue(), m.attn_dec_scores.get(), rs, qv, pv, kv.arena, kv.table, p.n_head,
                                    p.n_head_kv, hs, p.head_dim, kv.chunk_tokens, c_shift, layer, n_valid,
                                    p.sliding_window, p.scale, scores, uint64_t{0}, s_stride, block_stats, uint64_t{0},
                                    part));
    } else {
      const ClRange rs{3, {static_cast<size_t>(s_stride), nkv, tiles}, {kKeyBlock, 1, 1}};
      LLMSVC_RETURN_IF_ERROR(launch(m.queue(), m.attn_scores.get(), rs, qv, pv, kv.arena, kv.table, nt, p.n_head,
                                    p.n_head_kv, hs, p.head_dim, kv.chunk_tokens, c_shift, layer, n_valid,
                                    p.sliding_window, p.scale, scores, uint64_t{0}, s_stride, block_stats, uint64_t{0}));
    }
    const int32_t split_keys = static_cast<int32_t>(split_blocks * kKeyBlock);
    if (dec_pv) {  // key mass in the same pass, as integer shares (attn_decode's)
      ClView units{ov.mem, 0};  // not written without mass
      if (mass.mem) {
        auto row = m.units_row(mass, n_valid);
        if (!row.ok()) return row.status();
        units = *row;
      }
      const ClRange rp{2, {static_cast<size_t>(n_splits) * kDecodeItems, nkv, 1}, {kDecodeItems, 1, 1}};
      LLMSVC_RETURN_IF_ERROR(launch(m.queue(), m.attn_dec_pv.get(), rp, pv, kv.arena, kv.table, p.n_head,
                                    p.n_head_kv, hs, p.head_dim, kv.chunk_tokens, c_shift, layer, n_valid,
                                    p.sliding_window, scores, uint64_t{0}, s_stride, block_stats, uint64_t{0},
                                    split_keys, n_splits, row_stats, uint64_t{0}, ov, partial, uint64_t{0}, units,
                                    int32_t{mass.mem != nullptr}));
    } else {
      const ClRange rp{3, {static_cast<size_t>(n_splits) * kKeyBlock, nkv, tiles}, {kKeyBlock, 1, 1}};
      LLMSVC_RETURN_IF_ERROR(launch(m.queue(), m.attn_pv.get(), rp, pv, kv.arena, kv.table, nt, p.n_head,
                                    p.n_head_kv, hs, p.head_dim, kv.chunk_tokens, c_shift, layer, n_valid,
                                    p.sliding_window, scores, uint64_t{0}, s_stride, block_stats, uint64_t{0},
                                    split_keys, n_splits, row_stats, uint64_t{0}, ov, partial, uint64_t{0}));
    }
    if (n_splits > 1) {
      const ClRange rr{1, {static_cast<size_t>(nt) * p.n_head * kKeyBlock, 1, 1}, {kKeyBlock, 1, 1}};
      LLMSVC_RETURN_IF_ERROR(
          launch(m.queue(), m.attn_reduce.get(), rr, partial, uint64_t{0}, n_splits, p.head_dim, ov));
    }
    if (mass.mem && dec_pv) {
      if (!defer_mass) LLMSVC_RETURN_IF_ERROR(m.flush_units());
    } else if (mass.mem) {
      LLMSVC_RETURN_IF_ERROR(m.flush_units());  // what waits is added first (the CPU's order)
      const int rows = nt * p.n_head;
      const size_t parts = ceil_div(static_cast<size_t>(rows), kMassRows);
      LLMSVC_RETURN_IF_ERROR(m.reserve(m.mass_parts, parts * static_cast<size_t>(n_valid) * sizeof(uint32_t)));
      const ClRange rm{2, {round_up(static_cast<size_t>(n_valid), kKeyBlock), parts, 1}, {kKeyBlock, 1, 1}};
      LLMSVC_RETURN_IF_ERROR(launch(m.queue(), m.attn_mass_parts.get(), rm, scores, uint64_t{0}, s_stride, row_stats,
                                    uint64_t{0}, rows, n_valid, ClPool::mem(m.mass_parts)));
      LLMSVC_RETURN_IF_ERROR(launch(m.queue(), m.attn_parts_mass.get(), range1(n_valid, kKeyBlock),
                                    ClPool::mem(m.mass_parts), static_cast<int32_t>(parts), n_valid, mass));
    }
  }
  return Status::Ok();
}

Status ClOps::flush_mass() { return impl_->flush_units(); }

const std::string& ClOps::tensor_core_attention_note() const { return impl_->mma_note; }

}  // namespace llmsvc::hal::opencl
