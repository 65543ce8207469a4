// SPDX-License-Identifier: Apache-2.0
// ClProfiler: GPU time per kernel from OpenCL's profiling events, for tuning sessions. With
// LLMSVC_CL_PROFILE set, a device's queue is made with profiling on, every launch through
// cl_launch.h keeps its event, and the times are summed per kernel name after each drained
// batch; the table goes to stderr when the device closes. Off (no events, no cost) otherwise.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "hal/opencl/cl_api.h"

namespace llmsvc::hal::opencl {

class ClProfiler {
 public:
  // Whether LLMSVC_CL_PROFILE asks for profiling.
  static bool wanted();
  // The profiler of launches on `queue` (null: not profiled).
  static ClProfiler* of(cl_command_queue queue);

  explicit ClProfiler(cl_command_queue queue);
  ~ClProfiler();
  ClProfiler(const ClProfiler&) = delete;
  ClProfiler& operator=(const ClProfiler&) = delete;

  void record(cl_kernel kernel, cl_event event);  // takes the event
  // Sums the recorded events (their commands must have completed: after a finish).
  void collect();
  // One line per kernel, most time first: name, launches, total and mean microseconds.
  std::string report() const;

 private:
  struct Total {
    uint64_t launches = 0;
    double ns = 0;
  };
  cl_command_queue queue_;
  std::mutex mu_;
  std::vector<std::pair<std::string, ClEvent>> pending_;  // the kernel's name: it may be gone by collect()
  std::map<std::string, Total> totals_;
};

}  // namespace llmsvc::hal::opencl
