// SPDX-License-Identifier: Apache-2.0
// WorkerPool: threads over per-key task queues served in turns.
#include "runtime/service/worker_pool.h"

#include <pthread.h>

namespace llmsvc::service {

WorkerPool::WorkerPool(int threads, const char* name, int max_per_key) : max_per_key_(max_per_key) {
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

void WorkerPool::post(std::function<void()> task, const std::string& key) {
  {
    std::lock_guard lock(mu_);
    Queue& q = queues_[key];
    if (q.tasks.empty()) turns_.push_back(key);
    q.tasks.push_back(std::move(task));
  }
  cv_.notify_one();
}

void WorkerPool::post_lead(std::function<void()> lead) {
  {
    std::lock_guard lock(mu_);
    lead_ = std::move(lead);
  }
  cv_.notify_one();
}

bool WorkerPool::swap_lead(std::function<void()> lead, const std::string& key) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || lead_ || idle_ == 0) return false;
    for (const std::string& k : turns_)
      if (may_start_locked(queues_[k])) return false;  // its turn comes first
    Queue& q = queues_[key];
    if (!may_start_locked(q)) return false;  // (running, so the entry stays)
    q.running++;
    lead_ = std::move(lead);
  }
  // Every waiting thread takes a lead before a task, so the one woken plays it.
  cv_.notify_one();
  return true;
}

void WorkerPool::finish_here(const std::string& key) {
  bool stopping = false;
  {
    std::lock_guard lock(mu_);
    Queue& q = queues_[key];
    if (--q.running == 0 && q.tasks.empty()) queues_.erase(key);
    stopping = stopping_;
  }
  // A task that the key's limit held back can run now, and the finishing thread looks for it
  // first thing (a pool thread goes straight back to wait, which takes it): no other thread
  // is woken for it (waking the idle ones after every call cost the app waiting for the
  // answer its CPU on a small machine). When stopping, the idle ones wait for the queue to
  // empty, so they are told.
  if (stopping) cv_.notify_all();
}

bool WorkerPool::take_locked(std::function<void()>& task, std::string& key) {
  for (auto it = turns_.begin(); it != turns_.end(); ++it) {
    Queue& q = queues_[*it];
    if (!may_start_locked(q)) continue;
    key = *it;
    task = std::move(q.tasks.front());
    q.tasks.pop_front();
    q.running++;
    turns_.erase(it);
    if (!q.tasks.empty()) turns_.push_back(key);  // its next task waits for the other keys' turns
    return true;
  }
  return false;
}

void WorkerPool::run() {
  for (;;) {
    std::function<void()> task;
    std::string key;
    bool lead = false;
    {
      std::unique_lock lock(mu_);
      ++idle_;
      cv_.wait(lock, [&] {
        if (lead_) {
          task = std::move(lead_);
          lead_ = nullptr;
          return lead = true;
        }
        return (stopping_ && turns_.empty()) || take_locked(task, key);
      });
      --idle_;
      if (!task) return;
    }
    task();
    task = nullptr;  // its captures go before the key's slot is given back
    if (lead) continue;  // no key: it may have swapped itself for a task, finished already
    finish_here(key);
  }
}

}  // namespace llmsvc::service
