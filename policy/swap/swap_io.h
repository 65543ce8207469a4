// SPDX-License-Identifier: Apache-2.0
// SwapIo: the swap I/O engine of one service: one writer thread (swap_writer.h) and one
// batch reader (batch_reader.h: io_uring, or threads with pread where io_uring is
// unavailable), shared by every swap directory. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "policy/swap/batch_reader.h"
#include "policy/swap/swap_dir.h"
#include "policy/swap/swap_writer.h"

namespace llmsvc::policy {

struct SwapIoOptions {
  ReaderKind reader = ReaderKind::automatic;
  unsigned queue_depth = 128;   // io_uring: reads in flight
  unsigned reader_threads = 4;  // fallback: concurrent preads
  SwapWriterOptions writer;
};

class SwapIo {
 public:
  // reader == io_uring where the kernel refuses it: Code::unavailable.
  static Result<std::unique_ptr<SwapIo>> create(const SwapIoOptions& options = {});
  // Drains the writer (every queued write completes).
  ~SwapIo() = default;
  SwapIo(const SwapIo&) = delete;
  SwapIo& operator=(const SwapIo&) = delete;

  ReaderKind reader_kind() const { return reader_->kind(); }
  SwapWriter& writer() { return writer_; }
  BatchReader& reader() { return *reader_; }

  // Writes and removals: SwapWriter's, in one order.
  void write_async(SwapPath path, PageBuffer bytes, SwapWriter::Done done) {
    writer_.write_async(std::move(path), std::move(bytes), std::move(done));
  }
  void write_async(SwapPath path, std::span<const uint8_t> bytes, SwapWriter::Done done) {
    writer_.write_async(std::move(path), bytes, std::move(done));
  }
  Status write(SwapPath path, std::span<const uint8_t> bytes) { return writer_.write(std::move(path), bytes); }
  void remove_async(SwapPath path, SwapWriter::Done done) { writer_.remove_async(std::move(path), std::move(done)); }
  Status remove(SwapPath path) { return writer_.remove(std::move(path)); }
  void flush() { writer_.flush(); }

  // Batched reads: submit now, wait later; or both at once.
  ReadBatch submit_reads(std::vector<ReadRequest> requests) { return reader_->submit(std::move(requests)); }
  std::vector<ReadResult> read(std::vector<ReadRequest> requests) { return reader_->read(std::move(requests)); }

  // The chunk files of a directory (swap_dir.h).
  Result<std::vector<uint32_t>> list_chunk_files(const std::string& dir) const { return policy::list_chunk_files(dir); }

 private:
  struct Private {};

 public:
  SwapIo(Private, std::shared_ptr<BatchReader> reader, const SwapWriterOptions& w)
      : reader_(std::move(reader)), writer_(w) {}

 private:

  std::shared_ptr<BatchReader> reader_;
  SwapWriter writer_;
};

}  // namespace llmsvc::policy
