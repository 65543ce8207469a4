// SPDX-License-Identifier: Apache-2.0
// The adapters an engine offers: loading, lookup by name, and the list syntax embedders use.
#include "runtime/core/engine/adapter_set.h"

#include <algorithm>

#include "runtime/core/engine/call_types.h"
#include "runtime/core/engine/info_types.h"

namespace llmsvc {

Result<AdapterSet> AdapterSet::load(const std::vector<std::pair<std::string, std::string>>& specs, const Model& model,
                                    hal::Device& device) {
  AdapterSet set;
  if (specs.size() > kMaxAdapters)
    return Status(Code::invalid_argument, "more than " + std::to_string(kMaxAdapters) + " adapters");
  for (const auto& [name, path] : specs) {
    LLMSVC_RETURN_IF_ERROR(check_adapter_name(name, "adapter '" + name + "'"));
    if (std::find(set.names_.begin(), set.names_.end(), name) != set.names_.end())
      return Status(Code::invalid_argument, "adapter '" + name + "' is given twice");
    auto adapter = LoraAdapter::load(path, model, device);
    if (!adapter.ok()) return Status(adapter.status().code(), "adapter '" + name + "': " + adapter.status().message());
    set.names_.push_back(name);
    set.adapters_.push_back(std::move(adapter).value());
  }
  return set;
}

Result<int> AdapterSet::find(std::string_view name) const {
  if (name.empty()) return -1;
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return static_cast<int>(i);
  std::string offered;
  for (const std::string& n : names_) offered.append(offered.empty() ? "" : ", ").append(n);
  return Status(Code::invalid_argument, "no adapter '" + std::string(name) + "': the service offers " +
                                            (offered.empty() ? std::string("none") : offered));
}

std::vector<const LoraAdapter*> AdapterSet::choices() const {
  std::vector<const LoraAdapter*> out;
  for (const auto& a : adapters_) out.push_back(a.get());
  return out;
}

}  // namespace llmsvc
