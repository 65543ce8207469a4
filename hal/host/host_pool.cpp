// SPDX-License-Identifier: Apache-2.0
// HostPool: blocks from host_alloc, handed back through HostFree.
#include "hal/host/host_pool.h"

#include "hal/host/host_memory.h"

namespace llmsvc::hal::host {

MemoryPool::Block HostPool::allocate(size_t bytes) {
  HostMem m = host_alloc(bytes);
  uint8_t* p = m.release();
  return Block{p, p};
}

void HostPool::release(const Block& block, size_t bytes) noexcept { HostFree{bytes}(block.host); }

HostPool& shared_host_pool() {
  static HostPool* pool = new HostPool("host", 0);  // never destroyed: chunks may be freed during exit
  return *pool;
}

}  // namespace llmsvc::hal::host
