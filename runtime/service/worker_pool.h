// SPDX-License-Identifier: Apache-2.0
// WorkerPool: a fixed set of threads running queued tasks. Each task carries a key (the
// daemon keys calls by app): keys with work waiting take turns, tasks of one key run in
// order of arrival, and at most max_per_key tasks of one key run at once. So one app's burst
// of calls neither queues another app's next call behind all of it nor takes every thread.
// The daemon keeps one pool for calls (they hold a thread for their whole generation) and one
// for the quick context operations, so a burst of calls never delays an open or a list.
//
// Leader/followers: a pool can also carry a lead, a role without a key that one of its
// threads plays at a time ahead of any task (the daemon's event loop). The thread playing it
// can swap it for a task it would otherwise queue: an idle thread takes the lead over and the
// task runs where it is, saving the task a wake-up of another thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace llmsvc::service {

class WorkerPool {
 public:
  // max_per_key 0: no limit beyond the number of threads.
  WorkerPool(int threads, const char* name, int max_per_key = 0);
  ~WorkerPool();  // runs what is queued, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void post(std::function<void()> task, const std::string& key = {});

  // Gives the lead to an idle thread (or the next to finish a task), ahead of any queued task.
  // The lead must have returned before the pool is destroyed.
  void post_lead(std::function<void()> lead);
  // From the thread playing the lead, with a task of `key` to start: when a thread is idle to
  // take `lead` over and the task could start now (its key under its limit, and no task
  // waiting that would go first), hands `lead` to that thread and returns true; the caller
  // then runs the task itself and calls finish_here(key) after it. Otherwise false: post it.
  bool swap_lead(std::function<void()> lead, const std::string& key);
  void finish_here(const std::string& key);

 private:
  struct Queue {
    std::deque<std::function<void()>> tasks;
    int running = 0;
  };
  void run();
  // The next task whose key may run another, rotating the turn past its key; false if none.
  bool take_locked(std::function<void()>& task, std::string& key);
  bool may_start_locked(const Queue& q) const { return max_per_key_ <= 0 || q.running < max_per_key_; }

  const int max_per_key_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Queue> queues_;  // keys with tasks queued or running
  std::deque<std::string> turns_;        // keys with tasks queued, the next to be served first
  std::function<void()> lead_;  // waiting for a thread to play it
  int idle_ = 0;                 // threads waiting for work
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace llmsvc::service
