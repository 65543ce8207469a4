// SPDX-License-Identifier: Apache-2.0
// ClMatmul's views of an uploaded weight's first rows and columns, and the release and restore
// of its row tails: an elastic model's levels on an OpenCL device.
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
  v->ref_.cols = cols;  // data and row_bytes stay w's, as kp (the stride the kernels index by)
  v->layout = w.layout;
  v->kp = w.kp;
  v->gs = w.gs;
  v->base_ = w.base_ ? w.base_ : &w;
  v->resident_ = rows;
  return v;
}

Result<std::array<Buffer, 3>> ClMatmul::resized_parts(const ClWeight& w, int64_t rows) {
  std::array<Buffer, 3> out;
  const size_t copy_rows = static_cast<size_t>(std::min(rows, w.resident_));
  for (int i = 0; i < 3; ++i) {
    if (!w.parts[i]) continue;
    auto b = context().pool().alloc(w.part_row[i] * static_cast<size_t>(rows));
    if (!b.ok()) return b.status();
    out[i] = std::move(b).value();
    if (copy_rows == 0) continue;
    const cl_int err = clEnqueueCopyBuffer(context().queue().handle(), ClPool::mem(w.parts[i]), ClPool::mem(out[i]), 0, 0,
                                           w.part_row[i] * copy_rows, 0, nullptr, nullptr);
    if (err != CL_SUCCESS) return cl_status(err, "moving a weight's rows");
  }
  return out;
}

uint64_t ClMatmul::release_rows(ClWeight& w, int64_t keep_rows) {
  keep_rows = std::max<int64_t>(keep_rows, 1);  // a buffer of no bytes is no buffer
  if (w.is_view() || keep_rows >= w.resident_) return 0;
  const uint64_t before = w.device_bytes();
  auto parts = resized_parts(w, keep_rows);
  // The pool is full or the copy failed: nothing is given back, and the weight is as it was.
  if (!parts.ok()) return 0;
  // The kernels enqueued so far read the old buffers: they finish before those go back.
  context().queue().finish();
  for (int i = 0; i < 3; ++i) w.parts[i] = std::move((*parts)[i]);
  w.resident_ = keep_rows;
  return before - w.device_bytes();
}

Result<uint64_t> ClMatmul::restore_rows(ClWeight& w, int64_t rows, const void* from) {
  rows = std::min(rows, w.ref_.rows);
  if (w.is_view() || rows <= w.resident_) return uint64_t{0};
  const uint64_t before = w.device_bytes();
  auto parts = resized_parts(w, rows);
  if (!parts.ok()) return parts.status();
  // The missing rows repacked as upload() packed them: every layout's rows are independent.
  WeightRef tail = w.ref_;
  const size_t stride = w.ref_.row_bytes ? w.ref_.row_bytes : row_bytes(w.ref_.type, w.ref_.cols);
  tail.data = static_cast<const uint8_t*>(from != nullptr ? from : w.ref_.data) + static_cast<size_t>(w.resident_) * stride;
  tail.rows = rows - w.resident_;
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
  context().queue().finish();
  for (int i = 0; i < 3; ++i) w.parts[i] = std::move((*parts)[i]);
  w.resident_ = rows;
  return w.device_bytes() - before;
}

}  // namespace llmsvc::hal::opencl
