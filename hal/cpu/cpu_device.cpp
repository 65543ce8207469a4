// SPDX-License-Identifier: Apache-2.0
// CpuDevice: splits each op across the team when the op is big enough to pay for it.
#include "hal/cpu/cpu_device.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "hal/cpu/activation_ops.h"
#include "hal/cpu/norm_ops.h"
#include "hal/host/fp16.h"
#include "hal/host/host_pool.h"
#include "hal/cpu/rope_ops.h"
#include "hal/host/hwy_targets.h"  // report the kernels' target list
#include "hwy/targets.h"

namespace llmsvc::hal::cpu {
namespace {

// Waking the team costs a few microseconds; below these sizes (per thread) one thread wins.
constexpr int64_t kMinElementwise = 16 * 1024;  // add, scale, norms: floats per thread
constexpr int64_t kMinActivation = 4 * 1024;    // exp / tanh per element
constexpr int64_t kMinRopeTokens = 4;

// Runs fn(begin, end) over [0, n), split across the pool when each member would get at
// least min_per_thread; ranges start on multiples of align (whole cache lines for floats).
template <class F>
void for_range(ThreadPool& pool, int64_t n, int64_t min_per_thread, int64_t align, const F& fn) {
  const int nth = static_cast<int>(std::min<int64_t>(pool.size(), n / std::max<int64_t>(1, min_per_thread)));
  if (nth <= 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  pool.run([&](int ith, int) {
    if (ith >= nth) return;
    const auto [b, e] = ThreadPool::split(n, ith, nth, align);
    if (b < e) fn(b, e);
  });
}

}  // namespace

CpuDevice::CpuDevice(int n_threads, std::string space, uint64_t memory_bytes) : pool_(std::max(1, n_threads)) {
  if (space == "host" && memory_bytes == 0) {
    pool_mem_ = &host::shared_host_pool();
  } else {
    own_mem_ = std::make_unique<host::HostPool>(std::move(space), memory_bytes);
    pool_mem_ = own_mem_.get();
  }
  caps_.memory_bytes = memory_bytes;
  caps_.slices_weights = true;
}

std::string CpuDevice::name() const {
  const auto targets = hwy::SupportedAndGeneratedTargets();
  const char* isa = targets.empty() ? "scalar" : hwy::TargetName(targets.front());
  const std::string& space = pool_mem_->space();
  return std::string(space == "host" ? "cpu" : space) + " (" + isa + ", " + std::to_string(pool_.size()) + " threads)";
}

bool CpuDevice::supports(WeightType type) const { return is_supported_weight_type(static_cast<uint32_t>(type)); }

Result<std::unique_ptr<PreparedWeight>> CpuDevice::prepare_weight(const WeightRef& w) {
  auto prepared = prepare_cpu_weight(w);
  if (!prepared.ok()) return prepared.status();
  return std::unique_ptr<PreparedWeight>(std::move(prepared).value());
}

Result<std::unique_ptr<PreparedWeight>> CpuDevice::slice_weight(const PreparedWeight& w, int64_t rows, int64_t cols) {
  const auto* cw = dynamic_cast<const CpuWeight*>(&w);
  if (cw == nullptr) return Status(Code::invalid_argument, name() + " cannot slice a weight another device prepared");
  auto view = slice_cpu_weight(*cw, rows, cols);
  if (!view.ok()) return view.status();
  return std::unique_ptr<PreparedWeight>(std::move(view).value());
}

// Another device's weight holds nothing of this device's to give back or restore.
uint64_t CpuDevice::release_rows(PreparedWeight& w, int64_t keep_rows) {
  auto* cw = dynamic_cast<CpuWeight*>(&w);
  return cw == nullptr ? 0 : cw->release_rows(keep_rows);
}

uint64_t CpuDevice::release_cols(PreparedWeight& w, int64_t keep_cols) {
  auto* cw = dynamic_cast<CpuWeight*>(&w);
  return cw == nullptr ? 0 : cw->release_cols(keep_cols);
}

Result<uint64_t> CpuDevice::restore_rows(PreparedWeight& w, int64_t rows, const void* from) {
  auto* cw = dynamic_cast<CpuWeight*>(&w);
  return cw == nullptr ? Result<uint64_t>(uint64_t{0}) : cw->restore_rows(rows, &pool_, from);
}

Result<uint64_t> CpuDevice::restore_cols(PreparedWeight& w, int64_t cols, const void* from) {
  auto* cw = dynamic_cast<CpuWeight*>(&w);
  return cw == nullptr ? Result<uint64_t>(uint64_t{0}) : cw->restore_cols(cols, &pool_, from);
}

void CpuDevice::matmul(const PreparedWeight& w, const float* x, int n_tokens, float* y) {
  cpu::matmul(static_cast<const CpuWeight&>(w), x, n_tokens, y, pool_, matmul_scratch_);
}

void CpuDevice::matmul_multi(const PreparedWeight* const* ws, float* const* ys, int n, const float* x,
                             int n_tokens) {
  constexpr int kMax = 8;  // Q/K/V and gate/up need 3 and 2
  for (int i0 = 0; i0 < n; i0 += kMax) {
    const CpuWeight* cw[kMax];
    const int m = std::min(kMax, n - i0);
    for (int i = 0; i < m; ++i) cw[i] = static_cast<const CpuWeight*>(ws[i0 + i]);
    cpu::matmul_multi(cw, ys + i0, m, x, n_tokens, pool_, matmul_scratch_);
  }
}

void CpuDevice::matmul_lora(const PreparedWeight* const* ws, float* const* ys, int n, const float* x, int n_tokens,
                            const LoraBranch* branches, int n_branches) {
  constexpr int kMax = 8;
  if (n > kMax) return matmul_multi(ws, ys, n, x, n_tokens);  // not a shape the graph makes
  const CpuWeight* cw[kMax];
  for (int i = 0; i < n; ++i) cw[i] = static_cast<const CpuWeight*>(ws[i]);
  lora_branches_.clear();  // reused: no allocation once grown
  for (int i = 0; i < n_branches; ++i)
    lora_branches_.push_back({branches[i].out, static_cast<const CpuWeight*>(branches[i].a),
                              static_cast<const CpuWeight*>(branches[i].b), branches[i].scale});
  cpu::matmul_multi(cw, ys, n, x, n_tokens, pool_, matmul_scratch_, lora_branches_);
}

void CpuDevice::get_rows(const WeightRef& w, const int32_t* ids, int n, float* out) {
  cpu::get_rows(w, ids, n, out);
}

void CpuDevice::rms_norm(const float* x, const float* weight, int n_rows, int dim, float eps, float* out) {
  const int64_t rows_per_thread = std::max<int64_t>(1, kMinElementwise / std::max(1, dim));
  for_range(pool_, n_rows, rows_per_thread, 1, [&](int64_t b, int64_t e) {
    const size_t off = static_cast<size_t>(b) * dim;
    rms_norm_rows(x + off, weight, e - b, dim, eps, out + off);
  });
}

void CpuDevice::rope(float* x, int n_tokens, int n_heads, int head_dim, int rot_dims, const int32_t* positions,
                     float freq_base, float freq_scale, RopeStyle style) {
  rope_table_.prepare(n_tokens, rot_dims, positions, freq_base, freq_scale);
  for_range(pool_, n_tokens, kMinRopeTokens, 1, [&](int64_t b, int64_t e) {
    rope_tokens(x, static_cast<int>(b), static_cast<int>(e), n_heads, head_dim, rot_dims, rope_table_, style);
  });
}

void CpuDevice::swiglu(float* gate, const float* up, size_t n) {
  for_range(pool_, static_cast<int64_t>(n), kMinActivation, 16,
            [&](int64_t b, int64_t e) { swiglu_range(gate + b, up + b, static_cast<size_t>(e - b)); });
}

void CpuDevice::geglu(float* gate, const float* up, size_t n) {
  for_range(pool_, static_cast<int64_t>(n), kMinActivation, 16,
            [&](int64_t b, int64_t e) { geglu_range(gate + b, up + b, static_cast<size_t>(e - b)); });
}

void CpuDevice::attention(const float* q, int n_tokens, const int32_t* q_pos, const KvChunkView* chunks,
                          int n_chunks, const AttentionParams& p, float* out) {
  cpu::attention(q, n_tokens, q_pos, chunks, n_chunks, p, out, pool_, attention_scratch_);
}

void CpuDevice::store_f16(const float* src, uint16_t* dst, size_t n) {
  // A few K/V rows per call: one thread, no wake-up.
  fp32_to_fp16_row(src, dst, static_cast<int64_t>(n));
}

void CpuDevice::add(float* y, const float* x, size_t n) {
  for_range(pool_, static_cast<int64_t>(n), kMinElementwise, 16,
            [&](int64_t b, int64_t e) { add_range(y + b, x + b, static_cast<size_t>(e - b)); });
}

void CpuDevice::add_bias(float* y, const float* bias, int n_rows, int dim) {
  const int64_t rows_per_thread = std::max<int64_t>(1, kMinElementwise / std::max(1, dim));
  for_range(pool_, n_rows, rows_per_thread, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) add_range(y + static_cast<size_t>(r) * dim, bias, static_cast<size_t>(dim));
  });
}

void CpuDevice::scale(float* x, size_t n, float s) {
  for_range(pool_, static_cast<int64_t>(n), kMinElementwise, 16,
            [&](int64_t b, int64_t e) { scale_range(x + b, static_cast<size_t>(e - b), s); });
}

std::unique_ptr<Device> make_cpu_device(int n_threads, std::string space, uint64_t memory_bytes) {
  return std::make_unique<CpuDevice>(n_threads, std::move(space), memory_bytes);
}

}  // namespace llmsvc::hal::cpu
