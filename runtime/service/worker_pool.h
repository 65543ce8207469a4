// WorkerPool: a fixed set of threads running queued tasks in order of arrival. The daemon
// keeps one for calls (they hold a thread for their whole generation) and one for the
// quick context operations, so a burst of calls never delays an open or a list.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace llmsvc::service {

class WorkerPool {
 public:
  WorkerPool(int threads, const char* name);
  ~WorkerPool();  // runs what is queued, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void post(std::function<void()> task);

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace llmsvc::service
