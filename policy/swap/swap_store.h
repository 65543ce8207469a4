// SPDX-License-Identifier: Apache-2.0
// SwapStore: one swap directory of chunk files, "<dir>/<chunk_index>.kvc" (chunk_file.h),
// over the shared SwapIo. Chunks are stored asynchronously; the swap-in pipeline reads a
// layer of many chunks as one batch (submit for layer l+1, compute layer l, wait).
//
// Every read checks what it reads: a missing file is Code::not_found; a damaged, truncated
// or forged file, or one written for another model or token history, is Code::io with a
// message naming the chunk and the fault. Results are per chunk: the caller recomputes
// the chunks that failed. Thread-safe; a directory belongs to one store at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/page_buffer.h"
#include "base/status.h"
#include "policy/swap/batch_reader.h"
#include "policy/swap/chunk_file.h"
#include "policy/swap/disk_quota.h"
#include "policy/swap/swap_io.h"

namespace llmsvc::policy {

// One chunk of a layer read: its index (from store or read_index) and where the layer goes
// (index->layer_bytes() bytes).
struct LayerTarget {
  const ChunkIndex* chunk = nullptr;
  std::span<uint8_t> out;
};

// A layer read in flight. wait() decodes on the calling thread and returns one Status per
// target; the destructor waits for the reads (never leaves the kernel writing).
class LayerRead {
 public:
  LayerRead() = default;
  LayerRead(LayerRead&&) noexcept = default;
  // Waits for this read's own batch before taking the other's buffers.
  LayerRead& operator=(LayerRead&& o) noexcept;

  std::vector<Status> wait();

 private:
  friend class SwapStore;
  struct Item {
    ChunkCodec codec = ChunkCodec::none;
    FrameEntry entry;
    uint32_t chunk_index = 0;
    std::span<uint8_t> frame, out;  // frame == out for an uncompressed frame
    Status status;                  // set when the target was refused before reading
    bool submitted = false;
  };
  int layer_ = 0;
  std::string dir_;
  std::vector<Item> items_;
  PageBuffer scratch_;  // compressed frames
  ReadBatch batch_;     // last: destroyed (waited for) before the buffers
};

class SwapStore;

// Whole chunks being read (SwapStore::read_chunks_async). wait() checks and decodes each
// file on the calling thread into its output and returns one result per chunk; the
// destructor waits for the reads. The store must outlive it.
class ChunkRead {
 public:
  ChunkRead() = default;
  ChunkRead(ChunkRead&&) noexcept = default;
  // Waits for this read's own batch before taking the other's buffers.
  ChunkRead& operator=(ChunkRead&& o) noexcept;

  std::vector<Result<ChunkIndex>> wait();

 private:
  friend class SwapStore;
  struct Item {
    ChunkMeta expected;
    std::span<uint8_t> out, file;  // file: its read buffer, within files_
    Status status;                 // set when the chunk was refused before reading
    bool submitted = false;
  };
  const SwapStore* store_ = nullptr;
  std::vector<Item> items_;
  PageBuffer files_;  // every file's buffer, each page-aligned and sized for a direct read
  ReadBatch batch_;   // last: destroyed (waited for) before the buffers
};

class SwapStore {
 public:
  // Creates `dir` if needed (its parent must exist) and removes temporary files an
  // interrupted write left there. `io` must outlive the store.
  static Result<std::unique_ptr<SwapStore>> open(SwapIo& io, std::string dir, const ChunkEncoding& encoding = {});
  // The same for directory `rel` below `base` (a context's chunks/ below the state root):
  // created if needed (its parent too), and from then on held open, every file opened
  // beneath it, so a symbolic link planted at `rel`, on its path or as a chunk file is
  // refused, never followed.
  static Result<std::unique_ptr<SwapStore>> open(SwapIo& io, const fileio::SafeDir& base, std::string_view rel,
                                                 const ChunkEncoding& encoding = {});

  // How messages name the directory and a chunk's file.
  const std::string& dir() const { return dir_->name(); }
  std::string path(uint32_t chunk_index) const;

  // Charges this store's files to `quota` from now on: the files present are counted (stat),
  // and a write that would take the owner past its limit is refused with
  // Code::quota_exceeded (nothing written; the chunk's older file, stale by then, is removed
  // and uncounted). A file's bytes count from when its write is queued until it is removed
  // or the store closes (a failed write stays counted until the chunk is written again).
  // Call once, before any write.
  Status set_quota(std::shared_ptr<DiskQuota> quota);
  // Bytes of the files this store counts (0 without a quota).
  uint64_t counted_bytes() const;
  ~SwapStore();

  // Encodes on the calling thread (so `payload` may be freed on return) and queues the
  // write; `done` gets the file's index once it is durable, or the write's error, on the
  // writer thread. A bad meta / payload, or one past the quota, is returned at once and
  // `done` is not called.
  using StoreDone = std::function<void(Result<ChunkIndex>)>;
  Status store_async(const ChunkMeta& meta, std::span<const uint8_t> payload, StoreDone done);
  Result<ChunkIndex> store(const ChunkMeta& meta, std::span<const uint8_t> payload);

  // Reads and validates the headers of the chunks described by `expected` (one batch).
  // A file whose meta differs from its expected meta is Code::io ("stale").
  std::vector<Result<ChunkIndex>> read_indices(std::span<const ChunkMeta> expected);
  Result<ChunkIndex> read_index(const ChunkMeta& expected);

  // Starts reading layer `layer` of each target's chunk into its `out` (which must stay valid
  // until wait()); the frame entries are copied, so the indices need not outlive the call.
  LayerRead read_layer_async(int layer, std::span<const LayerTarget> targets);
  std::vector<Status> read_layer(int layer, std::span<const LayerTarget> targets);

  // Reads a whole chunk (one read of the whole file) into `out` (chunk_payload_bytes(expected)
  // bytes); returns its index.
  Result<ChunkIndex> read_chunk(const ChunkMeta& expected, std::span<uint8_t> out);
  // read_chunk for many chunks as one batch of reads (outs[i] for expected[i]); one result
  // per chunk. Each file is held in memory until decoded: callers bound the batch. The
  // files are read around the page cache (O_DIRECT) where the file system allows it.
  std::vector<Result<ChunkIndex>> read_chunks(std::span<const ChunkMeta> expected,
                                              std::span<const std::span<uint8_t>> outs);
  // Starts read_chunks; `outs` must stay valid until wait(). The caller can decode one
  // batch while the next one's reads are in flight.
  ChunkRead read_chunks_async(std::span<const ChunkMeta> expected, std::span<const std::span<uint8_t>> outs);

  // Removes a chunk's file, after the writes queued before; missing: Code::not_found.
  Status remove(uint32_t chunk_index);
  void remove_async(uint32_t chunk_index, SwapWriter::Done done);
  // The chunk indices present, ascending.
  Result<std::vector<uint32_t>> list() const;
  // Waits for the writes and removals queued so far (of every store sharing the SwapIo).
  void flush() { io_.flush(); }
  // Bytes of queued writes not yet done (of every store sharing the SwapIo).
  uint64_t pending_write_bytes() { return io_.writer().pending_bytes(); }

  struct Private {};
  SwapStore(Private, SwapIo& io, fileio::SafeDirRef dir, const ChunkEncoding& encoding)
      : io_(io), dir_(std::move(dir)), encoding_(encoding) {}

 private:
  // The file bytes of a chunk, and their index.
  Result<PageBuffer> encode(const ChunkMeta& meta, std::span<const uint8_t> payload, ChunkIndex* index) const;
  // "chunk <i> (<path>): " + status's message, same code.
  Status for_chunk(uint32_t chunk_index, const Status& s) const;
  friend class ChunkRead;
  // Checks and decodes a whole file read into `buffer` (res: the read's outcome) into `out`.
  Result<ChunkIndex> decode_file(const ChunkMeta& expected, const ReadResult& res, std::span<const uint8_t> buffer,
                                 std::span<uint8_t> out) const;
  // Code::io ("stale chunk file") unless the file's meta is the expected one.
  Status check_expected(const ChunkIndex& index, const ChunkMeta& expected) const;

  // A read of chunk `chunk_index`'s file, opened beneath dir_.
  ReadRequest request(uint32_t chunk_index, uint64_t offset, std::span<uint8_t> dest, bool to_eof,
                      bool direct = false) const;

  // Quota accounting of chunk `chunk_index`'s next file of `bytes`: ok, or quota_exceeded
  // (its older file then removed and uncounted). Without a quota: ok.
  Status charge_file(uint32_t chunk_index, uint64_t bytes);
  // Uncounts chunk `chunk_index`'s file (removed).
  void uncharge_file(uint32_t chunk_index);

  SwapIo& io_;
  fileio::SafeDirRef dir_;  // held open: its files are opened beneath it
  ChunkEncoding encoding_;
  std::shared_ptr<DiskQuota> quota_;
  mutable std::mutex counted_mu_;
  std::unordered_map<uint32_t, uint64_t> counted_;  // file bytes by chunk index
  uint64_t counted_total_ = 0;
};

// The first field in which two metas differ ("tokens_hash", ...), or "" if equal.
std::string chunk_meta_difference(const ChunkMeta& a, const ChunkMeta& b);

}  // namespace llmsvc::policy
