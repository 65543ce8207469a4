// SPDX-License-Identifier: Apache-2.0
// AdapterSet: the LoRA adapters an engine offers, by name — loaded once at start, chosen per
// context and per call by name, run by the Forward as its adapter choices.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "hal/device.h"
#include "runtime/core/model/lora_adapter.h"
#include "runtime/core/model/model.h"

namespace llmsvc {

class AdapterSet {
 public:
  AdapterSet() = default;
  // Loads each (name, path), in order, for `model` on `device`: a name that is not valid or
  // is given twice is invalid_argument, a file that fails LoraAdapter::load its status with
  // the adapter's name in front.
  static Result<AdapterSet> load(const std::vector<std::pair<std::string, std::string>>& specs, const Model& model,
                                 hal::Device& device);

  // The index of adapter `name` (the Forward's adapter choice); "" is -1 (none). A name not
  // offered is invalid_argument, naming those that are.
  Result<int> find(std::string_view name) const;
  // The adapters in index order (Forward::set_adapters).
  std::vector<const LoraAdapter*> choices() const;
  const std::vector<std::string>& names() const { return names_; }
  bool empty() const { return names_.empty(); }

 private:
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<LoraAdapter>> adapters_;
};

}  // namespace llmsvc
