// SPDX-License-Identifier: Apache-2.0
#include "runtime/core/model/weight_residency.h"

#include <algorithm>
#include <chrono>

namespace llmsvc {

namespace {

constexpr Model::LevelPart kReleasable[] = {Model::LevelPart::gate, Model::LevelPart::up};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

WeightResidency::WeightResidency(Model& model, hal::Device& device) : model_(model), device_(device) {
  const ElasticSpec* spec = model.elastic();
  if (spec == nullptr || !model.levels_status().ok() || model.config().n_layer == 0) return;
  full_ = resident_ = spec->full();
  // The first cut layer's gate, released at the smallest level and repacked at once: whether
  // this device gives anything back, and how fast it repacks.
  for (int il = 0; il < model.config().n_layer; ++il) {
    if (spec->anchor[static_cast<size_t>(il)]) continue;
    hal::PreparedWeight& w = model.layer_weight(il, Model::LevelPart::gate);
    const uint64_t bytes = device.release_rows(w, rows_at(0, il, Model::LevelPart::gate));
    if (bytes == 0) return;
    const auto t0 = std::chrono::steady_clock::now();
    auto back = device.restore_rows(w, w.ref().rows);
    can_release_ = true;
    if (!back.ok()) {  // left released: the first turn above level 0 takes it back
      resident_ = 0;
      released_ = bytes;
      return;
    }
    ms_per_byte_ = ms_since(t0) / static_cast<double>(std::max<uint64_t>(*back, 1));
    return;
  }
}

int64_t WeightResidency::rows_at(int level, int il, Model::LevelPart part) const {
  const hal::PreparedWeight* view = model_.level_weight(level, il, part);
  return view != nullptr ? view->ref().rows : model_.layer_weight(il, part).ref().rows;
}

uint64_t WeightResidency::release_above(int level) {
  if (!can_release_ || level < 0 || level >= full_ || level >= resident_) return 0;
  uint64_t bytes = 0;
  for (int il = 0; il < model_.config().n_layer; ++il) {
    if (model_.elastic()->anchor[static_cast<size_t>(il)]) continue;  // pinned: every level reads all of it
    for (Model::LevelPart part : kReleasable)
      bytes += device_.release_rows(model_.layer_weight(il, part), rows_at(level, il, part));
  }
  released_ += bytes;
  resident_ = level;
  return bytes;
}

uint64_t WeightResidency::restore_bytes(int level) const {
  if (level < 0 || level > full_) level = full_;
  const int resident = resident_.load(std::memory_order_relaxed);
  if (level <= resident) return 0;
  uint64_t bytes = 0;
  for (int il = 0; il < model_.config().n_layer; ++il) {
    if (model_.elastic()->anchor[static_cast<size_t>(il)]) continue;
    for (Model::LevelPart part : kReleasable) {
      const hal::WeightRef& w = model_.layer_weight(il, part).ref();
      const int64_t rows = rows_at(level, il, part) - rows_at(resident, il, part);
      if (rows > 0) bytes += hal::row_bytes(w.type, w.cols) * static_cast<uint64_t>(rows);
    }
  }
  return bytes;
}

double WeightResidency::restore_ms(int level) const {
  return static_cast<double>(restore_bytes(level)) * ms_per_byte_.load(std::memory_order_relaxed);
}

Status WeightResidency::make_resident(int level) {
  if (level < 0 || level > full_) level = full_;
  if (level <= resident_) return Status::Ok();
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  for (int il = 0; il < model_.config().n_layer; ++il) {
    if (model_.elastic()->anchor[static_cast<size_t>(il)]) continue;
    for (Model::LevelPart part : kReleasable) {
      auto back = device_.restore_rows(model_.layer_weight(il, part), rows_at(level, il, part));
      if (!back.ok()) {  // the weights restored so far stay so; the level stays out of reach
        released_ = released_ - std::min(released_.load(), bytes);
        return back.status();
      }
      bytes += *back;
    }
  }
  // The rate restores run at, smoothed: what restore_ms predicts.
  if (bytes > 0) ms_per_byte_ = 0.5 * ms_per_byte_ + 0.5 * ms_since(t0) / static_cast<double>(bytes);
  released_ = released_ - std::min(released_.load(), bytes);
  resident_ = level;
  return Status::Ok();
}

}  // namespace llmsvc
