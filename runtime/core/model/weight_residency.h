// SPDX-License-Identifier: Apache-2.0
// WeightResidency: which rows of an elastic model's weights are in memory. Under memory pressure
// the engine gives back the rows that levels above a floor would read (release_above); a call at
// a larger level brings back what it reads first (make_resident), repacked from the model file.
//
// What can be given back is the tail of a row prefix: gate's and up's rows past a level's kept
// neurons in the layers levels cut. Anchor layers keep every row at every level and are never
// released (pinned); down's and O's cuts are column prefixes, interleaved through every panel,
// and Q's rank-major rows have no bytes left to repack from, so those stay. A device that keeps
// no copy of its own (weights read in place from the mapped file, which the kernel reclaims by
// itself) gives back nothing.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/status.h"
#include "hal/device.h"
#include "runtime/core/model/model.h"

namespace llmsvc {

class WeightResidency {
 public:
  // `device` is the one `model` was prepared on; both must outlive this. release_above and
  // make_resident are called with the engine's compute lock held, as it runs levels; the
  // figures below may be read by any thread meanwhile (an estimate then).
  WeightResidency(Model& model, hal::Device& device);

  // Gives back the rows no level up to `level` (an index into the model's levels; -1 or the
  // last: the full model, which gives back nothing) reads. Returns the bytes given back.
  uint64_t release_above(int level);
  // Makes every row level `level` reads resident (nothing to do when it is). Code::out_of_memory
  // when the memory cannot be had (the weights stay as they were: the call cannot run there).
  Status make_resident(int level);

  // The largest level whose rows are all in memory (the last: every row).
  int resident_level() const { return resident_; }
  // Bytes given back and not yet restored.
  uint64_t released_bytes() const { return released_; }
  // What make_resident(level) would take, in milliseconds: the bytes it repacks at the rate
  // restores have run at (at first the rate of one weight's packing, timed at construction).
  double restore_ms(int level) const;
  // Whether anything can be given back at all (an elastic model on a device that keeps copies).
  bool can_release() const { return can_release_; }

 private:
  // Rows of `part` in layer il that level `level` reads.
  int64_t rows_at(int level, int il, Model::LevelPart part) const;
  uint64_t restore_bytes(int level) const;

  Model& model_;
  hal::Device& device_;
  int full_ = -1;
  std::atomic<int> resident_{-1};
  std::atomic<uint64_t> released_{0};
  std::atomic<double> ms_per_byte_{0};
  bool can_release_ = false;
};

}  // namespace llmsvc
