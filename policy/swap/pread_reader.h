// SPDX-License-Identifier: Apache-2.0
// PreadReader: the batch reader without io_uring: worker threads pread the requests of
// every submitted batch (several at once, so that the device sees a queue).
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "policy/swap/batch_reader.h"

namespace llmsvc::policy {

class PreadReader final : public BatchReader {
 public:
  explicit PreadReader(unsigned threads);
  // Finishes the reads already queued, then stops the workers.
  ~PreadReader() override;

  ReaderKind kind() const override { return ReaderKind::threads; }
  ReadBatch submit(std::vector<ReadRequest> requests) override;

 protected:
  void wait(BatchState& state) override;

 private:
  struct Work {
    std::shared_ptr<BatchState> state;  // kept alive until the read ends
    size_t index;
  };
  void worker();

  std::mutex mu_;
  std::condition_variable work_cv_;  // work queued, or stopping
  std::condition_variable done_cv_;  // some request finished
  std::deque<Work> queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace llmsvc::policy
