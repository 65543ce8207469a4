// SPDX-License-Identifier: Apache-2.0
// Device: the view-driven path's defaults, for devices that take host pointers only.
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

}  // namespace llmsvc::hal
