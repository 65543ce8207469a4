// SPDX-License-Identifier: Apache-2.0
// DeviceThreads: runs a step list placed on several devices concurrently. Each device runs its
// own steps in order (a device's queue is in order) on a thread of its own (the first device
// on the caller's); a step first waits until the steps it depends on, on other devices, are
// done. Independent steps on different devices thus overlap, and dependencies hold.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace llmsvc {

inline constexpr int kMaxDevices = 4;

// Per step: for each device, the index (in the whole list) of its last step this one needs,
// or -1.
using StepWaits = std::array<int32_t, kMaxDevices>;

// The steps of one run, as DeviceThreads sees them (an interface, not std::function: a run
// allocates nothing).
class StepList {
 public:
  virtual const StepWaits& waits(int32_t step) const = 0;
  virtual void run(int32_t step) = 0;  // on its device's thread

 protected:
  ~StepList() = default;
};

class DeviceThreads {
 public:
  explicit DeviceThreads(int n_devices);  // starts n_devices - 1 threads
  ~DeviceThreads();
  DeviceThreads(const DeviceThreads&) = delete;
  DeviceThreads& operator=(const DeviceThreads&) = delete;

  // order[d]: the indices of device d's steps, ascending. busy_s[d] gets the time device d
  // spent running steps (its waits left out). Returns when every step has run.
  void run(const std::vector<std::vector<int32_t>>& order, StepList& steps, std::vector<double>& busy_s);

 private:
  void work(int device);
  void run_device(int device);

  const int n_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;  // a new run
  int pending_ = 0;          // devices still running this run
  bool stop_ = false;
  // This run's inputs (valid while run() waits).
  const std::vector<std::vector<int32_t>>* order_ = nullptr;
  StepList* steps_ = nullptr;
  std::vector<double>* busy_ = nullptr;
  // Per device: the index of its last finished step (-1 before its first).
  std::array<std::atomic<int32_t>, kMaxDevices> done_{};
};

}  // namespace llmsvc
