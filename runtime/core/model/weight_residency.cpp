// SPDX-License-Identifier: Apache-2.0
#include "runtime/core/model/weight_residency.h"

#include <algorithm>

#include "base/clock.h"

namespace llmsvc {

WeightResidency::WeightResidency(Model& model, hal::Device& device) : model_(model), device_(device) {
  const ElasticSpec* spec = model.elastic();
  if (spec == nullptr || !model.levels_status().ok() || model.config().n_layer == 0) return;
  full_ = resident_ = spec->full();
  held_back_ = std::vector<std::atomic<uint8_t>>(static_cast<size_t>(model.config().n_layer) * kCutCount);
  // The first cut layer's gate, released at the smallest level and repacked at once: whether
  // this device gives anything back, and how fast it repacks.
  const Cut gate{Model::LevelPart::gate, true};
  for (int il = 0; il < model.config().n_layer; ++il) {
    if (spec->anchor[static_cast<size_t>(il)]) continue;
    hal::PreparedWeight& w = model.layer_weight(il, gate.part);
    const uint64_t bytes = device.release_rows(w, extent_at(0, il, gate));
    if (bytes == 0) return;
    const auto t0 = std::chrono::steady_clock::now();
    auto back = device.restore_rows(w, w.ref().rows, nullptr);
    can_release_ = true;
    if (!back.ok()) {  // left released: the first turn above level 0 takes it back
      resident_ = 0;
      released_ = bytes;
      held_back_[static_cast<size_t>(il) * kCutCount] = 1;  // kCuts[0] is gate's
      return;
    }
    ms_per_byte_ = ms_since(t0) / static_cast<double>(std::max<uint64_t>(*back, 1));
    return;
  }
}

int64_t WeightResidency::extent_at(int level, int il, Cut cut) const {
  const hal::PreparedWeight* view = model_.level_weight(level, il, cut.part);
  const hal::WeightRef& w = view != nullptr ? view->ref() : model_.layer_weight(il, cut.part).ref();
  return cut.rows ? w.rows : w.cols;
}

uint64_t WeightResidency::release_above(int level) {
  if (!can_release_ || level < 0 || level >= full_ || level >= resident_) return 0;
  uint64_t bytes = 0;
  for (int il = 0; il < model_.config().n_layer; ++il) {
    if (model_.elastic()->anchor[static_cast<size_t>(il)]) continue;  // pinned: every level reads all of it
    for (int ci = 0; ci < kCutCount; ++ci) {
      const Cut cut = kCuts[ci];
      hal::PreparedWeight& w = model_.layer_weight(il, cut.part);
      const int64_t keep = extent_at(level, il, cut);
      const uint64_t given = cut.rows ? device_.release_rows(w, keep) : device_.release_cols(w, keep);
      if (given > 0) held_back_[static_cast<size_t>(il) * kCutCount + ci] = 1;
      bytes += given;
    }
  }
  released_ += bytes;
  resident_ = level;
  return bytes;
}

uint64_t WeightResidency::repack_bytes(int from, int to, int il, int ci) const {
  if (held_back_[static_cast<size_t>(il) * kCutCount + ci] == 0) return 0;
  const Cut cut = kCuts[ci];
  const hal::WeightRef& w = model_.layer_weight(il, cut.part).ref();
  const int64_t have = extent_at(from, il, cut), want = extent_at(to, il, cut);
  if (want <= have) return 0;
  // Rows come back alone; columns lie in every panel, which is repacked whole for them.
  return cut.rows ? hal::row_bytes(w.type, w.cols) * static_cast<uint64_t>(want - have)
                  : hal::row_bytes(w.type, want) * static_cast<uint64_t>(w.rows);
}

uint64_t WeightResidency::restore_bytes(int level) const {
  if (level < 0 || level > full_) level = full_;
  const int resident = resident_.load(std::memory_order_relaxed);
  if (level <= resident) return 0;
  uint64_t bytes = 0;
  for (int il = 0; il < model_.config().n_layer; ++il) {
    if (model_.elastic()->anchor[static_cast<size_t>(il)]) continue;
    for (int ci = 0; ci < kCutCount; ++ci) bytes += repack_bytes(resident, level, il, ci);
  }
  return bytes;
}

double WeightResidency::restore_ms(int level) const {
  return static_cast<double>(restore_bytes(level)) * ms_per_byte_.load(std::memory_order_relaxed);
}

Status WeightResidency::make_resident(int level) {
  if (level < 0 || level > full_) level = full_;
  const int resident = resident_;
  if (level <= resident) return Status::Ok();
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t taken = 0, repacked = 0;
  // The weights restored so far stay so on a failure; the level stays out of reach.
  auto fail = [&](const Status& s) {
    released_ = released_ - std::min(released_.load(), taken);
    return s;
  };
  for (int il = 0; il < model_.config().n_layer; ++il) {
    if (model_.elastic()->anchor[static_cast<size_t>(il)]) continue;
    for (int ci = 0; ci < kCutCount; ++ci) {
      const Cut cut = kCuts[ci];
      const uint64_t bytes = repack_bytes(resident, level, il, ci);
      if (bytes == 0) continue;
      auto source = model_.relaid_source(il, cut.part);
      if (!source.ok()) return fail(source.status());
      const void* from = source->empty() ? nullptr : source->data();
      hal::PreparedWeight& w = model_.layer_weight(il, cut.part);
      const int64_t want = extent_at(level, il, cut);
      auto back = cut.rows ? device_.restore_rows(w, want, from) : device_.restore_cols(w, want, from);
      if (!back.ok()) return fail(back.status());
      taken += *back;
      repacked += bytes;
      if (level == full_) held_back_[static_cast<size_t>(il) * kCutCount + ci] = 0;
    }
  }
  // The rate restores run at, smoothed: what restore_ms predicts.
  if (repacked > 0) ms_per_byte_ = 0.5 * ms_per_byte_ + 0.5 * ms_since(t0) / static_cast<double>(repacked);
  released_ = released_ - std::min(released_.load(), taken);
  resident_ = level;
  return Status::Ok();
}

}  // namespace llmsvc
