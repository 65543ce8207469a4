// SPDX-License-Identifier: Apache-2.0
// Matmul orchestration: weight preparation, activation quantization and the split of the
// work over the thread pool (one parallel region per call).
#include "hal/cpu/quant/matmul.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <string>

#include "hal/cpu/quant/act_quant.h"
#include "hal/host/dequantize.h"
#include "hal/cpu/quant/kpanel_kernels.h"
#include "hal/cpu/quant/panel_kernels.h"
#include "hal/cpu/quant/row_kernels.h"

namespace llmsvc::hal::cpu {
namespace {

// Below this many activations per call every thread quantizes the input itself: cheaper
// than the barrier that sharing the work would need (decode steps).
constexpr int64_t kPrivateQuantLimit = 8192;
constexpr int64_t kInlineMacs = 64 * 1024;  // below this many multiply-adds one thread wins

enum class ActKind { none, q8, q8k };

struct ActSpec {
  ActKind kind = ActKind::none;
  int32_t zero_point = 0;
  bool operator==(const ActSpec&) const = default;
};

ActSpec act_spec(const CpuWeight& w) {
  if (const PanelFormat* f = w.panel_format()) return {ActKind::q8, f->zero_point};
  if (w.kpanel_format() != nullptr) return {ActKind::q8k, 0};
  return {};
}

size_t act_bytes(const ActSpec& s, int64_t cols, int n_tokens) {
  switch (s.kind) {
    case ActKind::q8: return (ActQ8::bytes(cols, n_tokens) + 63) & ~size_t{63};
    case ActKind::q8k: return (ActQ8K::bytes(cols, n_tokens) + 63) & ~size_t{63};
    case ActKind::none: break;
  }
  return 0;
}

constexpr int kMaxSpecs = 6;

// Everything a region needs, behind one pointer (so the std::function does not allocate).
struct Job {
  const CpuWeight* const* ws;
  float* const* ys;
  int n_weights;
  const float* x;
  int n_tokens;
  int64_t cols;
  ActSpec specs[kMaxSpecs];
  size_t spec_offset[kMaxSpecs];
  size_t spec_bytes[kMaxSpecs];
  int n_specs;
  bool private_quant;
  size_t kernel_offset;   // per-thread kernel scratch: kernel_offset + ith * kernel_bytes
  size_t kernel_bytes;
  std::span<const CpuLoraBranch> lora;
  size_t lora_offset;     // per-thread branch scratch (A x, then B's rows): lora_offset + ith * lora_bytes
  size_t lora_bytes;
  int64_t lora_rank;      // the branches' largest rank
  uint8_t* mem;
  ThreadPool* pool;
};

int spec_index(const Job& j, const ActSpec& s) {
  for (int i = 0; i < j.n_specs; ++i) {
    if (j.specs[i] == s) return i;
  }
  return -1;
}

uint8_t* spec_mem(const Job& j, int si, int ith) {
  return j.mem + j.spec_offset[si] + (j.private_quant ? static_cast<size_t>(ith) * j.spec_bytes[si] : 0);
}

// The rows of weight w that thread ith of nth computes (whole panels for the panel layouts).
std::pair<int64_t, int64_t> thread_rows(const CpuWeight& w, int ith, int nth) {
  const int64_t rows = w.ref().rows;
  if (w.panel_format() == nullptr && w.kpanel_format() == nullptr) return ThreadPool::split(rows, ith, nth);
  const auto [p0, p1] = ThreadPool::split((rows + kPanelRows - 1) / kPanelRows, ith, nth);
  return {std::min(rows, p0 * kPanelRows), std::min(rows, p1 * kPanelRows)};
}

RowGemmArgs row_args(const CpuWeight& w, const float* x, int n_tokens, float* y, int64_t r0, int64_t r1) {
  const WeightRef& ref = w.ref();
  RowGemmArgs g;
  g.type = ref.type;
  g.w = static_cast<const uint8_t*>(ref.data);
  g.row_bytes = ref.row_bytes;
  g.cols = ref.cols;
  g.rows = ref.rows;
  g.r_begin = r0;
  g.r_end = r1;
  g.x = x;
  g.n_tokens = n_tokens;
  g.y = y;
  g.ldy = ref.rows;
  g.kmajor = w.kmajor();
  return g;
}

// Thread ith's share of the LoRA branches: its rows of each branch's output.
void run_lora(const Job& j, int ith, int nth) {
  float* mid = reinterpret_cast<float*>(j.mem + j.lora_offset + static_cast<size_t>(ith) * j.lora_bytes);
  float* part = mid + j.n_tokens * j.lora_rank;
  for (const CpuLoraBranch& br : j.lora) {
    const auto [r0, r1] = thread_rows(*j.ws[br.out], ith, nth);
    if (r0 >= r1) continue;
    // B's rows are its base's (Forward checks it); y is laid out by the base's.
    const int64_t rank = br.a->ref().rows, rows = br.b->ref().rows, ldy = j.ws[br.out]->ref().rows;
    if (rows != ldy) continue;  // not a branch of this output: nothing sensible to add
    row_gemm(row_args(*br.a, j.x, j.n_tokens, mid, 0, rank));  // every thread: cheaper than a barrier
    row_gemm(row_args(*br.b, mid, j.n_tokens, part, r0, r1));
    float* y = j.ys[br.out];
    for (int t = 0; t < j.n_tokens; ++t) {
      const float* p = part + t * rows;
      float* yt = y + t * ldy;
      for (int64_t r = r0; r < r1; ++r) {
        const float scaled = p[r] * br.scale;  // the scale op's rounding, then the add's
        yt[r] += scaled;
      }
    }
  }
}

void run_job(const Job& j, int ith, int nth) {
  // 1. Quantize the input once per activation format.
  for (int si = 0; si < j.n_specs; ++si) {
    uint8_t* mem = spec_mem(j, si, ith);
    if (j.specs[si].kind == ActKind::q8) {
      const ActQ8 a = ActQ8::in(mem, j.cols, j.n_tokens);
      const int64_t nblk = j.n_tokens * (j.cols / 32);
      // Storage order, in whole blocks of a token group (16 tokens x 32 bytes).
      const auto [b0, b1] =
          j.private_quant ? std::pair<int64_t, int64_t>{0, nblk} : ThreadPool::split(nblk, ith, nth, kTokenGroup);
      quantize_q8(j.x, a, b0, b1, j.specs[si].zero_point);
    } else {
      const ActQ8K a = ActQ8K::in(mem, j.cols, j.n_tokens);
      const auto [t0, t1] =
          j.private_quant ? std::pair<int64_t, int64_t>{0, j.n_tokens} : ThreadPool::split(j.n_tokens, ith, nth, kTokenGroup);
      quantize_q8k(j.x, a, static_cast<int>(t0), static_cast<int>(t1));
    }
  }
  if (j.n_specs > 0 && !j.private_quant) j.pool->barrier();

  // 2. Each thread computes its share of the rows of every weight.
  for (int i = 0; i < j.n_weights; ++i) {
    const CpuWeight& w = *j.ws[i];
    const WeightRef& ref = w.ref();
    if (const PanelFormat* f = w.panel_format()) {
      const ActQ8 a = ActQ8::in(spec_mem(j, spec_index(j, act_spec(w)), ith), j.cols, j.n_tokens);
      const int64_t n_panels = (ref.rows + kPanelRows - 1) / kPanelRows;
      const auto [p0, p1] = ThreadPool::split(n_panels, ith, nth);
      PanelGemmArgs g;
      g.fmt = f;
      g.panels = w.panels();
      g.cols = ref.cols;
      g.layout_cols = w.layout_cols();
      g.rows = ref.rows;
      g.p_begin = p0;
      g.p_end = p1;
      g.x = &a;
      g.t_begin = 0;
      g.t_end = j.n_tokens;
      g.y = j.ys[i];
      g.ldy = ref.rows;
      g.unpacked = j.kernel_bytes ? j.mem + j.kernel_offset + static_cast<size_t>(ith) * j.kernel_bytes : nullptr;
      if (p0 < p1) panel_gemm(g);
    } else if (const KPanelFormat* kf = w.kpanel_format()) {
      const ActQ8K a = ActQ8K::in(spec_mem(j, spec_index(j, act_spec(w)), ith), j.cols, j.n_tokens);
      const int64_t n_panels = (ref.rows + kPanelRows - 1) / kPanelRows;
      const auto [p0, p1] = ThreadPool::split(n_panels, ith, nth);
      KPanelGemmArgs g;
      g.fmt = kf;
      g.panels = w.panels();
      g.cols = ref.cols;
      g.layout_cols = w.layout_cols();
      g.rows = ref.rows;
      g.p_begin = p0;
      g.p_end = p1;
      g.x = &a;
      g.t_begin = 0;
      g.t_end = j.n_tokens;
      g.y = j.ys[i];
      g.ldy = ref.rows;
      g.unpacked = j.kernel_bytes ? j.mem + j.kernel_offset + static_cast<size_t>(ith) * j.kernel_bytes : nullptr;
      if (p0 < p1) kpanel_gemm(g);
    } else {
      // Row-major: a view's ref() already has the prefix's rows and cols and the full stride.
      const auto [r0, r1] = thread_rows(w, ith, nth);
      if (r0 < r1) row_gemm(row_args(w, j.x, j.n_tokens, j.ys[i], r0, r1));
    }
  }
  if (!j.lora.empty()) run_lora(j, ith, nth);
}

}  // namespace

void* MatmulScratch::reserve(size_t bytes) {
  if (buf_.size() < bytes && !buf_.allocate(bytes + bytes / 4)) return nullptr;
  return buf_.data();
}

Result<std::unique_ptr<CpuWeight>> prepare_cpu_weight(const WeightRef& w) {
  if (!is_supported_weight_type(static_cast<uint32_t>(w.type))) {
    return Status(Code::unsupported, "weight type " + std::to_string(static_cast<uint32_t>(w.type)) + " not supported");
  }
  if (w.rows <= 0 || w.cols <= 0 || w.data == nullptr) return Status(Code::invalid_argument, "empty weight");
  if (w.cols % block_elems(w.type) != 0) {
    return Status(Code::invalid_argument, "weight cols " + std::to_string(w.cols) + " not a multiple of the block");
  }
  if (w.row_bytes < row_bytes(w.type, w.cols)) return Status(Code::invalid_argument, "weight row_bytes too small");
  if (w.type != WeightType::F32 && (reinterpret_cast<uintptr_t>(w.data) % 2 != 0 || w.row_bytes % 2 != 0)) {
    return Status(Code::invalid_argument, "weight data not 2-byte aligned");
  }
  std::unique_ptr<CpuWeight> cw(new CpuWeight());  // private constructor: make_unique cannot reach it
  cw->ref_ = w;
  cw->layout_cols_ = w.cols;
  if (const PanelFormat* f = panel_format(w.type)) {
    const int64_t n_panels = (w.rows + kPanelRows - 1) / kPanelRows;
    if (!cw->packed_.allocate(static_cast<size_t>(n_panels) * f->panel_bytes(w.cols / 32))) {
      return Status(Code::out_of_memory, "cannot allocate repacked weight");
    }
    pack_panels(*f, w.type, w.data, w.row_bytes, w.rows, w.cols, cw->packed_.data(), 0, n_panels);
    cw->fmt_ = f;
    cw->panels_ = cw->packed_.data();
  } else if (const KPanelFormat* kf = kpanel_format(w.type)) {
    const int64_t n_panels = (w.rows + kPanelRows - 1) / kPanelRows;
    if (!cw->packed_.allocate(static_cast<size_t>(n_panels) * kf->panel_bytes(w.cols / 256))) {
      return Status(Code::out_of_memory, "cannot allocate repacked weight");
    }
    pack_kpanels(*kf, w.type, w.data, w.row_bytes, w.rows, w.cols, cw->packed_.data(), 0, n_panels);
    cw->kfmt_ = kf;
    cw->panels_ = cw->packed_.data();
  } else if (wants_kmajor(w.type, w.rows, w.cols)) {
    if (!cw->kmajor_buf_.allocate(kmajor_floats(w.rows, w.cols) * sizeof(float)))
      return Status(Code::out_of_memory, "cannot allocate repacked weight");
    cw->kmajor_ = reinterpret_cast<const float*>(cw->kmajor_buf_.data());
    pack_kmajor(w.type, static_cast<const uint8_t*>(w.data), w.row_bytes, w.rows, w.cols,
                reinterpret_cast<float*>(cw->kmajor_buf_.data()));
  }
  return cw;
}

Result<std::unique_ptr<CpuWeight>> slice_cpu_weight(const CpuWeight& w, int64_t rows, int64_t cols) {
  const WeightRef& ref = w.ref();
  LLMSVC_RETURN_IF_ERROR(Device::check_slice(ref, rows, cols));
  std::unique_ptr<CpuWeight> v(new CpuWeight());
  v->ref_ = ref;
  v->ref_.rows = rows;
  v->ref_.cols = cols;  // data and row_bytes (the stride) stay w's
  v->fmt_ = w.fmt_;
  v->kfmt_ = w.kfmt_;
  // Panels hold 16 rows each at a stride set by the packed columns, and every plane is indexed
  // from its start, so a prefix starts where w does: fewer rows written, fewer blocks summed.
  v->panels_ = w.panels_;
  v->layout_cols_ = w.layout_cols();  // not read: a view follows its base's (layout_cols())
  v->kmajor_ = cols == ref.cols ? w.kmajor_ : nullptr;  // panels hold every column of their rows
  v->base_ = w.base_ != nullptr ? w.base_ : &w;
  return v;
}

namespace {

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL and pages fault in on write
#endif

size_t page_bytes() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

// Offsets within a buffer at `base`, rounded to whole pages of the address space.
size_t page_up(uintptr_t base, size_t off) {
  const size_t page = page_bytes();
  return (base + off + page - 1) / page * page - base;
}
size_t page_down(uintptr_t base, size_t off) { return (base + off) / page_bytes() * page_bytes() - base; }

// Bytes per block (K-quant superblock) of each plane of a panel, in layout order (panel.h,
// kpanel.h); 0 for a plane the type does not have.
std::array<size_t, 6> plane_block_bytes(const PanelFormat* f, const KPanelFormat* kf) {
  if (f != nullptr) return {size_t(f->qs_bytes), size_t(f->qh_bytes), 32, f->has_min ? 32u : 0u, 0, 0};
  return {2048, size_t(kf->qh_bytes), size_t(kf->sc_bytes), kf->has_min ? 128u : 0u, 32, kf->has_min ? 32u : 0u};
}

}  // namespace

size_t CpuWeight::panel_stride(int64_t cols) const {
  if (cols <= 0) cols = layout_cols_;
  return fmt_ != nullptr ? fmt_->panel_bytes(cols / 32) : kfmt_->panel_bytes(cols / 256);
}

void CpuWeight::pack_rows_panels(uint8_t* dst, int64_t p_begin, int64_t p_end, const void* from, int64_t cols) const {
  // Panel p of the weight is panel 0 of the weight that starts at its first row.
  const uint8_t* src = static_cast<const uint8_t*>(from != nullptr ? from : ref_.data) +
                       static_cast<size_t>(p_begin * kPanelRows) * ref_.row_bytes;
  const int64_t rows = ref_.rows - p_begin * kPanelRows;
  if (cols <= 0) cols = ref_.cols;
  if (fmt_ != nullptr) {
    pack_panels(*fmt_, ref_.type, src, ref_.row_bytes, rows, cols, dst, 0, p_end - p_begin);
  } else {
    pack_kpanels(*kfmt_, ref_.type, src, ref_.row_bytes, rows, cols, dst, 0, p_end - p_begin);
  }
}

void CpuWeight::pack_panels_in_place(int64_t p_begin, int64_t p_end, int64_t cols, ThreadPool* pool, const void* from) {
  const size_t pb = panel_stride(cols);
  auto pack = [&](int64_t p0, int64_t p1) {
    if (p1 > p0) pack_rows_panels(packed_.data() + static_cast<size_t>(p0) * pb, p0, p1, from, cols);
  };
  if (pool != nullptr && pool->size() > 1 && p_end - p_begin >= 2 * pool->size()) {
    pool->run([&](int ith, int nth) {
      const auto [s, t] = ThreadPool::split(p_end - p_begin, ith, nth);
      pack(p_begin + s, p_begin + t);
    });
  } else {
    pack(p_begin, p_end);
  }
}

size_t CpuWeight::release_rows(int64_t keep_rows) {
  if (is_view() || !repacked() || packed_.size() == 0 || cols_released()) return 0;
  keep_rows = std::max<int64_t>(keep_rows, 0);
  if (keep_rows >= ref_.rows) return 0;
  const bool released = released_end_ > released_begin_;
  if (released && keep_rows >= resident_rows_) return 0;  // given back from an earlier row already
  const size_t pb = panel_stride(), page = page_bytes();
  const int64_t n_panels = (ref_.rows + kPanelRows - 1) / kPanelRows;
  const int64_t first = (keep_rows + kPanelRows - 1) / kPanelRows;  // the first panel of later rows only
  const uintptr_t base = reinterpret_cast<uintptr_t>(packed_.data());
  const uintptr_t b = (base + static_cast<size_t>(first) * pb + page - 1) / page * page;
  const uintptr_t e = released ? base + released_begin_ : (base + static_cast<size_t>(n_panels) * pb) / page * page;
  if (e <= b) return 0;
  if (::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED) != 0) return 0;  // nothing given back
  released_begin_ = b - base;
  if (!released) released_end_ = e - base;
  resident_rows_ = std::min<int64_t>(ref_.rows, static_cast<int64_t>(released_begin_ / pb) * kPanelRows);
  return e - b;
}

Result<uint64_t> CpuWeight::restore_rows(int64_t rows, ThreadPool* pool, const void* from) {
  if (released_end_ <= released_begin_ || cols_released() || rows <= resident_rows_) return uint64_t{0};
  uint8_t* base = packed_.data();
  const size_t pb = panel_stride(), page = page_bytes();
  const size_t b = released_begin_;
  size_t e = released_end_;  // restored up to here: every released page, or those of panels before `rows`'s end
  if (rows < ref_.rows) {
    const int64_t panels = (rows + kPanelRows - 1) / kPanelRows;
    const uintptr_t a = reinterpret_cast<uintptr_t>(base);
    e = std::min(e, static_cast<size_t>((a + static_cast<size_t>(panels) * pb + page - 1) / page * page - a));
  }
  // The pages first, so that a system without them answers here rather than on a later write.
  if (::madvise(base + b, e - b, MADV_POPULATE_WRITE) != 0 && (errno == ENOMEM || errno == EFAULT)) {
    return Status(Code::out_of_memory, "cannot take back the memory of a weight's released rows");
  }
  const int64_t n_panels = (ref_.rows + kPanelRows - 1) / kPanelRows;
  const int64_t p_first = static_cast<int64_t>(b / pb);
  const int64_t p_end = std::min(n_panels, static_cast<int64_t>((e + pb - 1) / pb));
  // Whole panels inside the range are packed in place (on the pool's threads), the one or two
  // that straddle its ends aside, and only their released part copied.
  const int64_t in_first = static_cast<int64_t>((b + pb - 1) / pb), in_end = std::min(p_end, static_cast<int64_t>(e / pb));
  if (in_end > in_first) pack_panels_in_place(in_first, in_end, ref_.cols, pool, from);
  std::vector<uint8_t> edge;
  for (int64_t p = p_first; p < p_end; ++p) {
    const size_t pb0 = static_cast<size_t>(p) * pb, pe0 = pb0 + pb;
    if (p >= in_first && p < in_end) continue;
    edge.resize(pb);
    pack_rows_panels(edge.data(), p, p + 1, from);
    const size_t lo = std::max(pb0, b), hi = std::min(pe0, e);
    std::memcpy(base + lo, edge.data() + (lo - pb0), hi - lo);
  }
  if (e >= released_end_) {
    released_begin_ = released_end_ = 0;
  } else {
    released_begin_ = e;
    resident_rows_ = std::min<int64_t>(ref_.rows, static_cast<int64_t>(released_begin_ / pb) * kPanelRows);
  }
  return static_cast<uint64_t>(e - b);
}

int64_t CpuWeight::whole_blocks(int64_t cols) const {
  const int64_t block = fmt_ != nullptr ? 32 : 256;
  return std::clamp<int64_t>((cols + block - 1) / block * block, block, ref_.cols);
}

size_t CpuWeight::release_cols(int64_t keep_cols) {
  if (is_view() || !repacked() || packed_.size() == 0) return 0;
  if (released_end_ > released_begin_ && !cols_released()) return 0;  // its rows are released
  keep_cols = whole_blocks(keep_cols);
  if (keep_cols >= layout_cols_) return 0;
  const int64_t block = fmt_ != nullptr ? 32 : 256;
  const int64_t n_panels = (ref_.rows + kPanelRows - 1) / kPanelRows;
  const uintptr_t a = reinterpret_cast<uintptr_t>(packed_.data());
  const size_t b = page_up(a, static_cast<size_t>(n_panels) * panel_stride(keep_cols));
  const size_t e = page_down(a, static_cast<size_t>(n_panels) * panel_stride(ref_.cols));
  // Pages from here on are held now: those before the released ones (all, when none are).
  const size_t held_end = released_end_ > released_begin_ ? released_begin_ : e;
  if (held_end <= b) return 0;  // less than a page would go back: the layout stays
  // Each panel's planes moved down to the layout for keep_cols, in order: every destination
  // lies at or before its source and after everything already moved.
  uint8_t* d = packed_.data();
  const int64_t old_nb = layout_cols_ / block, new_nb = keep_cols / block;
  const size_t old_pb = panel_stride(), new_pb = panel_stride(keep_cols);
  for (int64_t p = 0; p < n_panels; ++p) {
    size_t src = static_cast<size_t>(p) * old_pb, dst = static_cast<size_t>(p) * new_pb;
    for (size_t bytes : plane_block_bytes(fmt_, kfmt_)) {
      if (bytes == 0) continue;
      if (dst != src) std::memmove(d + dst, d + src, static_cast<size_t>(new_nb) * bytes);
      src += static_cast<size_t>(old_nb) * bytes;
      dst += static_cast<size_t>(new_nb) * bytes;
    }
  }
  layout_cols_ = keep_cols;
  if (::madvise(d + b, e - b, MADV_DONTNEED) != 0) return 0;  // laid out smaller, nothing given back
  released_begin_ = b;
  released_end_ = e;
  return held_end - b;
}

Result<uint64_t> CpuWeight::restore_cols(int64_t cols, ThreadPool* pool, const void* from) {
  if (is_view() || !cols_released()) return uint64_t{0};
  cols = whole_blocks(cols);
  if (cols <= layout_cols_) return uint64_t{0};
  const int64_t n_panels = (ref_.rows + kPanelRows - 1) / kPanelRows;
  uint8_t* base = packed_.data();
  const bool released = released_end_ > released_begin_;
  const size_t b = released_begin_, e = released_end_;
  const size_t need =
      released ? std::min(e, page_up(reinterpret_cast<uintptr_t>(base), static_cast<size_t>(n_panels) * panel_stride(cols)))
               : 0;
  if (released && need > b && ::madvise(base + b, need - b, MADV_POPULATE_WRITE) != 0 &&
      (errno == ENOMEM || errno == EFAULT)) {
    return Status(Code::out_of_memory, "cannot take back the memory of a weight's released columns");
  }
  // Every panel moves: all of them repacked at the layout for `cols`, straight from the bytes.
  pack_panels_in_place(0, n_panels, cols, pool, from);
  layout_cols_ = cols;
  if (released && need < e) {
    released_begin_ = need;
  } else {
    released_begin_ = released_end_ = 0;
  }
  return static_cast<uint64_t>(released && need > b ? need - b : 0);
}

void matmul_multi(const CpuWeight* const* ws, float* const* ys, int n_weights, const float* x, int n_tokens,
                  ThreadPool& pool, MatmulScratch& scratch, std::span<const CpuLoraBranch> lora) {
  if (n_weights <= 0 || n_tokens <= 0) return;
#ifndef NDEBUG
  for (int i = 0; i < n_weights; ++i) {
    const CpuWeight* owner = ws[i]->is_view() ? ws[i]->view_of() : ws[i];
    assert(ws[i]->ref().rows <= owner->resident_rows() && "matmul on released rows");
    assert(ws[i]->ref().cols <= owner->resident_cols() && "matmul on released columns");
  }
#endif
  Job j{};
  j.ws = ws;
  j.ys = ys;
  j.n_weights = n_weights;
  j.x = x;
  j.n_tokens = n_tokens;
  j.cols = ws[0]->ref().cols;
  j.pool = &pool;
  // Waking the team costs microseconds: a product this small (a LoRA branch's at decode) runs
  // on the calling thread alone. Every row is computed the same way whatever the split.
  int64_t macs = 0;
  for (int i = 0; i < n_weights; ++i) macs += ws[i]->ref().rows * j.cols * n_tokens;
  j.lora = lora;
  const bool inline_run = macs <= kInlineMacs;
  j.private_quant = inline_run || pool.size() == 1 || static_cast<int64_t>(n_tokens) * j.cols <= kPrivateQuantLimit;
  const int copies = j.private_quant ? pool.size() : 1;
  size_t total = 0;
  for (int i = 0; i < n_weights; ++i) {
    const ActSpec s = act_spec(*ws[i]);
    if (s.kind == ActKind::none || spec_index(j, s) >= 0 || j.n_specs == kMaxSpecs) continue;
    j.specs[j.n_specs] = s;
    j.spec_bytes[j.n_specs] = act_bytes(s, j.cols, n_tokens);
    j.spec_offset[j.n_specs] = total;
    total += j.spec_bytes[j.n_specs] * static_cast<size_t>(copies);
    ++j.n_specs;
  }
  // Per-thread kernel scratch: several tokens' panel unpacking, for the panel kinds present
  // (float weights may have fewer than 32 columns, which panel_chunk cannot size).
  size_t kb = 0;
  for (int si = 0; si < j.n_specs && n_tokens > 1; ++si) {
    kb = std::max(kb, j.specs[si].kind == ActKind::q8 ? panel_unpack_bytes(j.cols) : kpanel_unpack_bytes(j.cols));
  }
  if (kb > 0) {
    j.kernel_bytes = (kb + 63) & ~size_t{63};
    j.kernel_offset = total;
    total += j.kernel_bytes * static_cast<size_t>(pool.size());
  }
  if (!lora.empty()) {
    // Per thread: A x for every token, then the branch's rows for every token.
    int64_t rank = 0, rows = 0;
    for (const CpuLoraBranch& br : lora) rank = std::max(rank, br.a->ref().rows), rows = std::max(rows, br.b->ref().rows);
    j.lora_rank = rank;
    j.lora_bytes = (static_cast<size_t>(n_tokens * (rank + rows)) * sizeof(float) + 63) & ~size_t{63};
    j.lora_offset = total;
    total += j.lora_bytes * static_cast<size_t>(pool.size());
  }
  j.mem = static_cast<uint8_t*>(scratch.reserve(total));
  if (total > 0 && j.mem == nullptr) return;  // out of memory: nothing sensible to compute
  if (inline_run) return run_job(j, 0, 1);
  const Job* jp = &j;
  pool.run([jp](int ith, int nth) { run_job(*jp, ith, nth); });
}

void matmul(const CpuWeight& w, const float* x, int n_tokens, float* y, ThreadPool& pool, MatmulScratch& scratch) {
  const CpuWeight* ws[1] = {&w};
  float* ys[1] = {y};
  matmul_multi(ws, ys, 1, x, n_tokens, pool, scratch);
}

void get_rows(const WeightRef& w, const int32_t* ids, int n, float* out) {
  for (int i = 0; i < n; ++i) {
    dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + static_cast<size_t>(ids[i]) * w.row_bytes,
                   out + static_cast<int64_t>(i) * w.cols, w.cols);
  }
}

void get_rows(const CpuWeight& w, const int32_t* ids, int n, float* out) {
  const int64_t cols = w.ref().cols, lc = w.layout_cols();
  if (const PanelFormat* f = w.panel_format()) {
    for (int i = 0; i < n; ++i) unpack_panel_row(*f, w.panels(), cols, ids[i], out + static_cast<int64_t>(i) * cols, lc);
  } else if (const KPanelFormat* kf = w.kpanel_format()) {
    for (int i = 0; i < n; ++i) unpack_kpanel_row(*kf, w.panels(), cols, ids[i], out + static_cast<int64_t>(i) * cols, lc);
  } else {
    get_rows(w.ref(), ids, n, out);
  }
}

}  // namespace llmsvc::hal::cpu
