// SPDX-License-Identifier: Apache-2.0
// SwapIo construction: picks the read engine.
#include "policy/swap/swap_io.h"

namespace llmsvc::policy {

Result<std::unique_ptr<SwapIo>> SwapIo::create(const SwapIoOptions& options) {
  auto reader = make_batch_reader(options.reader, options.queue_depth, options.reader_threads);
  if (!reader.ok()) return reader.status();
  return std::make_unique<SwapIo>(Private{}, std::move(reader).value(), options.writer);
}

}  // namespace llmsvc::policy
