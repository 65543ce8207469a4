// SPDX-License-Identifier: Apache-2.0
// ClDevice: an OpenCL device (a GPU through its driver, or PoCL on the CPU) as a HAL device,
// driven on buffer views: weights repacked into its memory (ClMatmul), activations in pools of
// its memory, every context's KV chunks in one arena of it (ClArenaPool) that store_kv writes
// in place and attention reads (ClOps). Nothing of a step crosses to the host but the token ids
// and positions going in and the logits and attention mass coming out.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hal/device.h"
#include "hal/host/rope_table.h"
#include "hal/opencl/cl_arena_pool.h"
#include "hal/opencl/cl_device_context.h"
#include "hal/opencl/cl_matmul.h"
#include "hal/opencl/cl_ops.h"

namespace llmsvc::hal::opencl {

struct ClDeviceOptions {
  std::string cache_dir;      // compiled programs ("": built at every start; LLMSVC_CL_CACHE_DIR overrides)
  uint64_t memory_bytes = 0;  // weights and activations (0: 90 % of the device's memory)
  uint64_t kv_bytes = 0;      // the KV arena (0: 1 GiB, at most a quarter of the device's memory)
};

class ClDevice final : public Device {
 public:
  // The device `spec` names (cl_platform.h: "", an index or a text of its name).
  static Result<std::unique_ptr<ClDevice>> open(std::string_view spec, const ClDeviceOptions& options);
  ~ClDevice() override;

  DeviceKind kind() const override { return info().is_gpu ? DeviceKind::gpu : DeviceKind::cpu; }
  std::string name() const override;
  const Capabilities& caps() const override { return caps_; }
  bool supports(WeightType type) const override { return matmul_->supports(type); }
  MemoryPool& memory() override { return ctx_->pool(); }
  MemoryPool& kv_memory() override { return *kv_; }
  Queue& queue() override { return ctx_->queue(); }
  const ClDeviceInfo& info() const { return ctx_->info(); }
  const ProgramBuilder& programs() const { return ctx_->programs(); }

  // A weight, uploaded once per tensor (the embedding table and a tied LM head share it). A
  // 1 x n F32 one serves both as a vector (a norm's scale, a bias: its plain floats) and as a
  // matrix (a rank-1 adapter's factor).
  Result<std::unique_ptr<PreparedWeight>> prepare_weight(const WeightRef& w) override;
  // Views of a weight's first rows and columns, and its row and column tails given back and restored
  // (ClMatmul::slice, release_rows / _cols, restore_rows / _cols): an elastic model's levels.
  Result<std::unique_ptr<PreparedWeight>> slice_weight(const PreparedWeight& w, int64_t rows, int64_t cols) override;
  uint64_t release_rows(PreparedWeight& w, int64_t keep_rows) override;
  Result<uint64_t> restore_rows(PreparedWeight& w, int64_t rows, const void* from) override;
  uint64_t release_cols(PreparedWeight& w, int64_t keep_cols) override;
  Result<uint64_t> restore_cols(PreparedWeight& w, int64_t cols, const void* from) override;

  // A matmul's LoRA branches run with it (OpCall::lora): the A products of its branches in one
  // launch, each B product scaled and added by the GEMV that makes it (ClMatmul::matmul_add).
  bool fuses_lora() const override { return true; }

  Status begin(const BatchBinding& batch) override;
  Status run(const OpCall& op) override;
  Status end() override;

  // The host-pointer ops, for callers outside the graph: each copies its operands in, runs the
  // kernel and copies the results back (correct, not fast; the graph never uses them).
  void matmul(const PreparedWeight& w, const float* x, int n_tokens, float* y) override;
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
  // The first failure of a host-pointer op since the last call (then cleared): they return void.
  Status host_op_status();
  // Attention launches that wrote the o-projection's int8 input themselves (a decode step's
  // act_q8p launch saved), since open(): what a test reads to know the fused path ran.
  int64_t attention_q8_fused() const { return attn_q8_fused_; }

 private:
  ClDevice() = default;
  cl_command_queue q() const { return ctx_->queue().handle(); }
  // A device buffer of at least `bytes` in `slot` (grown, never shrunk).
  Result<ClView> scratch(Buffer& slot, size_t bytes);
  Status write(ClView dst, const void* src, size_t bytes, bool blocking);
  // Not blocking: dst is written once the queue has run (the caller waits, e.g. clFinish).
  Status read(ClView src, void* dst, size_t bytes, bool blocking = true);
  const ClWeight& weight(const PreparedWeight& w) const;
  // The weight a prepared matrix (not a vector) of this device holds; null for any other.
  static const ClWeight* uploaded(const PreparedWeight& w);
  static ClWeight* uploaded(PreparedWeight& w) { return const_cast<ClWeight*>(uploaded(std::as_const(w))); }
  ClView vector(const PreparedWeight* w) const;  // a prepared 1 x n F32 weight's floats; {} for null
  static ClView view(const BufferView& v);
  void fail(Status s);
  template <class Op>
  Status staged(float* y, const float* x, size_t ny, size_t nx, Op op);

  std::unique_ptr<ClDeviceContext> ctx_;
  std::unique_ptr<ClArenaPool> kv_;
  std::unique_ptr<ClMatmul> matmul_;
  std::unique_ptr<ClOps> ops_;
  Capabilities caps_;
  // Every weight uploaded, by the tensor's bytes, while some PreparedWeight holds it: a model's
  // tied tensors share one copy. Held weakly: an unloaded model's weights go back to the pool,
  // and the next model mapped at those addresses gets its own.
  std::map<const void*, std::weak_ptr<ClWeight>> uploaded_;
  std::shared_ptr<ClWeight> find_uploaded(const WeightRef& w);  // null: none alive of that shape

  // The bound micro-batch.
  Buffer ids_, positions_, table_, mass_, logits_, rows_tmp_;
  Buffer lora_mid_;  // the LoRA branches' A products
  std::vector<uint64_t> table_host_;
  std::vector<float> mass_host_;
  // RoPE's angles for the bound tokens, one table per (rot_dims, base, scale) the layers use
  // (gemma3's local and global layers differ), computed on the host once per micro-batch.
  struct Angles {
    int rot_dims = 0;
    float base = 0, scale = 0;
    bool current = false;  // for the bound micro-batch
    RopeTable table;
    std::vector<float> host;  // cos then sin, as uploaded
    Buffer buf;
  };
  Result<ClView> angles(int rot_dims, float base, float scale);
  // Ops held back (BatchBinding::may_fuse) to run fused with the ones after them: a residual
  // add with the norm that follows; RoPE of q with RoPE of k by the same angles (held_[1]), and
  // the two (and a scale of q between, held_[2]: LLMSVC_CL_ROPE_SCALE=0 runs it alone) with the
  // store_kv of that k; a norm (after its add or alone) or a gated activation
  // with the matmul that reads it, which then gets its input already quantized (one launch
  // fewer); a decode step's attention with the o-projection after it, which then reads the
  // int8 form attention wrote (LLMSVC_CL_ATTN_Q8=0: not held, the GEMV quantizes its input).
  // flush_held() runs what is held as it stands.
  Status flush_held();
  // RoPE of q alone (k null) or of q and k in one launch.
  Status run_rope(const OpCall& q, const OpCall* k);
  // The held norm / gated activation / attention, writing a quantized copy of its output into
  // q (qblock 32 or 256) or none (qblock 0); with q8params, in the int8 form (ClOps::rms_norm's;
  // attention writes only that form).
  Status run_producer(ClView q, int qblock, ClView q8params = {});
  Status run_attention(const OpCall& op, const ClQ8Out& q8 = {});
  Status no_kv() const;  // an op that needs the batch's KV chunks in this device's arena
  // Whether the held op is a norm, gated activation or attention whose output `op` (a matmul)
  // reads whole, and the block its weights quantize that input in (0: not fusable).
  int producer_block(const OpCall& op) const;
  Status run_matmul(const OpCall& op, ClView x, bool x_quantized);
  // op's folded LoRA branches onto its outputs ys.
  Status run_lora(const OpCall& op, const ClView* ys);
  OpCall held_[3];
  int n_held_ = 0;
  bool attn_q8_ = env_switch("LLMSVC_CL_ATTN_Q8").value_or(true);
  bool fuse_q_scale_ = env_switch("LLMSVC_CL_ROPE_SCALE").value_or(true);  // q's scale into the RoPE + store
  int64_t attn_q8_fused_ = 0;
  std::vector<Angles> angles_;
  ClKv kv_bind_;
  bool kv_bound_ = false;
  const BatchBinding* batch_ = nullptr;
  BatchBinding batch_copy_;
  int64_t logits_rows_ = 0, logits_cols_ = 0;
  Status failed_;
  // Host-pointer ops' staging.
  Buffer stage_[4];
  Status host_failed_;
};

}  // namespace llmsvc::hal::opencl
