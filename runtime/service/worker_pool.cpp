// WorkerPool: threads over a task queue.
#include "runtime/service/worker_pool.h"

#include <pthread.h>

namespace llmsvc::service {

WorkerPool::WorkerPool(int threads, const char* name) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { run(); });
    ::pthread_setname_np(threads_.back().native_handle(), name);
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::post(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void WorkerPool::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace llmsvc::service
