// SPDX-License-Identifier: Apache-2.0
// Device: the defaults of the optional parts (the view-driven path, for devices that take
// host pointers only; weight slicing).
#include "hal/device.h"

namespace llmsvc::hal {

namespace {
Status not_view_driven(const Device& d) {
  return Status(Code::unsupported, d.name() + " runs ops on host pointers, not on buffer views");
}
}  // namespace

Status Device::begin(const BatchBinding&) { return not_view_driven(*this); }
Status Device::run(const OpCall&) { return not_view_driven(*this); }
Status Device::end() { return not_view_driven(*this); }

Result<std::unique_ptr<PreparedWeight>> Device::slice_weight(const PreparedWeight&, int64_t, int64_t) {
  return Status(Code::unsupported, name() + " cannot slice prepared weights");
}

uint64_t Device::release_rows(PreparedWeight&, int64_t) { return 0; }

Result<uint64_t> Device::restore_rows(PreparedWeight&, int64_t) { return uint64_t{0}; }

}  // namespace llmsvc::hal
