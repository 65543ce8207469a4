// SPDX-License-Identifier: Apache-2.0
// Batched reads on worker threads with pread.
#include "policy/swap/pread_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace llmsvc::policy {

PreadReader::PreadReader(unsigned threads) {
  const unsigned n = std::max(1u, threads);
  workers_.reserve(n);
  for (unsigned i = 0; i < n; ++i) workers_.emplace_back([this] { worker(); });
}

PreadReader::~PreadReader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

ReadBatch PreadReader::submit(std::vector<ReadRequest> requests) {
  std::shared_ptr<BatchState> state = open_batch(std::move(requests));
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < state->requests.size(); ++i)
      if (state->fds[i].valid()) queue_.push_back({state, i});
  }
  work_cv_.notify_all();
  return ReadBatch(shared_from_this(), state);
}

void PreadReader::wait(BatchState& state) {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return state.pending == 0; });
}

void PreadReader::worker() {
  for (;;) {
    Work w;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and drained
      w = std::move(queue_.front());
      queue_.pop_front();
    }
    BatchState& s = *w.state;
    const ReadRequest& r = s.requests[w.index];
    ReadResult& res = s.results[w.index];
    int err = 0;
    bool eof = false;
    while (wants_more(s, w.index)) {
      const ssize_t n = ::pread(s.fds[w.index].get(), r.dest.data() + res.bytes, r.dest.size() - res.bytes,
                                static_cast<off_t>(r.offset + res.bytes));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        err = errno;
        break;
      }
      if (n == 0) {
        eof = true;
        break;
      }
      res.bytes += static_cast<size_t>(n);
    }
    if (err == 0 && res.bytes < r.dest.size()) eof = true;  // a direct read's end of file
    finish_request(s, w.index, err, eof);
    {
      std::lock_guard<std::mutex> lock(mu_);
      --s.pending;
    }
    done_cv_.notify_all();
  }
}

}  // namespace llmsvc::policy
