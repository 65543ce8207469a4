// SPDX-License-Identifier: Apache-2.0
// HAL device interface: what a backend is (kind, capabilities) and the op set the core runs on it.
//
// The core places each op on a device from its capabilities; a device that lacks an op
// or a weight type says so through supports() and placement falls back to the CPU.
// Each device has a memory space (memory(): a pool with a capacity) and a queue for transfers;
// the ops below take pointers into host-visible buffers of its space (the CPU's). A device
// without host-visible memory (a discrete GPU) is driven on buffer views instead: begin() binds
// a micro-batch, run() enqueues one op of it, end() completes it. Weights are
// WeightRef views of GGUF tensor bytes, which the device may repack once at load time
// (prepare_weight) into its own layout.
#pragma once

#include <cstddef>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "hal/buffer.h"
#include "hal/kv_format.h"
#include "hal/op_kind.h"
#include "hal/queue.h"
#include "hal/weight_type.h"

namespace llmsvc::hal {

enum class DeviceKind { cpu, gpu, npu, flash };

struct Capabilities {
  bool shares_host_memory = true;  // its memory space is host-visible (no copy to read results)
  bool static_shapes_only = false; // runs only graphs prepared for a fixed shape (an NPU)
  bool int8_only = false;          // matmuls in int8 only
  uint64_t memory_bytes = 0;       // its pool's capacity; 0 = bounded by the host
  uint32_t ops = kAllOps;          // op_bit() of each op kind it runs; placement falls back for the rest
  double prepare_graph_us = 0;     // what preparing a graph for a new shape costs (0: nothing)
  double matmul_gflops = 0;        // rough matmul throughput, for placement's estimate (0: unknown)
  double transfer_gbps = 0;        // to and from host memory (0: shares it, free)
  // Its driver issues ioctl on its device files while it runs (a GPU driver allocates and
  // submits that way); llmsvcd's system-call filter then allows ioctl (syscall_filter.h).
  bool driver_ioctl = false;
  // Tokens per prefill micro-batch at which its matmuls fill it (0: the runtime's default). A
  // GPU's GEMM tiles are 128 tokens wide: 256 tokens leave half an H100's SMs idle on a
  // 4096-row matmul.
  int batch_tokens = 0;
  // It offers slice_weight (zero-copy prefix views): elastic levels run there.
  bool slices_weights = false;
};

// A weight matrix [rows][cols] in a GGUF type: row r is `row_bytes` bytes at data + r*row_bytes.
struct WeightRef {
  WeightType type = WeightType::F32;
  const void* data = nullptr;
  int64_t rows = 0;  // output features (ggml ne[1])
  int64_t cols = 0;  // input features (ggml ne[0]), contiguous
  size_t row_bytes = 0;
};

// Opaque per-device form of a weight (repacked, uploaded, ...).
class PreparedWeight {
 public:
  virtual ~PreparedWeight() = default;
  virtual const WeightRef& ref() const = 0;
  // True when the device keeps its own copy and never reads the bytes behind ref() again,
  // so the loader may drop those file pages from memory.
  virtual bool owns_copy() const { return false; }
  // The rows, and the columns of each, whose bytes the device holds: ref()'s, fewer while
  // Device::release_rows / release_cols hold a tail back (at the device's own granule).
  virtual int64_t resident_rows() const { return ref().rows; }
  virtual int64_t resident_cols() const { return ref().cols; }
};

// One chunk of one layer's KV cache: keys and values for n_tokens consecutive positions
// starting at first_pos, as blocks in `format` (hal/kv_format.h; f16 is [token][kv_head][head_dim]).
// For the q formats n_tokens is the token count the blocks were encoded with (it fixes their
// layout); f16 blocks may hold more rows than n_tokens (a chunk being filled).
// mass, when not null, points to n_tokens floats to which attention ADDS, for each key, the
// softmax weight it received summed over every query row and query head of the call (the
// weights as applied to V: f16-rounded probabilities); the policy derives each token's
// information density from these column sums.
struct KvChunkView {
  const void* k = nullptr;
  const void* v = nullptr;
  int n_tokens = 0;
  int32_t first_pos = 0;
  KvFormat format = KvFormat::f16;
  float* mass = nullptr;
};

struct AttentionParams {
  int n_head = 0;
  int n_head_kv = 0;   // n_head % n_head_kv == 0 (grouped-query attention)
  int head_dim = 0;
  float scale = 1.0f;  // applied to q.k
  int sliding_window = 0;  // > 0: a query at p sees keys at positions > p - window only
  // Query head h reads KV head h % n_head_kv (rank-major: the first n_head_kv heads are one
  // of each group, so any prefix of whole ranks is a smaller model; Model's elastic head
  // levels) instead of h / (n_head / n_head_kv). Devices without it refuse it.
  bool rank_major = false;
};

enum class RopeStyle { normal, neox };  // adjacent pairs (llama) / split halves (neox, qwen2, gemma)

// A place in a device's memory: a buffer of its pool and a byte offset in it.
struct BufferView {
  const Buffer* buffer = nullptr;
  size_t offset = 0;
};

// A LoRA branch folded into a matmul (Device::matmul_lora, OpCall::lora): after ys[out] = x *
// ws[out]^T, it adds scale * B (A x) to ys[out], in llama.cpp's order (B's product in float,
// scaled, then added).
struct LoraBranch {
  int out = 0;  // index into ws / ys
  const PreparedWeight* a = nullptr;  // rank x cols
  const PreparedWeight* b = nullptr;  // ws[out]'s rows x rank
  float scale = 1.0f;
};

// One op of a prepared step list with everything resolved: what a view-driven device runs.
// Operands as in the pointer ops above; ids_in / logits_out name the bound tensors (the
// micro-batch's token ids, the host's logits), which the device stages itself.
struct OpCall {
  OpKind kind = OpKind::copy;
  int layer = -1;
  int64_t rows = 0;
  int64_t from_row = 0;  // last_rows: the first row moved to the front
  BufferView in[2], out[3];
  bool ids_in = false, logits_out = false;
  int n_weights = 0;
  const PreparedWeight* w[3] = {nullptr, nullptr, nullptr};  // matmul
  const PreparedWeight* table = nullptr;  // get_rows: the embedding table, prepared on this device
  const PreparedWeight* param = nullptr;  // norm scale / bias as a 1 x n F32 weight (null: none)
  std::array<int32_t, 5> i{};             // as the graph's op integers (hal/graph.h)
  std::array<float, 2> f{};
  int64_t cols_in = 0, cols_out = 0;
  // matmul: LoRA branches folded in (where the device fuses_lora()); they read in[0] as floats.
  const LoraBranch* lora = nullptr;
  int n_lora = 0;
};

// What one micro-batch binds on a view-driven device.
struct BatchBinding {
  const int32_t* ids = nullptr;        // n token ids (host)
  const int32_t* positions = nullptr;  // n positions (host)
  int n = 0;
  float* logits = nullptr;  // host rows of n_vocab floats the logits op writes; complete after end()
  // The context's KV cache: chunk c's memory (a buffer of kv_memory(), null when not resident)
  // and format; chunks hold chunk_tokens positions of n_layer layers (policy/kv_chunk_store.h).
  std::span<const Buffer* const> chunk_memory;
  std::span<const KvFormat> chunk_format;
  int chunk_tokens = 0, n_layer = 0, n_head_kv = 0, head_dim = 0;
  int n_valid = 0;  // keys at positions [0, n_valid) are visible
  // Per chunk, chunk_tokens floats to which attention adds each key's mass (as
  // KvChunkView::mass), complete after end(); empty when not tracked.
  std::span<float* const> chunk_mass;
  // Nothing but this device touches its tensors between its ops of the batch (no transfers to
  // or from other devices): it may hold an op back and fuse it with the next (a residual add
  // with the norm that follows).
  bool may_fuse = false;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string name() const = 0;
  virtual const Capabilities& caps() const = 0;
  virtual bool supports(WeightType type) const = 0;
  bool runs(OpKind op) const { return (caps().ops & op_bit(op)) != 0; }

  // The device's memory space (activations, KV chunks, prepared weights it uploads) and its
  // queue (transfers in and out of that space).
  virtual MemoryPool& memory() = 0;
  virtual Queue& queue() = 0;
  // Where the KV chunks of contexts this device attends over live (a GPU: one arena, so that
  // attention reaches every chunk through one handle).
  virtual MemoryPool& kv_memory() { return memory(); }

  // The view-driven path (devices whose memory is not host-visible). Each returns the first
  // failure of the device (an enqueue, a transfer); Code::unsupported where not offered.
  virtual Status begin(const BatchBinding& batch);
  virtual Status run(const OpCall& op);
  virtual Status end();

  virtual Result<std::unique_ptr<PreparedWeight>> prepare_weight(const WeightRef& w) = 0;
  // A view of the first `rows` rows and the first `cols` columns of a weight this device
  // prepared, sharing its memory (no copy: an elastic model switches sub-model sizes by
  // pointer moves). Valid while `w` lives. matmul on the view computes exactly (bit for bit)
  // what matmul on a weight prepared from those rows and columns of the GGUF bytes would (a
  // device's lossy opt-in repack, OpenCL's E0M4, gives its own values at widths it would not
  // repack).
  // Its ref() is {w's type and data, rows, cols, w's row_bytes (the stride)}.
  // 0 < rows <= w.rows, 0 < cols <= w.cols and cols a multiple of the type's block (32 for
  // the legacy types, 256 for the K-quants, 1 for F32 / F16 / BF16); else
  // Code::invalid_argument. Code::unsupported where not offered (the default).
  virtual Result<std::unique_ptr<PreparedWeight>> slice_weight(const PreparedWeight& w, int64_t rows, int64_t cols);
  // slice_weight's argument checks, for the devices that offer it: ok, or the bound broken.
  static Status check_slice(const WeightRef& w, int64_t rows, int64_t cols);
  // Gives back the memory of a prepared weight's rows from `keep_rows` on (whole pages of the
  // device's own copy that hold no earlier row): an elastic level that keeps fewer rows then
  // holds less. Their contents are lost until restore_rows: meanwhile only views of at most
  // keep_rows rows may be computed with. Returns the bytes given back; 0 where nothing can be
  // (a weight read in place from the file, whose pages the kernel reclaims itself; a device
  // without it, the default).
  virtual uint64_t release_rows(PreparedWeight& w, int64_t keep_rows);
  // Makes the first `rows` rows of a weight resident again after release_rows (all of them
  // when rows >= its rows), repacked from `from`: bytes laid out as its ref()'s, or nullptr for
  // the bytes behind its ref(), which must then still be readable. Returns the bytes taken
  // back; Code::out_of_memory (the weight left as it was) when the memory cannot be had.
  virtual Result<uint64_t> restore_rows(PreparedWeight& w, int64_t rows, const void* from);
  // The same for a weight's columns from `keep_cols` on (a multiple of its block): an elastic
  // level's unused input tail. Meanwhile only views of at most keep_cols columns may be
  // computed with. The default gives back nothing.
  virtual uint64_t release_cols(PreparedWeight& w, int64_t keep_cols);
  virtual Result<uint64_t> restore_cols(PreparedWeight& w, int64_t cols, const void* from);

  // y[t][r] = sum_c w[r][c] * x[t][c] for t < n_tokens. x: n_tokens x w.cols, y: n_tokens x w.rows.
  virtual void matmul(const PreparedWeight& w, const float* x, int n_tokens, float* y) = 0;
  // ys[i] = x * ws[i]^T for n weights that share the input x (Q/K/V, gate/up). A backend may
  // fuse them (the CPU quantizes x once and synchronizes its threads once); by default it
  // is n matmuls.
  virtual void matmul_multi(const PreparedWeight* const* ws, float* const* ys, int n, const float* x, int n_tokens) {
    for (int i = 0; i < n; ++i) matmul(*ws[i], x, n_tokens, ys[i]);
  }
  // matmul_multi with LoRA branches folded in (LoraBranch). Forward folds branches only where
  // fuses_lora(): the CPU in one parallel region, a view-driven device through OpCall::lora;
  // elsewhere it runs them as the graph's separate ops, which this default also does.
  using LoraBranch = hal::LoraBranch;
  virtual bool fuses_lora() const { return false; }
  virtual void matmul_lora(const PreparedWeight* const* ws, float* const* ys, int n, const float* x, int n_tokens,
                           const LoraBranch* branches, int n_branches) {
    matmul_multi(ws, ys, n, x, n_tokens);
    for (int i = 0; i < n_branches; ++i) {
      const LoraBranch& br = branches[i];
      const size_t rows = static_cast<size_t>(br.b->ref().rows), tokens = static_cast<size_t>(n_tokens);
      std::vector<float> mid(tokens * static_cast<size_t>(br.a->ref().rows)), part(tokens * rows);
      matmul(*br.a, x, n_tokens, mid.data());
      matmul(*br.b, mid.data(), n_tokens, part.data());
      scale(part.data(), part.size(), br.scale);
      add(ys[br.out], part.data(), part.size());
    }
  }
  // Rows of a (possibly quantized) embedding table, dequantized: out[i] = w[ids[i]].
  virtual void get_rows(const WeightRef& w, const int32_t* ids, int n, float* out) = 0;

  // out = x / rms(x) * weight over rows of `dim` (weight may be null: no scale).
  virtual void rms_norm(const float* x, const float* weight, int n_rows, int dim, float eps, float* out) = 0;
  // In place on n_tokens x n_heads x head_dim; rotates the first rot_dims of each head.
  virtual void rope(float* x, int n_tokens, int n_heads, int head_dim, int rot_dims, const int32_t* positions,
                    float freq_base, float freq_scale, RopeStyle style) = 0;
  // gate = act(gate) * up over n elements; act is SiLU or tanh-GELU.
  virtual void swiglu(float* gate, const float* up, size_t n) = 0;
  virtual void geglu(float* gate, const float* up, size_t n) = 0;
  // Causal attention of n_tokens queries (q: n_tokens x n_head x head_dim, query t at
  // position q_pos[t]) over the chunks; a query sees keys at positions <= its own.
  // out: n_tokens x n_head x head_dim. Backends that reproduce llama.cpp follow its numerics,
  // which differ (in the last bits) between one query token and several: a token's result
  // depends on whether it comes alone, not on the other tokens of a batch.
  virtual void attention(const float* q, int n_tokens, const int32_t* q_pos, const KvChunkView* chunks, int n_chunks,
                         const AttentionParams& p, float* out) = 0;
  // dst[i] = f16(src[i]): how the core writes new K/V rows in place into the chunk store.
  virtual void store_f16(const float* src, uint16_t* dst, size_t n) = 0;
  // y += x
  virtual void add(float* y, const float* x, size_t n) = 0;
  // y[r] += bias for each of n_rows rows of dim floats (qwen2's q/k/v biases).
  virtual void add_bias(float* y, const float* bias, int n_rows, int dim) = 0;
  // x *= s over n elements (gemma's embedding scale).
  virtual void scale(float* x, size_t n, float s) = 0;
};

}  // namespace llmsvc::hal
