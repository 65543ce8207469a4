// SPDX-License-Identifier: Apache-2.0
// ClMatmul: weights on an OpenCL device and the kernels that read them: matmul (a GEMV for a
// few tokens, a GEMM for prefill) and embedding rows.
//
// Each GGUF weight type is repacked once at upload into a layout the kernels read coalesced
// (see cl_weight_pack.cpp for which type becomes what); activations are f32, quantized
// first as the CPU quantizes them for the quantized types (quantize_input).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "hal/buffer.h"
#include "hal/device.h"
#include "hal/opencl/cl_launch.h"

namespace llmsvc::hal::opencl {

struct PackedWeight;  // cl_weight_pack.h

// A weight in device memory (its own copy: the file's bytes are not read again), or a view of
// one's first rows and columns (an elastic level: it reads its weight's parts).
class ClWeight final : public PreparedWeight {
 public:
  const WeightRef& ref() const override { return ref_; }
  bool owns_copy() const override { return true; }
  uint64_t device_bytes() const;  // what it holds in the device's pool (a view: nothing)
  bool is_view() const { return base_ != nullptr; }
  int64_t resident_rows() const override { return resident_; }  // a view: its own rows
  int64_t resident_cols() const override { return base_ ? base_->resident_cols_ : resident_cols_; }  // a view: its base's
  // The row stride the kernels index by, in elements: the weight's own, or a view's base's
  // (which release_cols narrows).
  uint32_t stride() const { return base_ ? base_->kp : kp; }
  // An F32 weight's first row as plain floats (a 1 x n vector: a norm's scale, a bias).
  ClView floats() const;

 private:
  friend class ClMatmul;
  const Buffer& part(int i) const { return base_ ? base_->parts[i] : parts[i]; }
  WeightRef ref_;
  int layout = 0;         // which repacked form (cl_weight_pack.h)
  Buffer parts[3];        // codes, scales, ... as the layout needs; row r's bytes at r * (size / rows)
  uint32_t kp = 0;        // row stride in elements (the float layouts' cols rounded up to 8; a view: unused)
  uint32_t gs = 0;        // log2 of the elements per scale of the int8 layouts
  size_t part_row[3] = {};          // bytes of one row in each part
  const ClWeight* base_ = nullptr;  // a view's weight
  int64_t resident_ = 0;            // rows held: ref_.rows, fewer after release_rows
  int64_t resident_cols_ = 0;       // columns held: ref_.cols, fewer after release_cols
};

class ClMatmul {
 public:
  // Builds the matmul programs for the context's device (through its program cache). e0m4:
  // upload() repacks Q4_0 / Q4_1 / Q4_K weights (rows a multiple of 128 wide) as E0M4
  // (cl_weight_pack.cpp; lossy); unset, LLMSVC_CL_E0M4=1 turns it on. int8_gemm: prefill of the
  // types whose blocks are 32 integer codes with a scale (and min) multiplies the quantized
  // input's int8 codes (kernels/matmul_mmq.cl: tensor cores on NVIDIA, each item's integer sums
  // elsewhere); unset, it is on and LLMSVC_CL_MMQ=0 turns it off. dp4a: decode (1-4 tokens) of
  // the quantized types runs the int8-activation GEMV (kernels/matmul_dp4a.cl: dp4a through
  // inline PTX on NVIDIA, char products elsewhere) on the input's int8 form; unset, it is on and
  // LLMSVC_CL_GEMV_DP4A=0 turns it off (the float GEMV, for an A/B).
  static Result<std::unique_ptr<ClMatmul>> create(ClDeviceContext& ctx, std::optional<bool> e0m4 = std::nullopt,
                                                  std::optional<bool> int8_gemm = std::nullopt,
                                                  std::optional<bool> dp4a = std::nullopt);
  ~ClMatmul();

  // The weight types upload() takes.
  bool supports(WeightType type) const;
  // Repacks `w` on the host and copies it into the device's pool (waits for the copy).
  // Code::out_of_memory when the pool is full; Code::unsupported for another type.
  Result<std::unique_ptr<ClWeight>> upload(const WeightRef& w);

  // A view of w's first rows and cols, reading w's parts (Device::slice_weight's contract: the
  // kernels take the row stride apart from the columns computed). Valid while w lives.
  static Result<std::unique_ptr<ClWeight>> slice(const ClWeight& w, int64_t rows, int64_t cols);
  // Device::release_rows / restore_rows of an uploaded weight. Device memory cannot shrink in
  // place, so each part moves to a buffer of the rows kept (a device-side copy; rows are
  // contiguous in every layout) and the old one goes back to the pool; restoring copies them to
  // a buffer of the rows asked for and uploads the rest, repacked from `from` (ref()'s layout;
  // nullptr: the bytes behind ref()). Views read the
  // new buffers at their next launch. Both wait for the queue.
  uint64_t release_rows(ClWeight& w, int64_t keep_rows);
  Result<uint64_t> restore_rows(ClWeight& w, int64_t rows, const void* from = nullptr);
  // Device::release_cols / restore_cols: the same for the columns past keep_cols (rounded up to
  // the layout's granule: its type's block, E0M4's 128, the float layouts' 8) of every held row.
  // Each part moves to a buffer of the narrower row pitch (one rectangular device copy), and
  // the weight's stride, which its views read, falls to it. A restore repacks the held rows'
  // first `cols` columns from `from` and uploads them whole. Rows and columns may be released
  // together; a restore of either keeps the other's bound.
  uint64_t release_cols(ClWeight& w, int64_t keep_cols);
  Result<uint64_t> restore_cols(ClWeight& w, int64_t cols, const void* from = nullptr);

  // y[t][r] = sum_c w[r][c] * x[t][c] for t < n_tokens; x: n_tokens x cols f32, y: n_tokens x
  // rows f32 (neither overlapping the other). Enqueued on the context's queue, no wait.
  Status matmul(const ClWeight& w, ClView x, int n_tokens, ClView y);
  // ys[i] = x * ws[i]^T for n weights sharing x (Q/K/V, gate/up): as n matmul() calls, with the
  // same bits, but one launch where they all take the GEMV (n_tokens <= 4) and share a layout
  // and width (a decode step's launches have a fixed cost each).
  // x_quantized: x is already what quantize_input() would make of it for every weight (they
  // must share a quantizing ActQuant): a producer wrote it so (ClOps' norms and gated
  // activations take a quantized second output), and the matmul's own quantization is skipped.
  // Where the weights run the int8 GEMV (uses_dp4a_gemv: all of them or none), x is the input's
  // int8 form instead (quantize_input_q8's).
  Status matmul_multi(const ClWeight* const* ws, const ClView* ys, int n, ClView x, int n_tokens,
                      bool x_quantized = false);
  // y += alpha * (w x) for a float weight (F32 / F16 / BF16): a LoRA branch's B product, scaled
  // and added to its base matmul's output with the bits of matmul(), then the scale and add
  // ops; one launch for a few tokens (the GEMV adds as it writes), two beyond.
  Status matmul_add(const ClWeight& w, ClView x, int n_tokens, ClView y, float alpha);
  // How a weight's matmul quantizes its input first, as the CPU does before its integer dot
  // products: not at all for the float types, in blocks of 32 for the legacy types (ggml's
  // Q8_0 / Q8_1: an f16 scale per 32), in superblocks of 256 for the K-quants (Q8_K).
  enum class ActQuant { none, q8_32, q8_256 };
  static ActQuant act_quant(WeightType type);
  // Elements per quantization block: 0 (none), 32 or 256.
  static int act_quant_block(ActQuant mode) { return mode == ActQuant::q8_32 ? 32 : mode == ActQuant::q8_256 ? 256 : 0; }
  // The scratch the matmuls quantize their input into, made to hold n_tokens rows of cols: where a
  // producer may write a quantized input for matmul_multi(..., x_quantized). Valid until the
  // next call into this ClMatmul that quantizes (queue order keeps earlier uses safe).
  // It holds either form (floats, or quantize_input_q8's int8 form).
  Result<ClView> input_scratch(int n_tokens, int64_t cols);
  // out = x (n_tokens rows of w's cols) quantized as w's matmul quantizes it, written back as
  // floats q * d: the input matmul() multiplies. A copy for ActQuant::none.
  Status quantize_input(const ClWeight& w, ClView x, int n_tokens, ClView out);
  // The same quantization in the int8 form the int8 GEMV reads: at out, n_tokens rows of cols
  // codes (int8, element order); from out + q8_params_offset on, per 32 elements of a row a
  // uint2 of the block's d (f32 bits: q * d is quantize_input's float) and the code sums of its
  // two 16-element halves (int16 each, the first in the low bits). A quantized w only.
  Status quantize_input_q8(const ClWeight& w, ClView x, int n_tokens, ClView out);
  static size_t q8_params_offset(int n_tokens, int64_t cols) {
    return (static_cast<size_t>(n_tokens) * static_cast<size_t>(cols) + 255) / 256 * 256;
  }
  // Whether matmul() of w over n_tokens runs the int8-activation GEMV (dp4a): exact integer
  // sums per half block, scaled and summed in f32.
  bool uses_dp4a_gemv(const ClWeight& w, int n_tokens) const;
  // How the int8 GEMV runs here: "" with dp4a through PTX, else how it sums or why it is off.
  const std::string& dp4a_gemv_note() const;

  // out[i] = w[ids[i]] dequantized (f32, exactly as the CPU's dequantization gives it); ids:
  // n int32 in device memory, each in [0, rows).
  Status get_rows(const ClWeight& w, ClView ids, int n, ClView out);

  // Whether matmul() of n_tokens runs the tensor-core GEMM (NVIDIA only): its weights and
  // activations are rounded to f16 (relative error 2^-11 each), products summed in f32.
  bool uses_tensor_cores(int n_tokens) const;
  // Whether matmul() of w over n_tokens runs the int8 GEMM instead (exact integer block sums).
  bool uses_int8_gemm(const ClWeight& w, int n_tokens) const;
  // Why this device has no int8 GEMM ("" where it has one).
  const std::string& int8_gemm_note() const;
  // Why this device has no tensor-core GEMM ("" where it has one).
  const std::string& tensor_core_note() const;

 private:
  struct Impl;
  explicit ClMatmul(std::unique_ptr<Impl> impl);
  // matmul() of an input already quantized for w. int8_ready: the int8 GEMM's split of this
  // same input is already in its scratch (the previous weight of a matmul_multi made it).
  Status multiply(const ClWeight& w, ClView xq, int n_tokens, ClView y, bool int8_ready = false);
  ClDeviceContext& context() const;
  // w's parts moved to buffers of `rows` rows of `row[i]` bytes (each held row's first
  // min(row[i], its bytes) copied on the device, up to `rows` of them), not yet swapped in.
  using PartRows = std::array<size_t, 3>;
  Result<std::array<Buffer, 3>> resized_parts(const ClWeight& w, int64_t rows, const PartRows& row);
  // A repacked weight's parts in new buffers of the pool (blocking copies).
  Result<std::array<Buffer, 3>> upload_parts(const PackedWeight& p);
  // Swaps filled parts of those row sizes into w once the queue is done with the old ones.
  void swap_parts(ClWeight& w, std::array<Buffer, 3>& parts, const PartRows& row);
  // The int8 GEMM of an input already quantized for w.
  Status multiply_int8(const ClWeight& w, ClView xq, int n_tokens, ClView y, bool int8_ready);
  // x (n_tokens rows of w's cols) quantized for w in the form its matmul reads (floats, or the
  // int8 form where uses_dp4a_gemv).
  Status quantize_for(const ClWeight& w, ClView x, int n_tokens, ClView out);
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmsvc::hal::opencl
