// SPDX-License-Identifier: Apache-2.0
// WeightResidency: which parts of an elastic model's weights are in memory. Under memory
// pressure the engine gives back what only levels above a floor would read (release_above); a
// call at a larger level brings back what it reads first (make_resident), repacked from the
// model file.
//
// What can be given back, in the layers levels cut, is each cut weight's tail: the rows past a
// level's kept neurons (gate, up) and query heads (Q), the columns past them (down, O; the
// device lays the panels out for the kept columns in place). Anchor layers keep everything at
// every level and are never released (pinned). Query heads held rank-major are moved again
// from the file to be restored. A device that keeps no copy of its own (weights read in place
// from the mapped file, which the kernel reclaims by itself) gives back nothing; one that can
// give back rows only (OpenCL) keeps the columns.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

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

  // Gives back the rows and columns no level up to `level` (an index into the model's levels;
  // -1 or the last: the full model, which gives back nothing) reads. Returns the bytes given back.
  uint64_t release_above(int level);
  // Makes everything level `level` reads resident (nothing to do when it is). Code::out_of_memory
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
  // A weight levels cut, and whether the cut is a row prefix (else a column prefix).
  struct Cut {
    Model::LevelPart part;
    bool rows;
  };
  static constexpr int kCutCount = 5;
  static constexpr Cut kCuts[kCutCount] = {{Model::LevelPart::gate, true}, {Model::LevelPart::up, true},
                                  {Model::LevelPart::down, false}, {Model::LevelPart::q, true},
                                  {Model::LevelPart::o, false}};
  // Rows (or columns) of the cut weight in layer il that level `level` reads.
  int64_t extent_at(int level, int il, Cut cut) const;
  // Bytes repacked to take that weight from level `from`'s extent to level `to`'s (0 unless the
  // device gave some of it back).
  uint64_t repack_bytes(int from, int to, int il, int ci) const;
  uint64_t restore_bytes(int level) const;

  Model& model_;
  hal::Device& device_;
  int full_ = -1;
  std::atomic<int> resident_{-1};
  std::atomic<uint64_t> released_{0};
  std::atomic<double> ms_per_byte_{0};
  bool can_release_ = false;
  // [layer * kCutCount + cut]: whether the device gave back part of that weight (and has not
  // had it all back since). A device may give back rows only, or nothing of a small tail.
  // Atomic: restore_ms reads them from any thread.
  std::vector<std::atomic<uint8_t>> held_back_;
};

}  // namespace llmsvc
