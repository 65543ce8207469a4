// SPDX-License-Identifier: Apache-2.0
// CpuDevice: the HAL op set on the host CPU. Owns the worker team and the kernels' scratch;
// quantized matmul / embedding rows come from the kernels library (hal/cpu/quant), the
// other ops from the files beside this one. Not thread-safe: one op at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hal/cpu/attention.h"
#include "hal/cpu/quant/matmul.h"
#include "hal/cpu/rope_ops.h"
#include "hal/cpu/thread_pool.h"
#include "hal/device.h"
#include "hal/queue.h"

namespace llmsvc::hal::cpu {

class CpuDevice final : public Device {
 public:
  // n_threads: team size including the calling thread (clamped to >= 1). space: "host" is the
  // process's host memory, shared with the KV chunks; another name gives this device a pool of
  // its own (a second CPU device for placement). memory_bytes: its capacity (0: unbounded).
  explicit CpuDevice(int n_threads, std::string space = "host", uint64_t memory_bytes = 0);

  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string name() const override;
  const Capabilities& caps() const override { return caps_; }
  bool supports(WeightType type) const override;
  MemoryPool& memory() override { return *pool_mem_; }
  Queue& queue() override { return queue_; }

  Result<std::unique_ptr<PreparedWeight>> prepare_weight(const WeightRef& w) override;
  // A view of w's panels (slice_cpu_weight); w must be a CpuWeight (invalid_argument else).
  Result<std::unique_ptr<PreparedWeight>> slice_weight(const PreparedWeight& w, int64_t rows, int64_t cols) override;
  uint64_t release_rows(PreparedWeight& w, int64_t keep_rows) override;
  Result<uint64_t> restore_rows(PreparedWeight& w, int64_t rows, const void* from) override;
  uint64_t release_cols(PreparedWeight& w, int64_t keep_cols) override;
  Result<uint64_t> restore_cols(PreparedWeight& w, int64_t cols, const void* from) override;
  // w must come from this device's prepare_weight.
  void matmul(const PreparedWeight& w, const float* x, int n_tokens, float* y) override;
  void matmul_multi(const PreparedWeight* const* ws, float* const* ys, int n, const float* x, int n_tokens) override;
  bool fuses_lora() const override { return true; }
  void matmul_lora(const PreparedWeight* const* ws, float* const* ys, int n, const float* x, int n_tokens,
                   const LoraBranch* branches, int n_branches) override;
  void get_rows(const WeightRef& w, const int32_t* ids, int n, float* out) override;

  void rms_norm(const float* x, const float* weight, int n_rows, int dim, float eps, float* out) override;
  void rope(float* x, int n_tokens, int n_heads, int head_dim, int rot_dims, const int32_t* positions,
            float freq_base, float freq_scale, RopeStyle style) override;
  void swiglu(float* gate, const float* up, size_t n) override;
  void geglu(float* gate, const float* up, size_t n) override;
  void attention(const float* q, int n_tokens, const int32_t* q_pos, const KvChunkView* chunks, int n_chunks,
                 const AttentionParams& p, float* out) override;
  void store_f16(const float* src, uint16_t* dst, size_t n) override;
  void add(float* y, const float* x, size_t n) override;
  void add_bias(float* y, const float* bias, int n_rows, int dim) override;
  void scale(float* x, size_t n, float s) override;

  ThreadPool& pool() { return pool_; }

 private:
  ThreadPool pool_;
  std::unique_ptr<MemoryPool> own_mem_;  // when not the shared host pool
  MemoryPool* pool_mem_;
  HostQueue queue_;
  MatmulScratch matmul_scratch_;
  std::vector<CpuLoraBranch> lora_branches_;
  AttentionScratch attention_scratch_;
  RopeTable rope_table_;
  Capabilities caps_;
};

// The HAL factory for the CPU backend.
std::unique_ptr<Device> make_cpu_device(int n_threads, std::string space = "host", uint64_t memory_bytes = 0);

}  // namespace llmsvc::hal::cpu
