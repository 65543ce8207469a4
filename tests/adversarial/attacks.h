// SPDX-License-Identifier: Apache-2.0
// The attacks of the adversarial suite, each run against a live llmsvcd while honest apps
// (other uids, through libllmsvc as real apps) keep calling, with the daemon's resident memory
// sampled throughout. The tests (test_hostile_clients.cpp) assert on the reports; the
// benchmark (bench/service/bench_attacks.cpp) prints them as the before/after table.
//
// Every attacker and honest app is its own uid (as_uid): llmsvcd's per-app quotas see them as
// the apps they would be on a device. Needs root (to take those uids) and a daemon whose
// socket directory other uids may traverse.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/adversarial/hostile_client.h"

namespace llmsvc::test {

// The daemon under attack.
struct Target {
  std::string socket_path;
  std::string state_dir;
  std::string log_path;
  pid_t pid = -1;
};

// Samples the daemon's VmRSS every 20 ms until stopped: the peak and the last reading.
class RssSampler {
 public:
  explicit RssSampler(pid_t pid);
  ~RssSampler();
  void stop();
  uint64_t peak() const { return peak_.load(); }
  uint64_t last() const { return last_.load(); }

 private:
  pid_t pid_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> peak_{0}, last_{0};
  std::thread thread_;
};

// Honest apps: `count` uids from `first_uid`, each with its own binding and raw context,
// calling a short greedy prompt in a loop on its own thread while running().
class HonestApps {
 public:
  HonestApps(const Target& target, int count, uid_t first_uid);
  ~HonestApps();
  // Binds every app and makes its context; false (and why) when one cannot.
  bool start(std::string* why);
  // Calls in a loop on every app until stop(), at least one call each; the latencies of
  // this round are kept.
  void run();
  void stop();
  // This round's figures.
  int calls() const;
  int count() const { return count_; }
  int apps_served() const;  // apps with at least one call answered this round
  int errors() const;
  std::string first_error() const;
  double p50_ms() const;
  double max_ms() const;

 private:
  struct App;
  Target target_;
  int count_;
  uid_t first_uid_;
  std::vector<std::unique_ptr<App>> apps_;
  std::atomic<bool> running_{false};
  std::vector<std::thread> threads_;
};

// What an attack did and how the daemon answered it.
struct AttackOutcome {
  int connections = 0;  // the attacker's connection attempts
  int refused = 0, throttled = 0, disconnected = 0, left_open = 0;
  uint64_t bytes_sent = 0;
  std::string note;  // anything worth a line in the table
  // The outcome in a few words: what most of the attacker's connections met.
  std::string summary() const;
};

// Knobs of the attacks (the defaults are the figures).
struct AttackPlan {
  double seconds = 15;       // how long each attack lasts
  uid_t attacker_uid = 30000;  // the first attacker uid (some attacks use several)
};

// A client that floods cheap requests with large answers (CONTEXT_LIST over 64 contexts with
// 64-byte ids, STATS) and reads nothing, on `connections` connections of one app.
AttackOutcome flood_without_reading(const Target& t, const AttackPlan& plan, int connections);
// The same, but reading 16 bytes every 2 s (dodging a read deadline).
AttackOutcome trickle_reader(const Target& t, const AttackPlan& plan, int connections);
// After the handshake, a frame header claiming a 1 MiB payload and no payload, on
// `connections` connections spread over `apps` uids; held open.
AttackOutcome claimed_length_headers(const Target& t, const AttackPlan& plan, int connections, int apps);
// One app opens as many connections as it can (up to `connections`).
AttackOutcome descriptor_exhaustion(const Target& t, const AttackPlan& plan, int connections);
// One app creates contexts with big system prompts as fast as it can (and one past n_ctx).
AttackOutcome context_flood(const Target& t, const AttackPlan& plan, size_t system_prompt_bytes);
// `connections` connections that send garbage at once (each a protocol error to log).
AttackOutcome log_flood(const Target& t, const AttackPlan& plan, int connections);
// `connections` connections over `apps` uids interleaving valid requests and invalid frames,
// reconnecting when closed.
AttackOutcome interleaved_frames(const Target& t, const AttackPlan& plan, int connections, int apps);

// Lines in the daemon's log.
size_t log_lines(const std::string& log_path);
// Bytes of regular files under `dir` (0 if absent).
uint64_t tree_bytes(const std::string& dir);

}  // namespace llmsvc::test
