// SPDX-License-Identifier: Apache-2.0
// Recovery adapters into an elastic model's own file: checked, renamed under their level's
// prefix, the recovery keys rewritten, the result loaded back.
#include "tools/elastify/attach_recovery.h"

#include <algorithm>
#include <map>
#include <memory>

#include "hal/devices/device_registry.h"
#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/gguf/gguf_writer.h"
#include "runtime/core/model/elastic_spec.h"
#include "runtime/core/model/lora_adapter.h"
#include "runtime/core/model/model.h"

namespace llmsvc::elastify {
namespace {

constexpr const char* kLevelKey = "llmsvc.recovery.level_percent";

struct Adapter {
  std::string path;
  std::unique_ptr<gguf::GgufFile> file;
  float alpha = 0;
};

}  // namespace

Result<AttachReport> attach_recovery(const AttachOptions& o) {
  if (o.adapters.empty()) return Status(Code::invalid_argument, "attach: no adapter given");
  auto device = hal::open_device("cpu", hal::DeviceOptions{1});
  if (!device.ok()) return device.status();
  auto model = Model::load(o.input, **device);
  if (!model.ok()) return model.status();
  const ElasticSpec* spec = (*model)->elastic();
  if (!spec) return Status(Code::invalid_argument, o.input + ": not an elastic model (llmsvc elastify writes one)");

  // level percent -> adapter; those the input has stay unless replaced.
  std::map<int, Adapter> by_level;
  for (const std::string& path : o.adapters) {
    auto checked = LoraAdapter::load(path, **model, **device);  // the shapes, types and keys, as any adapter
    if (!checked.ok()) return Status(checked.status().code(), path + ": " + checked.status().message());
    auto file = gguf::GgufFile::open(path);
    if (!file.ok()) return file.status();
    auto level = (*file)->get_uint(kLevelKey);
    if (!level) return Status(Code::invalid_argument, path + ": no " + std::string(kLevelKey) + " (which level is it for?)");
    const int percent = static_cast<int>(*level);
    if (*level > 100 || spec->level_index(percent) < 0 || percent == spec->levels.back())
      return Status(Code::invalid_argument, path + ": level " + std::to_string(*level) + " is not one of the model's levels below 100");
    if (by_level.count(percent)) return Status(Code::invalid_argument, path + ": a second adapter for level " + std::to_string(percent));
    by_level[percent] = Adapter{path, std::move(file).value(), (*checked)->alpha()};
  }

  const gguf::GgufFile& in = (*model)->file();
  auto w = gguf::GgufWriter::from_file(in);
  if (!w.ok()) return w.status();
  LLMSVC_RETURN_IF_ERROR(w->add_tensors_from(in));
  std::vector<int64_t> levels;
  std::vector<double> alphas;
  for (size_t i = 0; i < spec->recovery.size(); ++i) {
    const int percent = spec->recovery[i];
    if (by_level.count(percent)) {  // replaced: the old tensors go
      for (const gguf::TensorInfo& t : in.tensors())
        if (t.name.starts_with(recovery_prefix(percent))) w->remove_tensor(t.name);
    } else {
      levels.push_back(percent);
      alphas.push_back(spec->recovery_alpha[i]);
    }
  }
  AttachReport report;
  for (const auto& [percent, a] : by_level) {
    for (const gguf::TensorInfo& t : a.file->tensors()) {
      if (!t.name.ends_with(".lora_a") && !t.name.ends_with(".lora_b")) continue;  // norms llama.cpp ignores too
      std::vector<uint64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
      LLMSVC_RETURN_IF_ERROR(w->add_tensor(recovery_prefix(percent) + t.name, t.type, ne, {t.data, t.n_bytes}));
      report.adapter_bytes += t.n_bytes;
    }
    levels.push_back(percent);
    alphas.push_back(a.alpha);
  }
  // Ascending, alphas alongside.
  std::vector<size_t> order(levels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return levels[a] < levels[b]; });
  std::vector<int64_t> sorted_levels;
  std::vector<double> sorted_alphas;
  for (size_t i : order) sorted_levels.push_back(levels[i]), sorted_alphas.push_back(alphas[i]);
  LLMSVC_RETURN_IF_ERROR(w->set("llmsvc.elastic.recovery", gguf::int_array(gguf::ValueType::i32, sorted_levels)));
  LLMSVC_RETURN_IF_ERROR(w->set("llmsvc.elastic.recovery_alpha", gguf::float_array(gguf::ValueType::f32, sorted_alphas)));
  LLMSVC_RETURN_IF_ERROR(w->write(o.output));

  // Loaded back: every level named has its adapter.
  auto back = Model::load(o.output, **device);
  if (!back.ok()) return Status(back.status().code(), o.output + " as written: " + back.status().message());
  const ElasticSpec* out_spec = (*back)->elastic();
  for (int64_t percent : sorted_levels) {
    const int index = out_spec ? out_spec->level_index(static_cast<int>(percent)) : -1;
    if (index < 0 || !(*back)->recovery_adapter(index))
      return Status(Code::internal, o.output + ": level " + std::to_string(percent) + "'s recovery adapter did not load");
    report.levels.push_back(static_cast<int>(percent));
  }
  return report;
}

}  // namespace llmsvc::elastify
