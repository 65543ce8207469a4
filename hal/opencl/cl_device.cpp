// SPDX-License-Identifier: Apache-2.0
// ClDevice: the view-driven path (begin / run / end) over ClMatmul and ClOps, and the staged
// host-pointer ops.
#include "hal/opencl/cl_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "hal/opencl/cl_pool.h"

namespace llmsvc::hal::opencl {
namespace {

constexpr uint64_t kDefaultKvBytes = uint64_t(1) << 30;

// A weight uploaded once and shared by every PreparedWeight made of the same tensor.
class SharedWeight final : public PreparedWeight {
 public:
  explicit SharedWeight(std::shared_ptr<ClWeight> w) : w_(std::move(w)) {}
  const WeightRef& ref() const override { return w_->ref(); }
  bool owns_copy() const override { return true; }
  int64_t resident_rows() const override { return w_->resident_rows(); }
  int64_t resident_cols() const override { return w_->resident_cols(); }
  const ClWeight& weight() const { return *w_; }

 private:
  std::shared_ptr<ClWeight> w_;
};

}  // namespace

Result<std::unique_ptr<ClDevice>> ClDevice::open(std::string_view spec, const ClDeviceOptions& options) {
  auto info = select_cl_device(spec);
  if (!info.ok()) return info.status();
  std::unique_ptr<ClDevice> d(new ClDevice());
  // LLMSVC_CL_CACHE_DIR names one place for every process's compiled programs (a system image
  // that ships them, a test run that builds them once); else the caller's (the state
  // directory's cache/opencl). Entries are keyed by device, driver and source.
  const char* shared = std::getenv("LLMSVC_CL_CACHE_DIR");
  const std::string cache = shared && *shared ? shared : options.cache_dir;
  auto ctx = ClDeviceContext::open(*info, ClOptions{cache, options.memory_bytes});
  if (!ctx.ok()) return ctx.status();
  d->ctx_ = std::move(ctx).value();
  uint64_t kv = options.kv_bytes ? options.kv_bytes : std::min(kDefaultKvBytes, info->global_memory / 4);
  if (info->max_alloc) kv = std::min(kv, info->max_alloc);
  auto arena = ClArenaPool::create(d->ctx_->context(), info->device, d->ctx_->pool().space() + "/kv", kv);
  if (!arena.ok()) return arena.status();
  d->kv_ = std::move(arena).value();
  auto mm = ClMatmul::create(*d->ctx_);
  if (!mm.ok()) return mm.status();
  d->matmul_ = std::move(mm).value();
  auto ops = ClOps::create(*d->ctx_);
  if (!ops.ok()) return ops.status();
  d->ops_ = std::move(ops).value();
  Capabilities& c = d->caps_;
  c.shares_host_memory = false;
  c.memory_bytes = d->ctx_->pool().capacity();
  c.ops = kAllOps;
  // Rough figures for placement's estimate; a GPU wins every op it is offered against the CPU.
  c.matmul_gflops = info->is_gpu ? 2000.0 * info->compute_units / 16 : 10.0 * info->compute_units;
  c.transfer_gbps = info->is_gpu ? 12 : 20;
  // A GPU's driver talks to its device files by ioctl (NVIDIA's allocates lazily, at a batch's
  // first launch); an OpenCL implementation on the CPU (PoCL) does not.
  c.driver_ioctl = info->is_gpu;
  // 7B prefill at 1,024 tokens on an H100: 3,980 tok/s in micro-batches of 256, 5,799 of 512,
  // no more at 1,024 or 2,048 (llama.cpp's default micro-batch is 512 too).
  if (info->is_gpu) c.batch_tokens = 512;
  c.slices_weights = true;
  return d;
}

ClDevice::~ClDevice() {
  if (ctx_) ctx_->queue().finish();
}

std::string ClDevice::name() const { return "opencl (" + info().description() + ")"; }

std::shared_ptr<ClWeight> ClDevice::find_uploaded(const WeightRef& w) {
  const auto it = uploaded_.find(w.data);
  if (it == uploaded_.end()) return nullptr;
  std::shared_ptr<ClWeight> up = it->second.lock();
  if (!up) uploaded_.erase(it);  // its model is gone: the address may be another file's now
  if (!up || up->ref().type != w.type || up->ref().rows != w.rows || up->ref().cols != w.cols) return nullptr;
  return up;
}

Result<std::unique_ptr<PreparedWeight>> ClDevice::prepare_weight(const WeightRef& w) {
  std::shared_ptr<ClWeight> up = find_uploaded(w);
  if (!up) {
    auto made = matmul_->upload(w);
    if (!made.ok()) return made.status();
    up = std::move(made).value();
    uploaded_.insert_or_assign(w.data, up);
  }
  return std::unique_ptr<PreparedWeight>(std::make_unique<SharedWeight>(std::move(up)));
}

const ClWeight& ClDevice::weight(const PreparedWeight& w) const {
  if (const auto* s = dynamic_cast<const SharedWeight*>(&w)) return s->weight();
  return dynamic_cast<const ClWeight&>(w);
}

const ClWeight* ClDevice::uploaded(const PreparedWeight& w) {
  if (const auto* s = dynamic_cast<const SharedWeight*>(&w)) return &s->weight();
  return dynamic_cast<const ClWeight*>(&w);
}

Result<std::unique_ptr<PreparedWeight>> ClDevice::slice_weight(const PreparedWeight& w, int64_t rows, int64_t cols) {
  const ClWeight* cw = uploaded(w);
  if (!cw) return Status(Code::invalid_argument, name() + " cannot slice a weight it did not upload as a matrix");
  auto v = ClMatmul::slice(*cw, rows, cols);
  if (!v.ok()) return v.status();
  return std::unique_ptr<PreparedWeight>(std::move(v).value());
}

// A weight this device did not upload (none of its own memory) gives back and takes back nothing.
uint64_t ClDevice::release_rows(PreparedWeight& w, int64_t keep_rows) {
  ClWeight* cw = uploaded(w);
  return cw ? matmul_->release_rows(*cw, keep_rows) : 0;
}

uint64_t ClDevice::release_cols(PreparedWeight& w, int64_t keep_cols) {
  ClWeight* cw = uploaded(w);
  return cw ? matmul_->release_cols(*cw, keep_cols) : 0;
}

Result<uint64_t> ClDevice::restore_rows(PreparedWeight& w, int64_t rows, const void* from) {
  ClWeight* cw = uploaded(w);
  return cw ? matmul_->restore_rows(*cw, rows, from) : Result<uint64_t>(uint64_t{0});
}

Result<uint64_t> ClDevice::restore_cols(PreparedWeight& w, int64_t cols, const void* from) {
  ClWeight* cw = uploaded(w);
  return cw ? matmul_->restore_cols(*cw, cols, from) : Result<uint64_t>(uint64_t{0});
}

ClView ClDevice::vector(const PreparedWeight* w) const {
  // An F32 1 x n weight's floats start its part 0 (the f32 layout: rows of floats, zero-padded).
  const ClWeight* cw = w ? uploaded(*w) : nullptr;
  return cw && cw->ref().type == WeightType::F32 ? cw->floats() : ClView{};
}

ClView ClDevice::view(const BufferView& v) {
  if (!v.buffer) return {};
  return {ClPool::mem(*v.buffer), v.buffer->offset() + v.offset};
}

Result<ClView> ClDevice::scratch(Buffer& slot, size_t bytes) {
  bytes = std::max<size_t>(bytes, 256);
  if (!slot || slot.size() < bytes) {
    slot.reset();
    auto b = ctx_->pool().alloc(bytes + bytes / 2);  // room to grow without a new buffer each time
    if (!b.ok()) return b.status();
    slot = std::move(b).value();
  }
  return ClView{ClPool::mem(slot), slot.offset()};
}

Status ClDevice::write(ClView dst, const void* src, size_t bytes, bool blocking) {
  if (bytes == 0) return Status::Ok();
  const cl_int err = clEnqueueWriteBuffer(q(), dst.mem, blocking ? CL_TRUE : CL_FALSE, dst.offset, bytes, src, 0,
                                          nullptr, nullptr);
  return err == CL_SUCCESS ? Status::Ok() : cl_status(err, "writing " + std::to_string(bytes) + " bytes to the device");
}

Status ClDevice::read(ClView src, void* dst, size_t bytes, bool blocking) {
  if (bytes == 0) return Status::Ok();
  const cl_int err =
      clEnqueueReadBuffer(q(), src.mem, blocking ? CL_TRUE : CL_FALSE, src.offset, bytes, dst, 0, nullptr, nullptr);
  return err == CL_SUCCESS ? Status::Ok() : cl_status(err, "reading " + std::to_string(bytes) + " bytes from the device");
}

Status ClDevice::begin(const BatchBinding& b) {
  batch_copy_ = b;
  batch_ = &batch_copy_;
  n_held_ = 0;
  for (Angles& a : angles_) a.current = false;
  failed_ = Status::Ok();
  logits_rows_ = 0;
  // Ids, positions and the chunk table go in without waiting: their host memory stays put
  // until end() (the caller's ids, its positions, this table).
  const size_t n = static_cast<size_t>(b.n);
  auto ids = scratch(ids_, n * sizeof(int32_t));
  if (!ids.ok()) return ids.status();
  auto pos = scratch(positions_, n * sizeof(int32_t));
  if (!pos.ok()) return pos.status();
  LLMSVC_RETURN_IF_ERROR(write(*ids, b.ids, n * sizeof(int32_t), false));
  LLMSVC_RETURN_IF_ERROR(write(*pos, b.positions, n * sizeof(int32_t), false));
  const size_t n_chunks = b.chunk_memory.size();
  table_host_.assign(n_chunks, 0);
  kv_bound_ = true;  // false when the chunks are elsewhere (attention placed on another device)
  bool all_f16 = true;
  for (size_t c = 0; c < n_chunks; ++c) {
    const Buffer* m = b.chunk_memory[c];
    if (!m) continue;  // not resident: outside what this batch reads
    if (m->handle() != kv_->arena()) kv_bound_ = false;
    table_host_[c] = kv_table_entry(m->offset(), b.chunk_format[c]);
    all_f16 = all_f16 && b.chunk_format[c] == KvFormat::f16;
  }
  auto table = scratch(table_, std::max<size_t>(n_chunks, 1) * sizeof(uint64_t));
  if (!table.ok()) return table.status();
  LLMSVC_RETURN_IF_ERROR(write(*table, table_host_.data(), n_chunks * sizeof(uint64_t), false));
  kv_bind_ = ClKv{kv_->arena(), *table, static_cast<int>(n_chunks), b.chunk_tokens, b.n_layer, b.n_head_kv, b.head_dim,
                  all_f16};
  if (!b.chunk_mass.empty()) {
    const size_t bytes = n_chunks * static_cast<size_t>(b.chunk_tokens) * sizeof(float);
    auto m = scratch(mass_, bytes);
    if (!m.ok()) return m.status();
    const float zero = 0;
    const cl_int err = clEnqueueFillBuffer(q(), m->mem, &zero, sizeof zero, m->offset, bytes, 0, nullptr, nullptr);
    if (err != CL_SUCCESS) return cl_status(err, "clearing the attention mass");
  }
  return Status::Ok();
}

namespace {

bool same_view(const BufferView& a, const BufferView& b) { return a.buffer == b.buffer && a.offset == b.offset; }

// Whether one launch may write `out` while its other work-groups still read `in` (a row each):
// the two do not overlap, or are the same place (a work-group reads its row before writing
// it). The memory plan lets an op's output reuse what an earlier op read last; fusing the two
// ops into one launch keeps that input read while the output is written.
bool apart_or_same(const BufferView& in, size_t in_bytes, const BufferView& out, size_t out_bytes) {
  if (in.buffer != out.buffer || in.offset == out.offset) return true;
  return in.offset + in_bytes <= out.offset || out.offset + out_bytes <= in.offset;
}

// Two RoPE ops one launch can run: the same rows and angles (head size, rotated dims, style,
// base, scale), over different tensors.
bool rope_pair(const OpCall& a, const OpCall& b) {
  return b.kind == OpKind::rope && a.rows == b.rows && a.i[1] == b.i[1] && a.i[2] == b.i[2] && a.i[3] == b.i[3] &&
         a.f == b.f && !same_view(a.out[0], b.out[0]);
}

}  // namespace

Status ClDevice::run_rope(const OpCall& q, const OpCall* k) {
  auto a = angles(q.i[2], q.f[0], q.f[1]);
  if (!a.ok()) return a.status();
  const auto style = static_cast<RopeStyle>(q.i[3]);
  const int rows = static_cast<int>(q.rows);
  if (!k) return ops_->rope(view(q.out[0]), rows, q.i[0], q.i[1], q.i[2], *a, style);
  return ops_->rope_qk(view(q.out[0]), q.i[0], view(k->out[0]), k->i[0], rows, q.i[1], q.i[2], *a, style);
}

Status ClDevice::run_producer(ClView q, int qblock, ClView q8params) {
  const OpCall& p = held_[n_held_ - 1];
  const ClView out0 = view(p.out[0]);
  switch (p.kind) {
    case OpKind::rms_norm: {
      const int dim = p.i[0];
      const int rows = static_cast<int>(p.rows * p.cols_in / dim);
      if (n_held_ == 2)
        return ops_->add_rms_norm(view(held_[0].out[0]), view(held_[0].in[1]), vector(p.param), rows, dim, p.f[0],
                                  out0, q, qblock, q8params);
      return ops_->rms_norm(view(p.in[0]), vector(p.param), rows, dim, p.f[0], out0, q, qblock, q8params);
    }
    case OpKind::swiglu:
      return ops_->swiglu(out0, view(p.in[1]), static_cast<size_t>(p.rows * p.cols_out), q, qblock, q8params);
    case OpKind::geglu:
      return ops_->geglu(out0, view(p.in[1]), static_cast<size_t>(p.rows * p.cols_out), q, qblock, q8params);
    case OpKind::attention:
      return run_attention(p, q8params.mem ? ClQ8Out{q, q8params, qblock} : ClQ8Out{});
    default: return Status(Code::internal, "opencl: a held op that produces nothing");
  }
}

int ClDevice::producer_block(const OpCall& op) const {
  if (n_held_ == 0 || op.kind != OpKind::matmul) return 0;
  const OpCall& p = held_[n_held_ - 1];
  const bool norm = p.kind == OpKind::rms_norm && p.i[0] == p.cols_in && p.i[0] <= ClOps::kMaxQuantRow;  // whole rows
  const bool attn = p.kind == OpKind::attention;
  if (!norm && !attn && p.kind != OpKind::swiglu && p.kind != OpKind::geglu) return 0;
  if (!same_view(op.in[0], p.out[0]) || op.rows != p.rows || op.cols_in != p.cols_out) return 0;
  const auto mode = ClMatmul::act_quant(op.w[0]->ref().type);
  const int rows = static_cast<int>(op.rows);
  const bool q8 = matmul_->uses_dp4a_gemv(weight(*op.w[0]), rows);  // the input's form: all weights alike
  if (attn && !q8) return 0;  // attention writes the int8 form only
  for (int k = 1; k < op.n_weights; ++k)
    if (ClMatmul::act_quant(op.w[k]->ref().type) != mode || matmul_->uses_dp4a_gemv(weight(*op.w[k]), rows) != q8)
      return 0;
  const int block = ClMatmul::act_quant_block(mode);
  return block != 0 && op.cols_in % block == 0 ? block : 0;
}

Status ClDevice::flush_held() {
  const int n = n_held_;
  if (n == 0) return Status::Ok();
  const OpCall& h = held_[0];
  if (h.kind == OpKind::rope) {
    n_held_ = 0;
    LLMSVC_RETURN_IF_ERROR(run_rope(h, n >= 2 ? &held_[1] : nullptr));
    if (n < 3) return Status::Ok();
    const OpCall& sc = held_[2];  // q's scale
    return ops_->scale(view(sc.out[0]), static_cast<size_t>(sc.rows * sc.cols_out), sc.f[0]);
  }
  if (h.kind == OpKind::add && n == 1) {
    n_held_ = 0;
    return ops_->add(view(h.out[0]), view(h.in[1]), static_cast<size_t>(h.rows * h.cols_out));
  }
  const Status s = run_producer(ClView{}, 0);
  n_held_ = 0;
  return s;
}

Status ClDevice::run(const OpCall& op) {
  if (!batch_) return Status(Code::internal, "opencl: an op outside begin/end");
  if (n_held_ > 0) {
    const OpCall& h = held_[0];
    if (h.kind == OpKind::add && n_held_ == 1) {
      // The norm right after a residual add, over the sum it made: one launch for the two,
      // held in turn for the matmul after it; not where the norm's output would overwrite rows
      // of the add's input that other work-groups have yet to read.
      const auto bytes = [](const OpCall& c, int64_t cols) { return static_cast<size_t>(c.rows * cols) * sizeof(float); };
      if (op.kind == OpKind::rms_norm && same_view(op.in[0], h.out[0]) && op.rows == h.rows &&
          op.cols_in == h.cols_out && apart_or_same(h.in[1], bytes(h, h.cols_out), op.out[0], bytes(op, op.cols_out))) {
        held_[1] = op;
        n_held_ = 2;
        return Status::Ok();
      }
    } else if (const int block = producer_block(op); block != 0) {
      // The norm or gated activation writes the matmul's input quantized as well (in the int8
      // form where the int8 GEMV reads it).
      const int rows = static_cast<int>(op.rows);
      auto xq = matmul_->input_scratch(rows, op.cols_in);
      if (!xq.ok()) return xq.status();
      const bool q8 = matmul_->uses_dp4a_gemv(weight(*op.w[0]), rows);
      LLMSVC_RETURN_IF_ERROR(
          run_producer(*xq, block, q8 ? xq->at(ClMatmul::q8_params_offset(rows, op.cols_in)) : ClView{}));
      n_held_ = 0;
      return run_matmul(op, *xq, true);
    } else if (h.kind == OpKind::rope && n_held_ == 1 && rope_pair(h, op)) {
      // RoPE of k after that of q: held too, for the store_kv that follows.
      held_[1] = op;
      n_held_ = 2;
      return Status::Ok();
    } else if (h.kind == OpKind::rope && n_held_ == 2 && op.kind == OpKind::scale && fuse_q_scale_ && kv_bound_ &&
               same_view(op.out[0], h.out[0]) && op.rows == h.rows && op.cols_out == int64_t{h.i[0]} * h.i[1]) {
      // Gemma-3 scales q between the RoPE and the store: held too, for the store's launch.
      held_[2] = op;
      n_held_ = 3;
      return Status::Ok();
    } else if (h.kind == OpKind::rope && n_held_ >= 2 && op.kind == OpKind::store_kv && kv_bound_ &&
               same_view(op.in[0], held_[1].out[0]) && op.rows == h.rows && held_[1].i[0] == kv_bind_.n_head_kv &&
               held_[1].i[1] == kv_bind_.head_dim) {
      // Rotate q and k (and scale q), then store k and v into their chunk: one launch for all.
      const std::optional<float> q_scale = n_held_ == 3 ? std::optional<float>(held_[2].f[0]) : std::nullopt;
      n_held_ = 0;
      auto a = angles(h.i[2], h.f[0], h.f[1]);
      if (!a.ok()) return a.status();
      const ClView pos{ClPool::mem(positions_), positions_.offset()};
      return ops_->rope_qk_store_kv(view(h.out[0]), h.i[0], view(held_[1].out[0]), view(op.in[1]),
                                    static_cast<int>(h.rows), h.i[2], *a, static_cast<RopeStyle>(h.i[3]), pos,
                                    kv_bind_, op.layer, q_scale);
    }
    LLMSVC_RETURN_IF_ERROR(flush_held());
  }
  if (batch_->may_fuse && (op.kind == OpKind::add || op.kind == OpKind::rope || op.kind == OpKind::rms_norm ||
                           op.kind == OpKind::swiglu || op.kind == OpKind::geglu ||
                           (op.kind == OpKind::attention && attn_q8_ && op.rows <= 4))) {
    held_[0] = op;
    n_held_ = 1;
    return Status::Ok();
  }
  const ClView in0 = view(op.in[0]), in1 = view(op.in[1]), out0 = view(op.out[0]);
  const ClView ids{ClPool::mem(ids_), ids_.offset()}, pos{ClPool::mem(positions_), positions_.offset()};
  const int rows = static_cast<int>(op.rows);
  const size_t n = static_cast<size_t>(op.rows * op.cols_out);
  switch (op.kind) {
    case OpKind::get_rows:
      return matmul_->get_rows(weight(*op.table), ids, rows, out0);
    case OpKind::rms_norm: {
      const int dim = op.i[0];
      return ops_->rms_norm(in0, vector(op.param), static_cast<int>(op.rows * op.cols_in / dim), dim, op.f[0], out0);
    }
    case OpKind::matmul:
      return run_matmul(op, in0, false);
    case OpKind::add_bias:
      return ops_->add_bias(out0, vector(op.param), rows, static_cast<int>(op.cols_out));
    case OpKind::rope:
      return run_rope(op, nullptr);
    case OpKind::scale:
      return ops_->scale(out0, n, op.f[0]);
    case OpKind::store_kv:
      if (!kv_bound_) return no_kv();
      return ops_->store_kv(in0, in1, rows, pos, kv_bind_, op.layer);
    case OpKind::attention:
      return run_attention(op);
    case OpKind::last_rows: {
      // Rows [from, from + rows) to the front; through a scratch buffer when they overlap
      // (a copy within one buffer must not).
      const size_t row = static_cast<size_t>(op.cols_out) * sizeof(float), bytes = row * op.rows;
      const ClView src = out0.at(static_cast<size_t>(op.from_row) * row);
      if (op.from_row >= op.rows) {
        const cl_int e = clEnqueueCopyBuffer(q(), src.mem, out0.mem, src.offset, out0.offset, bytes, 0, nullptr, nullptr);
        return e == CL_SUCCESS ? Status::Ok() : cl_status(e, "moving the output rows");
      }
      auto tmp = scratch(rows_tmp_, bytes);
      if (!tmp.ok()) return tmp.status();
      cl_int e = clEnqueueCopyBuffer(q(), src.mem, tmp->mem, src.offset, tmp->offset, bytes, 0, nullptr, nullptr);
      if (e == CL_SUCCESS) e = clEnqueueCopyBuffer(q(), tmp->mem, out0.mem, tmp->offset, out0.offset, bytes, 0, nullptr, nullptr);
      return e == CL_SUCCESS ? Status::Ok() : cl_status(e, "moving the output rows");
    }
    case OpKind::add:
      return ops_->add(out0, in1, n);
    case OpKind::swiglu:
      return ops_->swiglu(out0, in1, n);
    case OpKind::geglu:
      return ops_->geglu(out0, in1, n);
    case OpKind::copy:
    case OpKind::count_:
      break;
  }
  return Status(Code::internal, "opencl: no kernel for op " + std::string(op_name(op.kind)));
}

Status ClDevice::no_kv() const {
  return Status(Code::internal, "opencl: the KV chunks are outside " + name() + "'s KV arena");
}

Status ClDevice::run_attention(const OpCall& op, const ClQ8Out& q8) {
  if (!kv_bound_) return no_kv();
  const BatchBinding& b = *batch_;
  AttentionParams ap;
  ap.n_head = op.i[0];
  ap.n_head_kv = op.i[1];
  ap.head_dim = op.i[2];
  ap.scale = op.f[0];
  ap.sliding_window = op.i[3];
  ap.rank_major = op.i[4] != 0;
  const ClView mass = b.chunk_mass.empty() ? ClView{} : ClView{ClPool::mem(mass_), mass_.offset()};
  const ClView pos{ClPool::mem(positions_), positions_.offset()};
  bool fused = false;
  LLMSVC_RETURN_IF_ERROR(ops_->attention(view(op.in[0]), static_cast<int>(op.rows), pos, kv_bind_, op.layer,
                                         b.n_valid, ap, view(op.out[0]), mass, /*defer_mass=*/true, q8, &fused));
  attn_q8_fused_ += fused;
  return Status::Ok();
}

Status ClDevice::run_matmul(const OpCall& op, ClView x, bool x_quantized) {
  // Weights sharing the input (Q/K/V, gate/up) go to matmul_multi, one launch for a decode step.
  if (op.n_weights < 1 || op.n_weights > 3)
    return Status(Code::internal, "opencl: a matmul of " + std::to_string(op.n_weights) + " weights (1 to 3)");
  const ClWeight* ws[3] = {};
  ClView ys[3];
  for (int k = 0; k < op.n_weights; ++k) {
    ws[k] = &weight(*op.w[k]);
    ys[k] = view(op.out[k]);
    if (k == 0 && op.logits_out) {
      logits_rows_ = op.rows;
      logits_cols_ = ws[k]->ref().rows;
      auto l = scratch(logits_, static_cast<size_t>(logits_rows_ * logits_cols_) * sizeof(float));
      if (!l.ok()) return l.status();
      ys[k] = *l;
    }
  }
  LLMSVC_RETURN_IF_ERROR(matmul_->matmul_multi(ws, ys, op.n_weights, x, static_cast<int>(op.rows), x_quantized));
  return op.n_lora > 0 ? run_lora(op, ys) : Status::Ok();
}

Status ClDevice::run_lora(const OpCall& op, const ClView* ys) {
  if (op.n_lora > 3) return Status(Code::internal, "opencl: more LoRA branches than weights");
  const int rows = static_cast<int>(op.rows);
  // Every branch's A reads the float input (a fused producer may have handed the base matmul
  // its quantized form); their products side by side, each 256-byte aligned.
  const ClWeight* as[3] = {};
  size_t at[3] = {}, bytes = 0;
  for (int b = 0; b < op.n_lora; ++b) {
    as[b] = &weight(*op.lora[b].a);
    at[b] = bytes;
    bytes += (static_cast<size_t>(rows) * static_cast<size_t>(as[b]->ref().rows) * sizeof(float) + 255) / 256 * 256;
  }
  auto mid = scratch(lora_mid_, bytes);
  if (!mid.ok()) return mid.status();
  ClView mids[3];
  for (int b = 0; b < op.n_lora; ++b) mids[b] = mid->at(at[b]);
  LLMSVC_RETURN_IF_ERROR(matmul_->matmul_multi(as, mids, op.n_lora, view(op.in[0]), rows));
  for (int b = 0; b < op.n_lora; ++b) {
    const LoraBranch& br = op.lora[b];
    if (br.out < 0 || br.out >= op.n_weights) return Status(Code::internal, "opencl: a LoRA branch's output");
    LLMSVC_RETURN_IF_ERROR(matmul_->matmul_add(weight(*br.b), mids[b], rows, ys[br.out], br.scale));
  }
  return Status::Ok();
}

Result<ClView> ClDevice::angles(int rot_dims, float base, float scale) {
  auto it = std::find_if(angles_.begin(), angles_.end(),
                         [&](const Angles& a) { return a.rot_dims == rot_dims && a.base == base && a.scale == scale; });
  if (it == angles_.end()) {
    angles_.emplace_back();
    it = angles_.end() - 1;
    it->rot_dims = rot_dims, it->base = base, it->scale = scale;
  }
  const ClView v{ClPool::mem(it->buf), it->buf.offset()};
  if (it->current) return v;
  const BatchBinding& b = *batch_;
  it->table.prepare(b.n, rot_dims, b.positions, base, scale);
  const size_t n = static_cast<size_t>(b.n) * it->table.half();
  it->host.assign(it->table.cos(0), it->table.cos(0) + n);
  it->host.insert(it->host.end(), it->table.sin(0), it->table.sin(0) + n);
  auto buf = scratch(it->buf, it->host.size() * sizeof(float));
  if (!buf.ok()) return buf.status();
  LLMSVC_RETURN_IF_ERROR(write(*buf, it->host.data(), it->host.size() * sizeof(float), false));  // kept until end()
  it->current = true;
  return *buf;
}

Status ClDevice::end() {
  if (!batch_) return Status::Ok();
  const BatchBinding& b = *batch_;
  Status s = flush_held();
  // Key mass that waits on the device goes into the batch's mass even after a failure, so
  // that none is left for the next batch. The logits and the mass come back in one wait.
  const Status flushed = ops_->flush_mass();
  if (s.ok()) s = flushed;
  if (s.ok() && logits_rows_ > 0 && b.logits)
    s = read({ClPool::mem(logits_), logits_.offset()}, b.logits,
             static_cast<size_t>(logits_rows_ * logits_cols_) * sizeof(float), false);
  const size_t C = static_cast<size_t>(b.chunk_tokens);
  if (s.ok() && !b.chunk_mass.empty()) {
    mass_host_.resize(b.chunk_mass.size() * C);
    s = read({ClPool::mem(mass_), mass_.offset()}, mass_host_.data(), mass_host_.size() * sizeof(float), false);
  }
  const cl_int err = clFinish(q());  // nothing of the batch outlives it (the KV memory may be freed next)
  if (s.ok() && err != CL_SUCCESS) s = cl_status(err, "finishing a step");
  for (size_t c = 0; s.ok() && c < b.chunk_mass.size(); ++c)
    for (size_t j = 0; j < C; ++j) b.chunk_mass[c][j] += mass_host_[c * C + j];
  if (ClProfiler* p = ctx_->profiler()) p->collect();
  batch_ = nullptr;
  return s;
}

// --- Host-pointer ops: operands staged through scratch buffers. ---

void ClDevice::fail(Status s) {
  if (!s.ok() && host_failed_.ok()) host_failed_ = std::move(s);
}

Status ClDevice::host_op_status() {
  Status s = host_failed_;
  host_failed_ = Status::Ok();
  return s;
}

void ClDevice::matmul(const PreparedWeight& pw, const float* x, int n_tokens, float* y) {
  const ClWeight& w = weight(pw);
  const size_t xb = size_t(n_tokens) * w.ref().cols * sizeof(float), yb = size_t(n_tokens) * w.ref().rows * sizeof(float);
  auto dx = scratch(stage_[0], xb);
  auto dy = scratch(stage_[1], yb);
  if (!dx.ok() || !dy.ok()) return fail(dx.ok() ? dy.status() : dx.status());
  Status s = write(*dx, x, xb, false);
  if (s.ok()) s = matmul_->matmul(w, *dx, n_tokens, *dy);
  if (s.ok()) s = read(*dy, y, yb);
  fail(s);
}

void ClDevice::get_rows(const WeightRef& ref, const int32_t* ids, int n, float* out) {
  // A tensor already uploaded is read where it is; any other (the loader dequantizing a norm's
  // scale) goes up for this call only.
  std::shared_ptr<ClWeight> w = find_uploaded(ref);
  if (!w) {
    auto up = matmul_->upload(ref);
    if (!up.ok()) return fail(up.status());
    w = std::move(up).value();
  }
  const size_t ob = size_t(n) * ref.cols * sizeof(float);
  auto di = scratch(stage_[0], size_t(n) * sizeof(int32_t));
  auto dout = scratch(stage_[1], ob);
  if (!di.ok() || !dout.ok()) return fail(di.ok() ? dout.status() : di.status());
  Status s = write(*di, ids, size_t(n) * sizeof(int32_t), false);
  if (s.ok()) s = matmul_->get_rows(*w, *di, n, *dout);
  if (s.ok()) s = read(*dout, out, ob);
  fail(s);
}

void ClDevice::rms_norm(const float* x, const float* weight, int n_rows, int dim, float eps, float* out) {
  const size_t b = size_t(n_rows) * dim * sizeof(float);
  auto dx = scratch(stage_[0], b);
  auto dw = scratch(stage_[1], size_t(dim) * sizeof(float));
  auto dout = scratch(stage_[2], b);
  if (!dx.ok() || !dw.ok() || !dout.ok()) return fail(Status(Code::out_of_memory, "opencl: staging an rms_norm"));
  Status s = write(*dx, x, b, false);
  if (s.ok() && weight) s = write(*dw, weight, size_t(dim) * sizeof(float), false);
  if (s.ok()) s = ops_->rms_norm(*dx, weight ? *dw : ClView{}, n_rows, dim, eps, *dout);
  if (s.ok()) s = read(*dout, out, b);
  fail(s);
}

void ClDevice::rope(float* x, int n_tokens, int n_heads, int head_dim, int rot_dims, const int32_t* positions,
                    float freq_base, float freq_scale, RopeStyle style) {
  const size_t b = size_t(n_tokens) * n_heads * head_dim * sizeof(float);
  RopeTable table;
  table.prepare(n_tokens, rot_dims, positions, freq_base, freq_scale);
  const size_t n = size_t(n_tokens) * table.half() * sizeof(float);
  auto dx = scratch(stage_[0], b);
  auto da = scratch(stage_[1], 2 * n);
  if (!dx.ok() || !da.ok()) return fail(Status(Code::out_of_memory, "opencl: staging a rope"));
  Status s = write(*dx, x, b, false);
  if (s.ok()) s = write(*da, table.cos(0), n, true);
  if (s.ok()) s = write(da->at(n), table.sin(0), n, true);
  if (s.ok()) s = ops_->rope(*dx, n_tokens, n_heads, head_dim, rot_dims, *da, style);
  if (s.ok()) s = read(*dx, x, b);
  fail(s);
}

// y op= x over n floats, staged: the shared shape of add, swiglu, geglu, add_bias, scale.
template <class Op>
Status ClDevice::staged(float* y, const float* x, size_t ny, size_t nx, Op op) {
  auto dy = scratch(stage_[0], ny * sizeof(float));
  auto dx = scratch(stage_[1], std::max<size_t>(nx, 1) * sizeof(float));
  if (!dy.ok() || !dx.ok()) return Status(Code::out_of_memory, "opencl: staging an elementwise op");
  Status s = write(*dy, y, ny * sizeof(float), false);
  if (s.ok() && x) s = write(*dx, x, nx * sizeof(float), false);
  if (s.ok()) s = op(*dy, *dx);
  if (s.ok()) s = read(*dy, y, ny * sizeof(float));
  return s;
}

void ClDevice::swiglu(float* gate, const float* up, size_t n) {
  fail(staged(gate, up, n, n, [&](ClView g, ClView u) { return ops_->swiglu(g, u, n); }));
}
void ClDevice::geglu(float* gate, const float* up, size_t n) {
  fail(staged(gate, up, n, n, [&](ClView g, ClView u) { return ops_->geglu(g, u, n); }));
}
void ClDevice::add(float* y, const float* x, size_t n) {
  fail(staged(y, x, n, n, [&](ClView a, ClView b) { return ops_->add(a, b, n); }));
}
void ClDevice::add_bias(float* y, const float* bias, int n_rows, int dim) {
  fail(staged(y, bias, size_t(n_rows) * dim, size_t(dim), [&](ClView a, ClView b) { return ops_->add_bias(a, b, n_rows, dim); }));
}
void ClDevice::scale(float* x, size_t n, float s) {
  fail(staged(x, nullptr, n, 0, [&](ClView a, ClView) { return ops_->scale(a, n, s); }));
}

void ClDevice::store_f16(const float* src, uint16_t* dst, size_t n) {
  // One token's row into a host block: the conversion is vstore_half's (round to nearest
  // even), the same as the host's; staged as a one-chunk, one-layer K/V pair.
  const int kv_dim = static_cast<int>(n);
  const size_t rb = n * sizeof(uint16_t);
  auto arena = scratch(stage_[2], 2 * rb + 256);
  auto src_k = scratch(stage_[0], n * sizeof(float));
  auto tbl = scratch(stage_[3], sizeof(uint64_t) + sizeof(int32_t));
  if (!arena.ok() || !src_k.ok() || !tbl.ok()) return fail(Status(Code::out_of_memory, "opencl: staging store_f16"));
  const uint64_t entry = kv_table_entry(arena->offset, KvFormat::f16);
  const int32_t pos0 = 0;
  Status s = write(*src_k, src, n * sizeof(float), false);
  if (s.ok()) s = write(*tbl, &entry, sizeof entry, false);
  if (s.ok()) s = write(tbl->at(sizeof entry), &pos0, sizeof pos0, false);
  const ClKv kv{arena->mem, *tbl, 1, 1, 1, 1, kv_dim};
  if (s.ok()) s = ops_->store_kv(*src_k, *src_k, 1, tbl->at(sizeof entry), kv, 0);
  if (s.ok()) s = read(*arena, dst, rb);
  fail(s);
}

void ClDevice::attention(const float* q_host, int n_tokens, const int32_t* q_pos, const KvChunkView* chunks, int n_chunks,
                         const AttentionParams& p, float* out) {
  if (n_chunks <= 0) return fail(Status(Code::invalid_argument, "opencl: attention over no chunks"));
  // The chunks as one layer of a staged KV arena, positions shifted so the first chunk is
  // chunk 0 (masks depend on differences of positions only).
  const int32_t base = chunks[0].first_pos;
  const int C = n_chunks > 1 ? chunks[1].first_pos - chunks[0].first_pos : chunks[0].n_tokens;
  const KvBlockShape shape{C, p.n_head_kv, p.head_dim};
  size_t layer_bytes = 0;
  for (int c = 0; c < n_chunks; ++c)
    layer_bytes = std::max(layer_bytes, kv_block_bytes(chunks[c].format, KvPart::key, shape) +
                                            kv_block_bytes(chunks[c].format, KvPart::value, shape));
  const size_t slot = (layer_bytes + 255) / 256 * 256;
  const size_t qb = size_t(n_tokens) * p.n_head * p.head_dim * sizeof(float);
  auto arena = scratch(stage_[2], slot * n_chunks);
  auto dq = scratch(stage_[0], qb);
  auto dout = scratch(stage_[1], qb);
  auto tbl = scratch(stage_[3], n_chunks * sizeof(uint64_t) + n_tokens * sizeof(int32_t) + n_chunks * size_t(C) * sizeof(float));
  if (!arena.ok() || !dq.ok() || !dout.ok() || !tbl.ok()) return fail(Status(Code::out_of_memory, "opencl: staging attention"));
  std::vector<uint64_t> entries(n_chunks);
  std::vector<int32_t> pos(q_pos, q_pos + n_tokens);
  for (int32_t& x : pos) x -= base;
  Status s = write(*dq, q_host, qb, false);
  for (int c = 0; s.ok() && c < n_chunks; ++c) {
    const KvChunkView& v = chunks[c];
    entries[c] = kv_table_entry(arena->offset + c * slot, v.format);
    const size_t kb = v.format == KvFormat::f16 ? size_t(v.n_tokens) * shape.kv_dim() * 2 : kv_block_bytes(v.format, KvPart::key, shape);
    const size_t vb = v.format == KvFormat::f16 ? kb : kv_block_bytes(v.format, KvPart::value, shape);
    s = write(arena->at(c * slot), v.k, kb, true);
    if (s.ok()) s = write(arena->at(c * slot + kv_block_bytes(v.format, KvPart::key, shape)), v.v, vb, true);
  }
  const size_t pos_at = n_chunks * sizeof(uint64_t), mass_at = pos_at + n_tokens * sizeof(int32_t);
  if (s.ok()) s = write(*tbl, entries.data(), entries.size() * sizeof(uint64_t), true);
  if (s.ok()) s = write(tbl->at(pos_at), pos.data(), pos.size() * sizeof(int32_t), true);
  const bool mass = chunks[0].mass != nullptr;
  const size_t mass_bytes = n_chunks * size_t(C) * sizeof(float);
  if (s.ok() && mass) {
    const float zero = 0;
    const cl_int e = clEnqueueFillBuffer(q(), tbl->mem, &zero, sizeof zero, tbl->offset + mass_at, mass_bytes, 0, nullptr, nullptr);
    if (e != CL_SUCCESS) s = cl_status(e, "clearing the attention mass");
  }
  const int n_valid = chunks[n_chunks - 1].first_pos + chunks[n_chunks - 1].n_tokens - base;
  const ClKv kv{arena->mem, *tbl, n_chunks, C, 1, p.n_head_kv, p.head_dim};
  if (s.ok()) s = ops_->attention(*dq, n_tokens, tbl->at(pos_at), kv, 0, n_valid, p, *dout, mass ? tbl->at(mass_at) : ClView{});
  if (s.ok()) s = read(*dout, out, qb);
  if (s.ok() && mass) {
    std::vector<float> m(n_chunks * size_t(C));
    s = read(tbl->at(mass_at), m.data(), mass_bytes);
    for (int c = 0; s.ok() && c < n_chunks; ++c)
      for (int j = 0; j < chunks[c].n_tokens; ++j) chunks[c].mass[j] += m[size_t(c) * C + j];
  }
  fail(s);
}

}  // namespace llmsvc::hal::opencl
