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

Status Device::check_slice(const WeightRef& w, int64_t rows, int64_t cols) {
  if (rows <= 0 || rows > w.rows)
    return Status(Code::invalid_argument, "slice rows " + std::to_string(rows) + " out of range 1.." + std::to_string(w.rows));
  if (cols <= 0 || cols > w.cols)
    return Status(Code::invalid_argument, "slice cols " + std::to_string(cols) + " out of range 1.." + std::to_string(w.cols));
  const int64_t block = block_elems(w.type);
  if (cols % block != 0)
    return Status(Code::invalid_argument, "slice cols " + std::to_string(cols) + " not a multiple of the " +
                                              weight_type_name(w.type) + " block (" + std::to_string(block) + ")");
  return Status::Ok();
}

uint64_t Device::release_rows(PreparedWeight&, int64_t) { return 0; }

Result<uint64_t> Device::restore_rows(PreparedWeight&, int64_t, const void*) { return uint64_t{0}; }

uint64_t Device::release_cols(PreparedWeight&, int64_t) { return 0; }

Result<uint64_t> Device::restore_cols(PreparedWeight&, int64_t, const void*) { return uint64_t{0}; }

}  // namespace llmsvc::hal
