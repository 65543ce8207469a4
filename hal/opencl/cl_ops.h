// SPDX-License-Identifier: Apache-2.0
// ClOps: the HAL's non-matmul ops as OpenCL kernels on device buffers: norms, RoPE, gated
// activations, residual adds, biases, scales, and attention over a context's KV chunks kept in
// device memory (new K/V rows written into them in place).
//
// Every call enqueues on the context's in-order queue and returns without waiting; an error is
// an enqueue failure. Numerics follow the CPU backend's ops (hal/cpu) to float rounding.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "hal/device.h"
#include "hal/kv_format.h"
#include "hal/opencl/cl_launch.h"

namespace llmsvc::hal::opencl {

// A context's KV cache in device memory: every chunk lies in one buffer (`arena`); chunk c of
// the sequence is at byte table[c] & kKvOffsetMask of it, in format table[c] >> 56 (a KvFormat,
// bits per code). A chunk is laid out as on the host (policy/kv_chunk_store.h): for each layer,
// the K block then the V block of a block shape of chunk_tokens tokens (hal/kv_format.h).
struct ClKv {
  cl_mem arena = nullptr;
  ClView table;  // ulong per chunk
  int n_chunks = 0;
  int chunk_tokens = 0;
  int n_layer = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  bool all_f16 = false;  // every chunk of the table is f16 (attention then takes a faster path)
};
inline constexpr uint64_t kKvOffsetMask = (uint64_t(1) << 56) - 1;
inline uint64_t kv_table_entry(uint64_t offset, KvFormat f) { return offset | (uint64_t(static_cast<uint8_t>(f)) << 56); }

// A quantized copy of an op's output in the int8 form (ClMatmul::quantize_input_q8's): codes,
// the blocks' params, the block (0: none).
struct ClQ8Out {
  ClView codes, params;
  int block = 0;
};

class ClOps {
 public:
  static Result<std::unique_ptr<ClOps>> create(ClDeviceContext& ctx);
  ~ClOps();

  // As hal::Device's ops of the same names, on views (f32 unless said). The norms and gated
  // activations take an optional second output q with qblock 32 or 256 (dim or n a multiple):
  // their result quantized as the matmul after them quantizes its input (ClMatmul::ActQuant,
  // the same bits as ClMatmul::quantize_input), so that matmul needs no launch of its own for it.
  // The norms quantize a row of at most kMaxQuantRow (kernels/act_quant.cl's AQ_ROW_MAX).
  // With q8params (its mem not null), q is written in the int8 form instead of floats: codes at
  // q, the blocks' params at q8params (ClMatmul::quantize_input_q8's form, for the int8 GEMV).
  static constexpr int kMaxQuantRow = 8192;
  Status rms_norm(ClView x, ClView weight /* mem null: no scale */, int n_rows, int dim, float eps, ClView out,
                  ClView q = {}, int qblock = 0, ClView q8params = {});
  // y += a (n_rows x dim), then out = rms_norm(y) * weight: a residual add and the norm after
  // it in one launch, with the two ops' bits.
  Status add_rms_norm(ClView y, ClView a, ClView weight, int n_rows, int dim, float eps, ClView out, ClView q = {},
                      int qblock = 0, ClView q8params = {});
  // angles: the tokens' hal::RopeTable (cos of every token's rot_dims / 2 angles, then sin).
  Status rope(ClView x, int n_tokens, int n_heads, int head_dim, int rot_dims, ClView angles, RopeStyle style);
  // rope() of q (n_heads_q heads) and of k (n_heads_k heads) by the same angles in one launch,
  // the two calls' bits (q and k must not overlap).
  Status rope_qk(ClView q, int n_heads_q, ClView k, int n_heads_k, int n_tokens, int head_dim, int rot_dims,
                 ClView angles, RopeStyle style);
  // rope_qk() then store_kv(k, v, ...) in one launch, the three calls' bits; kv's heads are k's.
  // With q_scale, scale(q, ..., *q_scale) after the rotation too (Gemma-3's q scale).
  Status rope_qk_store_kv(ClView q, int n_heads_q, ClView k, ClView v, int n_tokens, int rot_dims, ClView angles,
                          RopeStyle style, ClView positions, const ClKv& kv, int layer,
                          std::optional<float> q_scale = std::nullopt);
  Status swiglu(ClView gate, ClView up, size_t n, ClView q = {}, int qblock = 0, ClView q8params = {});
  Status geglu(ClView gate, ClView up, size_t n, ClView q = {}, int qblock = 0, ClView q8params = {});
  Status add(ClView y, ClView x, size_t n);
  Status add_bias(ClView y, ClView bias, int n_rows, int dim);
  Status scale(ClView x, size_t n, float s);

  // K and V rows of n_tokens tokens (k, v: n_tokens x kv_dim f32) stored as f16 into `layer` of
  // the chunks at positions[t] (their chunks are f16).
  Status store_kv(ClView k, ClView v, int n_tokens, ClView positions, const ClKv& kv, int layer);
  // Causal attention of n_tokens queries (q: n_tokens x n_head x head_dim, query t at
  // positions[t]) over keys at positions [0, n_valid) of `layer` (a query sees keys at
  // positions <= its own, and > its own - p.sliding_window when that is > 0), every KV format.
  // out: n_tokens x n_head x head_dim. mass, when its mem is not null: float per position;
  // adds, for each key, the softmax weight it received summed over query rows and heads (as
  // hal::KvChunkView::mass). With defer_mass, a decode step's mass may wait on the device
  // until flush_mass() (one launch a forward step for every layer's, in layer order, the same
  // sums); a call that adds to another mass or another n_valid flushes what waits first.
  // With q8.block (32 or 256, dividing n_head x head_dim), out is written in the int8 form as
  // well (ClMatmul::quantize_input_q8's, blocks of q8.block: codes at q8.codes, the blocks'
  // params at q8.params), for the o-projection's int8 GEMV: by the one-launch decode kernel
  // itself where its work-groups hold whole blocks (*fused_q8 true), else by a launch of its own.
  Status attention(ClView q, int n_tokens, ClView positions, const ClKv& kv, int layer, int n_valid,
                   const AttentionParams& p, ClView out, ClView mass, bool defer_mass = false, const ClQ8Out& q8 = {},
                   bool* fused_q8 = nullptr);
  // Adds the key mass that waits (attention with defer_mass) to its mass.
  Status flush_mass();
  // Whether prefill attention runs on tensor cores here (kernels/attention_mma.cl: NVIDIA,
  // head_dim 64 or 128, 64 rows a kv head or more); if not, why ("" where it does).
  const std::string& tensor_core_attention_note() const;

 private:
  struct Impl;
  // attention() but for a quantized output its kernels did not write (*fused_q8 false).
  Status attend(ClView q, int n_tokens, ClView positions, const ClKv& kv, int layer, int n_valid,
                const AttentionParams& p, ClView out, ClView mass, bool defer_mass, const ClQ8Out& q8, bool* fused_q8);
  // rope_qk's launch; kv null: no store.
  Status launch_rope_qk(ClView q, int n_heads_q, ClView k, int n_heads_k, int n_tokens, int head_dim, int rot_dims,
                        ClView angles, RopeStyle style, ClView v, ClView positions, const ClKv* kv, int layer,
                        std::optional<float> q_scale);
  explicit ClOps(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmsvc::hal::opencl
