// SPDX-License-Identifier: Apache-2.0
// Batch bookkeeping shared by the read engines, and engine selection.
#include "policy/swap/batch_reader.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <limits>

#include "base/file_io.h"
#include "base/safe_dir.h"
#include "policy/swap/pread_reader.h"
#include "policy/swap/uring_reader.h"

namespace llmsvc::policy {

const char* reader_kind_name(ReaderKind k) {
  switch (k) {
    case ReaderKind::automatic: return "automatic";
    case ReaderKind::io_uring: return "io_uring";
    case ReaderKind::threads: return "threads";
  }
  return "unknown";
}

ReadBatch& ReadBatch::operator=(ReadBatch&& o) noexcept {
  if (this != &o) {
    if (state_) wait();
    reader_ = std::move(o.reader_);
    state_ = std::move(o.state_);
  }
  return *this;
}

ReadBatch::~ReadBatch() {
  if (state_) wait();
}

std::vector<ReadResult> ReadBatch::wait() {
  if (!state_) return {};
  reader_->wait(*state_);
  std::vector<ReadResult> results = std::move(state_->results);
  state_.reset();
  reader_.reset();
  return results;
}

std::shared_ptr<BatchState> BatchReader::open_batch(std::vector<ReadRequest> requests) {
  auto state = std::make_shared<BatchState>();
  state->requests = std::move(requests);
  const size_t n = state->requests.size();
  state->results.resize(n);
  state->fds.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const ReadRequest& r = state->requests[i];
    ReadResult& res = state->results[i];
    if (r.offset > uint64_t(std::numeric_limits<off_t>::max()) - r.dest.size()) {
      res.status = Status(Code::invalid_argument, "swap read " + r.path + ": range out of bounds");
      continue;
    }
    const bool aligned = r.direct && r.offset % kDirectReadAlign == 0 && r.dest.size() % kDirectReadAlign == 0 &&
                         reinterpret_cast<uintptr_t>(r.dest.data()) % kDirectReadAlign == 0;
    auto open_file = [&r](int flags) {
      return r.dir_fd >= 0 ? fileio::open_beneath(r.dir_fd, r.path, flags) : ::open(r.path.c_str(), flags | O_CLOEXEC);
    };
    fileio::UniqueFd fd;
    int err = 0;
    if (aligned) {
      fd.reset(open_file(O_RDONLY | O_DIRECT));
      err = fd.valid() ? 0 : errno;
      res.direct = fd.valid();
    }
    // Not aligned, or the file system has no O_DIRECT (EINVAL): buffered.
    if (!fd.valid() && (!aligned || err == EINVAL)) {
      fd.reset(open_file(O_RDONLY));
      err = fd.valid() ? 0 : errno;
    }
    if (!fd.valid()) {
      res.status = err == ENOENT ? Status(Code::not_found, "swap read " + r.path + ": no such file")
                                 : fileio::io_status(err, "swap read " + r.path);
      continue;
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
      res.status = fileio::io_status(errno, "swap read " + r.path + ": fstat");
      continue;
    }
    res.file_size = static_cast<uint64_t>(st.st_size);
    if (r.dest.empty()) continue;
    state->fds[i] = std::move(fd);
    ++state->pending;
  }
  return state;
}

void BatchReader::finish_request(BatchState& state, size_t i, int err, bool eof) {
  const ReadRequest& r = state.requests[i];
  ReadResult& res = state.results[i];
  if (err != 0) {
    res.status = fileio::io_status(err, "swap read " + r.path);
  } else if (eof && res.bytes < r.dest.size() && !r.to_eof) {
    res.status = Status(Code::io, "swap read " + r.path + ": unexpected end of file (" + std::to_string(res.bytes) +
                                      " of " + std::to_string(r.dest.size()) + " bytes at offset " +
                                      std::to_string(r.offset) + ")");
  }
  // The bytes now live in the caller's buffer; a second copy in the page cache would only
  // take memory from the budget swap is freeing. (A direct read made none.)
  if (res.bytes > 0 && !res.direct)
    ::posix_fadvise(state.fds[i].get(), static_cast<off_t>(r.offset), static_cast<off_t>(res.bytes),
                    POSIX_FADV_DONTNEED);
  state.fds[i].reset();
}

bool BatchReader::wants_more(const BatchState& state, size_t i) {
  const ReadResult& res = state.results[i];
  return res.bytes < state.requests[i].dest.size() && !(res.direct && res.bytes % kDirectReadAlign != 0);
}

Result<std::shared_ptr<BatchReader>> make_batch_reader(ReaderKind kind, unsigned queue_depth, unsigned threads) {
  if (kind != ReaderKind::threads) {
    auto uring = UringReader::create(queue_depth);
    if (uring.ok()) return std::shared_ptr<BatchReader>(std::move(uring).value());
    if (kind == ReaderKind::io_uring) return uring.status();
  }
  return std::shared_ptr<BatchReader>(std::make_shared<PreadReader>(threads));
}

}  // namespace llmsvc::policy
