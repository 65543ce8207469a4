// SPDX-License-Identifier: Apache-2.0
// RangeAllocator: first-fit allocation of byte ranges inside one fixed-size region, with free
// neighbours merged on release. How a device pool carves one large device object (an OpenCL
// buffer the kernels reach through a single handle) into many buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

namespace llmsvc::hal {

class RangeAllocator {
 public:
  // size: the region's bytes; align: every range's start and length rounded up to it (a power of two).
  RangeAllocator(uint64_t size, uint64_t align);
  // The start of a free range of `bytes` (rounded up to the alignment), or nothing when no
  // free range is that large (fragmentation included).
  std::optional<uint64_t> take(uint64_t bytes);
  // Gives back the range take() returned at `offset` for `bytes`.
  void give(uint64_t offset, uint64_t bytes);
  uint64_t free_bytes() const { return free_bytes_; }
  uint64_t largest_free() const;

 private:
  uint64_t round(uint64_t b) const { return (b + align_ - 1) & ~(align_ - 1); }
  const uint64_t align_;
  std::map<uint64_t, uint64_t> free_;  // start -> length, disjoint and never adjacent
  uint64_t free_bytes_;
};

}  // namespace llmsvc::hal
