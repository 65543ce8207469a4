// SPDX-License-Identifier: Apache-2.0
// ClQueue: one enqueue per copy, by which ends are device buffers.
#include "hal/opencl/cl_queue.h"

#include <cstring>
#include <functional>

#include "hal/opencl/cl_pool.h"

namespace llmsvc::hal::opencl {
namespace {

void CL_CALLBACK on_complete(cl_event, cl_int, void* user) {
  std::unique_ptr<std::function<void()>> done(static_cast<std::function<void()>*>(user));
  (*done)();
}

}  // namespace

Event ClQueue::copy(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t bytes) {
  if (bytes == 0) return Event();
  const bool src_host = src.data() != nullptr, dst_host = dst.data() != nullptr;
  if (src_host && dst_host) {
    std::memcpy(dst.data() + dst_offset, src.data() + src_offset, bytes);
    return Event();
  }
  // Device buffers may be ranges of one arena (ClArenaPool): their place in it comes first.
  if (!src_host) src_offset += src.offset();
  if (!dst_host) dst_offset += dst.offset();
  cl_event ev = nullptr;
  cl_int err;
  if (!src_host && !dst_host) {
    err = clEnqueueCopyBuffer(queue_, ClPool::mem(src), ClPool::mem(dst), src_offset, dst_offset, bytes, 0, nullptr, &ev);
  } else if (src_host) {
    err = clEnqueueWriteBuffer(queue_, ClPool::mem(dst), CL_FALSE, dst_offset, bytes, src.data() + src_offset, 0, nullptr, &ev);
  } else {
    err = clEnqueueReadBuffer(queue_, ClPool::mem(src), CL_FALSE, src_offset, bytes, dst.data() + dst_offset, 0, nullptr, &ev);
  }
  if (err != CL_SUCCESS) {
    if (failed_.ok()) failed_ = cl_status(err, "copying " + std::to_string(bytes) + " bytes");
    return Event();
  }
  ClEvent owned(ev);
  auto [event, complete] = Event::pending();
  auto hook = std::make_unique<std::function<void()>>(std::move(complete));
  if (clSetEventCallback(ev, CL_COMPLETE, on_complete, hook.get()) == CL_SUCCESS) {
    hook.release();  // the callback owns it now
    clFlush(queue_);
  } else {
    clWaitForEvents(1, &ev);
    (*hook)();
  }
  return event;
}

Status ClQueue::status() {
  Status s = failed_;
  failed_ = Status::Ok();
  return s;
}

}  // namespace llmsvc::hal::opencl
