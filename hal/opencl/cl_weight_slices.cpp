// SPDX-License-Identifier: Apache-2.0
// ClMatmul's views of an uploaded weight's first rows and columns, and the release and restore
// of its row and column tails: an elastic model's levels on an OpenCL device.
#include <algorithm>
#include <cstring>

#include "hal/opencl/cl_device_context.h"
#include "hal/opencl/cl_matmul.h"
#include "hal/opencl/cl_pool.h"
#include "hal/opencl/cl_weight_pack.h"

namespace llmsvc::hal::opencl {

Result<std::unique_ptr<ClWeight>> ClMatmul::slice(const ClWeight& w, int64_t rows, int64_t cols) {
  LLMSVC_RETURN_IF_ERROR(Device::check_slice(w.ref(), rows, cols));
  auto v = std::make_unique<ClWeight>();
  v->ref_ = w.ref_;
  v->ref_.rows = rows;
  v->ref_.cols = cols;  // data and row_bytes stay w's
  v->layout = w.layout;  // the stride is read from the base at each launch (release_cols moves it)
  v->gs = w.gs;
  v->base_ = w.base_ ? w.base_ : &w;
  v->resident_ = rows;
  return v;
}

Result<std::array<Buffer, 3>> ClMatmul::resized_parts(const ClWeight& w, int64_t rows, const PartRows& row) {
  std::array<Buffer, 3> out;
  const size_t copy_rows = static_cast<size_t>(std::min(rows, w.resident_));
  cl_command_queue q = context().queue().handle();
  for (int i = 0; i < 3; ++i) {
    if (!w.parts[i]) continue;
    auto b = context().pool().alloc(row[i] * static_cast<size_t>(rows));
    if (!b.ok()) return b.status();
    out[i] = std::move(b).value();
    if (copy_rows == 0) continue;
    cl_int err;
    if (row[i] == w.part_row[i]) {  // rows are contiguous in every layout
      err = clEnqueueCopyBuffer(q, ClPool::mem(w.parts[i]), ClPool::mem(out[i]), 0, 0, row[i] * copy_rows, 0, nullptr,
                                nullptr);
    } else {  // each row's first bytes, at another pitch
      const size_t origin[3] = {0, 0, 0}, region[3] = {std::min(row[i], w.part_row[i]), copy_rows, 1};
      err = clEnqueueCopyBufferRect(q, ClPool::mem(w.parts[i]), ClPool::mem(out[i]), origin, origin, region,
                                    w.part_row[i], 0, row[i], 0, 0, nullptr, nullptr);
    }
    if (err != CL_SUCCESS) return cl_status(err, "moving a weight's rows");
  }
  return out;
}

namespace {

// The columns a weight's parts can be cut at: each part's row bytes are proportional to the
// stride at multiples of it (the type's block; E0M4's groups of 128; the float layouts pad
// their stride to 8).
int64_t column_granule(WeightType type, int layout) {
  if (layout == kE0M4) return std::max<int64_t>(block_elems(type), 128);
  if (layout == kF32 || layout == kF16 || layout == kBF16) return 8;
  return block_elems(type);
}

int64_t round_up(int64_t v, int64_t g) { return (v + g - 1) / g * g; }

}  // namespace

// Swaps in parts already filled, after the kernels enqueued so far (which read the old
// buffers) have finished.
void ClMatmul::swap_parts(ClWeight& w, std::array<Buffer, 3>& parts, const PartRows& row) {
  context().queue().finish();
  for (int i = 0; i < 3; ++i) {
    w.parts[i] = std::move(parts[i]);
    w.part_row[i] = row[i];
  }
}

uint64_t ClMatmul::release_rows(ClWeight& w, int64_t keep_rows) {
  keep_rows = std::max<int64_t>(keep_rows, 1);  // a buffer of no bytes is no buffer
  if (w.is_view() || keep_rows >= w.resident_) return 0;
  const uint64_t before = w.device_bytes();
  const PartRows row = {w.part_row[0], w.part_row[1], w.part_row[2]};
  auto parts = resized_parts(w, keep_rows, row);
  // The pool is full or the copy failed: nothing is given back, and the weight is as it was.
  if (!parts.ok()) return 0;
  swap_parts(w, *parts, row);
  w.resident_ = keep_rows;
  return before - w.device_bytes();
}

Result<uint64_t> ClMatmul::restore_rows(ClWeight& w, int64_t rows, const void* from) {
  rows = std::min(rows, w.ref_.rows);
  if (w.is_view() || rows <= w.resident_) return uint64_t{0};
  const uint64_t before = w.device_bytes();
  const PartRows row = {w.part_row[0], w.part_row[1], w.part_row[2]};
  auto parts = resized_parts(w, rows, row);
  if (!parts.ok()) return parts.status();
  // The missing rows repacked as upload() packed them (over the columns held): every layout's
  // rows are independent.
  WeightRef tail = w.ref_;
  const size_t stride = w.ref_.row_bytes ? w.ref_.row_bytes : row_bytes(w.ref_.type, w.ref_.cols);
  tail.data = static_cast<const uint8_t*>(from != nullptr ? from : w.ref_.data) + static_cast<size_t>(w.resident_) * stride;
  tail.rows = rows - w.resident_;
  tail.cols = w.resident_cols_;
  tail.row_bytes = stride;
  const PackedWeight p = w.layout == kE0M4 ? pack_e0m4(tail) : pack_weight(tail);
  for (int i = 0; i < 3; ++i) {
    if (!(*parts)[i]) continue;
    const size_t at = w.part_row[i] * static_cast<size_t>(w.resident_);
    if (p.part[i].size() != w.part_row[i] * static_cast<size_t>(tail.rows))
      return Status(Code::internal, "opencl: a weight's repacked rows differ from its upload's");
    const cl_int err = clEnqueueWriteBuffer(context().queue().handle(), ClPool::mem((*parts)[i]), CL_TRUE, at,
                                            p.part[i].size(), p.part[i].data(), 0, nullptr, nullptr);
    if (err != CL_SUCCESS) return cl_status(err, "restoring a weight's rows");
  }
  swap_parts(w, *parts, row);
  w.resident_ = rows;
  return w.device_bytes() - before;
}

uint64_t ClMatmul::release_cols(ClWeight& w, int64_t keep_cols) {
  if (w.is_view()) return 0;
  keep_cols = round_up(std::max<int64_t>(keep_cols, 1), column_granule(w.ref_.type, w.layout));
  if (keep_cols >= w.resident_cols_) return 0;
  // The new stride: the granule already pads a float row to 8, so below the old one.
  const auto kp = static_cast<uint32_t>(keep_cols);
  PartRows row{};
  for (int i = 0; i < 3; ++i) {
    if (w.part_row[i] * kp % w.kp != 0) return 0;  // not a cut this layout's rows allow
    row[i] = w.part_row[i] * kp / w.kp;
  }
  const uint64_t before = w.device_bytes();
  auto parts = resized_parts(w, w.resident_, row);
  if (!parts.ok()) return 0;  // nothing given back, the weight as it was
  swap_parts(w, *parts, row);
  w.kp = kp;
  w.resident_cols_ = keep_cols;
  return before - w.device_bytes();
}

Result<uint64_t> ClMatmul::restore_cols(ClWeight& w, int64_t cols, const void* from) {
  if (w.is_view()) return uint64_t{0};
  cols = std::min(round_up(std::max<int64_t>(cols, 1), column_granule(w.ref_.type, w.layout)), w.ref_.cols);
  if (cols <= w.resident_cols_) return uint64_t{0};
  // The held rows' first `cols` columns repacked as upload() packed them: a prefix of every
  // layout's row is the layout of the prefix.
  WeightRef held = w.ref_;
  held.data = from != nullptr ? from : w.ref_.data;
  held.rows = w.resident_;
  held.cols = cols;
  held.row_bytes = w.ref_.row_bytes ? w.ref_.row_bytes : row_bytes(w.ref_.type, w.ref_.cols);
  const PackedWeight p = w.layout == kE0M4 ? pack_e0m4(held) : pack_weight(held);
  if (p.layout != w.layout || p.gs != w.gs)
    return Status(Code::internal, "opencl: a weight's repacked columns differ from its upload's");
  PartRows row{};
  for (int i = 0; i < 3; ++i) {
    if (p.part[i].empty() != !w.parts[i])
      return Status(Code::internal, "opencl: a weight's repacked columns have other parts than its upload");
    row[i] = p.part[i].size() / static_cast<size_t>(held.rows);
  }
  const uint64_t before = w.device_bytes();
  auto parts = upload_parts(p);
  if (!parts.ok()) return parts.status();
  swap_parts(w, *parts, row);
  w.kp = p.kp ? p.kp : static_cast<uint32_t>(cols);
  w.resident_cols_ = cols;
  return w.device_bytes() - before;
}

}  // namespace llmsvc::hal::opencl
