// SPDX-License-Identifier: Apache-2.0
// The CPU matmul: y = x * W^T for GGUF weights of every supported type, on a ThreadPool.
//
// Quantized weights are repacked once (prepare_cpu_weight) into 16-row panels of about the
// same size: Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 into panel.h's layout, computed with int8 dot
// products against activations quantized per 32 like ggml's Q8_0 / Q8_1, in ggml's summation
// order; Q4_K / Q5_K / Q6_K into kpanel.h's layout against Q8_K
// activations. F32 / F16 / BF16 stay row-major and use float FMAs. Accumulation is fp32 as in ggml.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "base/status.h"
#include "base/aligned_buffer.h"
#include "hal/cpu/quant/kpanel.h"
#include "hal/cpu/quant/panel.h"
#include "hal/cpu/thread_pool.h"
#include "hal/device.h"

namespace llmsvc::hal::cpu {

// Reusable buffers for quantized activations: grown on demand, so steady-state calls do not
// allocate. One per thread that calls matmul (not shared between concurrent calls).
class MatmulScratch {
 public:
  // At least `bytes` of 64-aligned memory, or nullptr when out of memory.
  void* reserve(size_t bytes);

 private:
  AlignedBuffer buf_;
};

// A weight ready for the CPU kernels: a repacked copy (panel types) or a view of the GGUF bytes;
// or a view of a prefix of another CpuWeight (slice_cpu_weight), which reads that weight's
// panels in place and owns nothing.
class CpuWeight final : public PreparedWeight {
 public:
  // Views hold this weight's address and its panels': it stays where it was prepared.
  CpuWeight(const CpuWeight&) = delete;
  CpuWeight& operator=(const CpuWeight&) = delete;

  const WeightRef& ref() const override { return ref_; }
  // True when the kernels read a repacked copy; the GGUF bytes behind ref() are then no
  // longer needed by matmul or get_rows(CpuWeight) and may be unmapped / dropped.
  bool repacked() const { return fmt_ != nullptr || kfmt_ != nullptr; }
  // A view keeps no copy of its own (its base does), so it does not claim one.
  bool owns_copy() const override { return repacked() && !is_view(); }
  // Bytes this object owns (the repacked copy), for memory accounting; 0 for a view.
  size_t owned_bytes() const { return packed_.size() + kmajor_buf_.size(); }
  // The (K-)panel format when repacked in that form (else nullptr), and the panels.
  const PanelFormat* panel_format() const { return fmt_; }
  const KPanelFormat* kpanel_format() const { return kfmt_; }
  const uint8_t* panels() const { return panels_; }
  // A float weight with few columns: its values in k-major panels (row_kernels.h), or nullptr.
  const float* kmajor() const { return kmajor_; }
  // The columns the panels are laid out for (their plane offsets and stride follow it): the
  // base weight's ref().cols, fewer while release_cols holds its column tail back; a view
  // reads its base's (more than its own cols for a column prefix).
  int64_t layout_cols() const { return base_ != nullptr ? base_->layout_cols_ : layout_cols_; }
  // The weight whose memory a view reads (nullptr when this is not a view). It must outlive
  // the view; a view of a view reads (and needs) the same base.
  const CpuWeight* view_of() const { return base_; }
  bool is_view() const { return base_ != nullptr; }

  // Gives back the whole pages of the repacked copy that hold only rows >= keep_rows (an
  // elastic level's unused tail); their contents are lost until restore_rows, so meanwhile
  // only views of at most resident_rows() rows may be computed with. Returns the bytes given
  // back: 0 for a view, a weight read in place (its file pages are the kernel's to reclaim),
  // or a tail smaller than a page. Releasing again moves the boundary (restoring first).
  size_t release_rows(int64_t keep_rows);
  // Repacks released pages from `from` (bytes laid out as ref()'s; nullptr: ref().data) until
  // the first `rows` rows are resident (every row when rows >= ref().rows); returns the bytes
  // taken back. Code::out_of_memory, the weight left as it was, when the pages cannot be had.
  // With a pool, the whole panels are packed on its threads.
  Result<uint64_t> restore_rows(int64_t rows, ThreadPool* pool = nullptr, const void* from = nullptr);
  // Rows whose panels are all in memory: ref().rows unless released.
  int64_t resident_rows() const override {
    return released_end_ > released_begin_ && !cols_released() ? resident_rows_ : ref_.rows;
  }

  // The same for the columns past `keep_cols` (rounded up to the type's block) of every row:
  // an elastic level's unused input tail (down's neurons, O's heads). They lie inside every
  // panel, so the kept columns are moved together first (the panels laid out in place for
  // keep_cols: layout_cols() falls to it) and the whole pages after them given back. Meanwhile
  // only views of at most resident_cols() columns may be computed with. Returns the bytes given
  // back: 0 for a view, a weight read in place or whose rows are released, or a tail smaller
  // than a page. Releasing again moves the boundary down.
  size_t release_cols(int64_t keep_cols);
  // Lays the panels out for the first `cols` columns again (every column when cols >=
  // ref().cols), repacked from `from` (as restore_rows); returns the bytes taken back.
  Result<uint64_t> restore_cols(int64_t cols, ThreadPool* pool = nullptr, const void* from = nullptr);
  // Columns of every row the panels hold: ref().cols unless released.
  int64_t resident_cols() const override { return layout_cols(); }

 private:
  friend Result<std::unique_ptr<CpuWeight>> prepare_cpu_weight(const WeightRef& w);
  friend Result<std::unique_ptr<CpuWeight>> slice_cpu_weight(const CpuWeight& w, int64_t rows, int64_t cols);
  CpuWeight() = default;
  size_t panel_stride(int64_t cols = 0) const;  // bytes of one 16-row panel laid out for cols (0: layout_cols_)
  // Packs panels [p_begin, p_end) of the weight's first `cols` columns (0: ref().cols) from
  // `src` (ref()'s layout; nullptr: ref().data) to dst (p_end - p_begin panels).
  void pack_rows_panels(uint8_t* dst, int64_t p_begin, int64_t p_end, const void* src = nullptr, int64_t cols = 0) const;
  // Packs panels [p_begin, p_end) of the first `cols` columns to their places in the layout
  // for cols, from `from` (as pack_rows_panels), on the pool's threads when there are enough.
  void pack_panels_in_place(int64_t p_begin, int64_t p_end, int64_t cols, ThreadPool* pool, const void* from);
  bool cols_released() const { return layout_cols_ < ref_.cols; }
  // cols rounded up to the panels' block (32, or a K-quant's 256), within [one block, ref().cols].
  int64_t whole_blocks(int64_t cols) const;

  WeightRef ref_;
  const PanelFormat* fmt_ = nullptr;    // legacy block types
  const KPanelFormat* kfmt_ = nullptr;  // K-quants; both null: row-major kernels on ref_.data
  AlignedBuffer packed_;                // the repacked copy (empty for a view)
  const uint8_t* panels_ = nullptr;     // packed_.data(), or the base's for a view
  AlignedBuffer kmajor_buf_;            // small-K float weights: k-major panels (a copy)
  const float* kmajor_ = nullptr;       // kmajor_buf_'s, or the base's for a row-prefix view
  int64_t layout_cols_ = 0;
  const CpuWeight* base_ = nullptr;     // not owned
  // Released bytes [released_begin_, released_end_) of packed_ (page-aligned; empty: none),
  // and the rows before them (a row release; a column release has layout_cols_ < ref_.cols).
  size_t released_begin_ = 0, released_end_ = 0;
  int64_t resident_rows_ = 0;
};

// Validates the type and geometry (cols a multiple of the block, row_bytes consistent,
// data non-null and 2-byte aligned) and repacks panel types.
Result<std::unique_ptr<CpuWeight>> prepare_cpu_weight(const WeightRef& w);

// A view of the first `rows` rows and `cols` columns of w, without copying: matmul on it gives
// the bits of matmul on prepare_cpu_weight({type, data, rows, cols, row_bytes}) of w's bytes.
// ref() is that WeightRef (w's data and row_bytes: the stride). Valid while w (and, when w is
// itself a view, w's base) lives. invalid_argument unless 0 < rows <= w's rows,
// 0 < cols <= w's cols and cols is a multiple of the type's block.
Result<std::unique_ptr<CpuWeight>> slice_cpu_weight(const CpuWeight& w, int64_t rows, int64_t cols);

// y[t][r] = sum_c w[r][c] * x[t][c] for t < n_tokens (x: n_tokens x cols, y: n_tokens x rows,
// both row-major and contiguous). Runs one region on every thread of the pool.
void matmul(const CpuWeight& w, const float* x, int n_tokens, float* y, ThreadPool& pool, MatmulScratch& scratch);

// matmul of several weights with the same input in one parallel region (Q/K/V, gate/up):
// ys[i] = x * ws[i]^T. All weights have x's cols; the activations are quantized once when
// the weights share an activation format, and there is one thread synchronization in all.
// A LoRA branch on output `out` of matmul_multi: ys[out] += scale * B (A x). A and B are float
// weights (F32 / F16 / BF16, row-major); B's rows are ws[out]'s.
struct CpuLoraBranch {
  int out = 0;
  const CpuWeight* a = nullptr;
  const CpuWeight* b = nullptr;
  float scale = 1.0f;
};

// With `lora`, each thread then adds the branches to the rows it computed, in the same region:
// A x on every thread (rank rows: less than a barrier costs), B's product for its rows, scaled
// and added in float, as separate matmul, scale and add ops would give (the same bits).
void matmul_multi(const CpuWeight* const* ws, float* const* ys, int n_weights, const float* x, int n_tokens,
                  ThreadPool& pool, MatmulScratch& scratch, std::span<const CpuLoraBranch> lora = {});

// Dequantizes rows ids[i] (0 <= ids[i] < rows) of w into out (n x cols floats): the embedding lookup.
void get_rows(const WeightRef& w, const int32_t* ids, int n, float* out);
// The same from a prepared weight (reads the repacked copy when there is one), views included.
void get_rows(const CpuWeight& w, const int32_t* ids, int n, float* out);

}  // namespace llmsvc::hal::cpu
