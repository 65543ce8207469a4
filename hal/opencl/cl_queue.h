// SPDX-License-Identifier: Apache-2.0
// ClQueue: a Queue on an in-order OpenCL command queue. Copies between device buffers, and
// between a device buffer and host-visible memory, are enqueued without waiting; their Event
// completes through the OpenCL event's callback.
#pragma once

#include "hal/opencl/cl_api.h"
#include "hal/queue.h"

namespace llmsvc::hal::opencl {

class ClQueue final : public Queue {
 public:
  explicit ClQueue(cl_command_queue queue) : queue_(queue) {}
  // A host-visible end must stay valid until the event completes. A failure to enqueue
  // completes the event at once and is kept for status().
  Event copy(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t bytes) override;
  void finish() override { clFinish(queue_); }
  // The first enqueue failure since the last call (then cleared).
  Status status() override;
  cl_command_queue handle() const { return queue_; }

 private:
  cl_command_queue queue_;
  Status failed_;
};

}  // namespace llmsvc::hal::opencl
