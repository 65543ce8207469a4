// SPDX-License-Identifier: Apache-2.0
// lz4 / zstd frame codecs with bounded decompression.
#include "policy/swap/frame_codec.h"

#include <lz4.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <string>

namespace llmsvc::policy {
namespace {

struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxFree {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

// One context per thread: allocating a zstd context costs more than compressing a small frame.
ZSTD_CCtx* thread_cctx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxFree> ctx(ZSTD_createCCtx());
  return ctx.get();
}
ZSTD_DCtx* thread_dctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxFree> ctx(ZSTD_createDCtx());
  return ctx.get();
}

}  // namespace

Result<size_t> compress_frame(ChunkCodec codec, int zstd_level, std::span<const uint8_t> src, std::span<uint8_t> dst) {
  // lz4's sizes are int; frames are bounded by kMaxChunkLayerBytes, far below.
  if (src.size() > INT_MAX) return Status(Code::invalid_argument, "frame too large to compress");
  const int cap = static_cast<int>(std::min<size_t>(dst.size(), INT_MAX));
  switch (codec) {
    case ChunkCodec::lz4: {
      // 0 means "did not fit": the caller stores the frame raw.
      const int n = LZ4_compress_default(reinterpret_cast<const char*>(src.data()), reinterpret_cast<char*>(dst.data()),
                                         static_cast<int>(src.size()), cap);
      return static_cast<size_t>(n > 0 ? n : 0);
    }
    case ChunkCodec::zstd: {
      if (zstd_level < ZSTD_minCLevel() || zstd_level > ZSTD_maxCLevel())
        return Status(Code::invalid_argument, "zstd level " + std::to_string(zstd_level) + " out of range");
      ZSTD_CCtx* cctx = thread_cctx();
      if (cctx == nullptr) return Status(Code::out_of_memory, "zstd: cannot allocate a compression context");
      const size_t n = ZSTD_compressCCtx(cctx, dst.data(), dst.size(), src.data(), src.size(), zstd_level);
      if (ZSTD_isError(n)) {
        if (ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall) return size_t{0};
        return Status(Code::internal, std::string("zstd: ") + ZSTD_getErrorName(n));
      }
      return n;
    }
    case ChunkCodec::none: break;
  }
  return Status(Code::invalid_argument, "compress_frame: codec none");
}

Status decompress_frame(ChunkCodec codec, std::span<const uint8_t> src, std::span<uint8_t> dst) {
  switch (codec) {
    case ChunkCodec::lz4: {
      if (src.size() > INT_MAX || dst.size() > INT_MAX) return Status(Code::io, "lz4 frame too large");
      const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(src.data()), reinterpret_cast<char*>(dst.data()),
                                        static_cast<int>(src.size()), static_cast<int>(dst.size()));
      if (n < 0) return Status(Code::io, "lz4 frame is malformed");
      if (static_cast<size_t>(n) != dst.size())
        return Status(Code::io, "lz4 frame decodes to " + std::to_string(n) + " bytes, expected " +
                                    std::to_string(dst.size()));
      return Status::Ok();
    }
    case ChunkCodec::zstd: {
      ZSTD_DCtx* dctx = thread_dctx();
      if (dctx == nullptr) return Status(Code::out_of_memory, "zstd: cannot allocate a decompression context");
      // One-shot decompression writes straight into dst and stops at its end: a forged frame
      // header announcing a larger content size or window cannot make it write or allocate more.
      const size_t n = ZSTD_decompressDCtx(dctx, dst.data(), dst.size(), src.data(), src.size());
      if (ZSTD_isError(n)) return Status(Code::io, std::string("zstd frame is malformed: ") + ZSTD_getErrorName(n));
      if (n != dst.size())
        return Status(Code::io, "zstd frame decodes to " + std::to_string(n) + " bytes, expected " +
                                    std::to_string(dst.size()));
      return Status::Ok();
    }
    case ChunkCodec::none: break;
  }
  return Status(Code::internal, "decompress_frame: codec none");
}

}  // namespace llmsvc::policy
