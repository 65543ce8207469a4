// SPDX-License-Identifier: Apache-2.0
// Frame compression for chunk swap files: lz4 / zstd over one buffer, decompression bounded
// by the expected size (input is untrusted). Compression contexts are per thread and reused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/status.h"
#include "policy/swap/chunk_file.h"

namespace llmsvc::policy {

// Compresses `src` into `dst` with `codec` (lz4 or zstd at `zstd_level`). Returns the
// compressed size, or 0 when the result does not fit in dst.size() (the caller then stores
// the frame raw). invalid_argument for codec none or a bad level; internal for a library failure.
Result<size_t> compress_frame(ChunkCodec codec, int zstd_level, std::span<const uint8_t> src, std::span<uint8_t> dst);

// Decompresses `src` into exactly dst.size() bytes, never writing past it; Code::io when the
// input is malformed or does not decode to exactly dst.size() bytes.
Status decompress_frame(ChunkCodec codec, std::span<const uint8_t> src, std::span<uint8_t> dst);

}  // namespace llmsvc::policy
