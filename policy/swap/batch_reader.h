// SPDX-License-Identifier: Apache-2.0
// BatchReader: reads byte ranges of many files at once into caller buffers. Two engines:
// io_uring (uring_reader.h), and a pool of threads calling pread (pread_reader.h) where
// io_uring is unavailable (seccomp, old kernels). submit() starts a batch and returns at
// once; ReadBatch::wait() collects it, so the caller can compute while the reads run.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace llmsvc::policy {

// Alignment of a direct read's offset, buffer address and length: the largest logical block
// size of the devices swap runs on (statx's dio alignment is at most this on them).
inline constexpr size_t kDirectReadAlign = 4096;
// `bytes` rounded up to whole blocks of kDirectReadAlign: a direct read's length.
inline constexpr size_t direct_read_size(size_t bytes) {
  return (bytes + kDirectReadAlign - 1) / kDirectReadAlign * kDirectReadAlign;
}

struct ReadRequest {
  std::string path;
  uint64_t offset = 0;
  std::span<uint8_t> dest;  // must stay valid until the batch is waited for
  bool to_eof = false;      // the file ending before dest is full is not an error
  // Around the page cache (O_DIRECT): swap files are read once, cold, so the kernel's copy
  // and its page cache pages are pure overhead. Needs offset, dest's address and dest's
  // size aligned to kDirectReadAlign; otherwise, or where the file system refuses O_DIRECT,
  // the read is buffered (ReadResult::direct says which).
  bool direct = false;
  // >= 0: `path` is relative to this directory and opened beneath it, never through a
  // symbolic link (base/safe_dir.h); -1: `path` as it is. Needs to stay open only during submit.
  int dir_fd = -1;
};

struct ReadResult {
  Status status;           // missing file: not_found; anything else, or an early end of file: io
  size_t bytes = 0;        // read into dest
  uint64_t file_size = 0;  // of the file as opened (0 if it could not be)
  bool direct = false;     // read with O_DIRECT
};

enum class ReaderKind { automatic, io_uring, threads };
const char* reader_kind_name(ReaderKind k);

// A submitted batch's state, shared by its handle and the engine. Engine-internal.
struct BatchState {
  std::vector<ReadRequest> requests;
  std::vector<ReadResult> results;
  std::vector<fileio::UniqueFd> fds;  // one per request, closed as soon as its read ends
  size_t pending = 0;         // requests still reading; guarded by the engine's mutex
};

class BatchReader;

// Handle of a submitted batch. wait() returns one result per request, in order; the
// destructor waits if wait() was not called (the kernel may still be writing into the
// buffers). Keeps its engine alive.
class ReadBatch {
 public:
  ReadBatch() = default;
  ReadBatch(std::shared_ptr<BatchReader> reader, std::shared_ptr<BatchState> state)
      : reader_(std::move(reader)), state_(std::move(state)) {}
  ReadBatch(ReadBatch&&) noexcept = default;
  ReadBatch& operator=(ReadBatch&& o) noexcept;
  ~ReadBatch();

  bool valid() const { return state_ != nullptr; }
  std::vector<ReadResult> wait();

 private:
  std::shared_ptr<BatchReader> reader_;
  std::shared_ptr<BatchState> state_;
};

class BatchReader : public std::enable_shared_from_this<BatchReader> {
 public:
  virtual ~BatchReader() = default;
  virtual ReaderKind kind() const = 0;
  // Opens the files (on the calling thread) and starts the reads.
  virtual ReadBatch submit(std::vector<ReadRequest> requests) = 0;
  std::vector<ReadResult> read(std::vector<ReadRequest> requests) { return submit(std::move(requests)).wait(); }

 protected:
  friend class ReadBatch;
  // Returns when state.pending == 0.
  virtual void wait(BatchState& state) = 0;

  // For the engines: a new batch with every file opened (and fstat'ed); requests that
  // failed to open or need no bytes are complete already, the others counted in `pending`.
  static std::shared_ptr<BatchState> open_batch(std::vector<ReadRequest> requests);
  // Ends request i after `bytes` read (or err != 0): sets its result, drops its pages
  // from the page cache (the data now lives in the caller's buffer) and closes its file.
  // Does not touch `pending`.
  static void finish_request(BatchState& state, size_t i, int err, bool eof);
  // Whether request i has more to read. A direct read that ended short of a block boundary
  // met the end of the file (continuing would be a misaligned read).
  static bool wants_more(const BatchState& state, size_t i);
};

// An engine of the given kind. automatic: io_uring if the kernel allows it, else threads.
// io_uring when it is unavailable: Code::unavailable. `queue_depth`: reads in flight (io_uring);
// `threads`: workers of the fallback.
Result<std::shared_ptr<BatchReader>> make_batch_reader(ReaderKind kind, unsigned queue_depth = 128,
                                                       unsigned threads = 4);

}  // namespace llmsvc::policy
