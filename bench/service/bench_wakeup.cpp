// SPDX-License-Identifier: Apache-2.0
// What one thread waking another costs on this machine: a byte over a pipe and back between
// two threads, after an idle gap (so the woken side sleeps, as llmsvcd's threads do between
// requests), with the two threads on the same CPU and on different CPUs. Each daemon round
// trip is a chain of such wake-ups (client, loop, worker, loop, client), so this is the floor
// under bench_daemon_overhead's added latency.
//
//   bench_wakeup [--rounds 1000] [--gap-us 3000]
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (const int err = pthread_setaffinity_np(pthread_self(), sizeof set, &set); err != 0) {
    std::fprintf(stderr, "cannot run a thread on CPU %d: %s\n", cpu, std::strerror(err));
    std::exit(1);
  }
}

// The CPUs this process may run on (a container or a cpuset may leave out CPU 0).
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// Round-trip times in µs, sorted; the caller on `caller_cpu`, the echo thread on `echo_cpu`.
std::vector<double> round_trips(int caller_cpu, int echo_cpu, int rounds, int gap_us) {
  int to_echo[2], back[2];
  if (pipe(to_echo) != 0 || pipe(back) != 0) {
    std::perror("pipe");
    std::exit(1);
  }
  std::thread echo([&] {
    pin(echo_cpu);
    char c;
    while (read(to_echo[0], &c, 1) == 1) {
      if (write(back[1], &c, 1) != 1) return;
    }
  });
  pin(caller_cpu);
  std::vector<double> us;
  for (int i = 0; i < rounds; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    char c = 'x';
    const auto t0 = Clock::now();
    if (write(to_echo[1], &c, 1) != 1 || read(back[0], &c, 1) != 1) std::exit(1);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  close(to_echo[1]);
  echo.join();
  for (int fd : {to_echo[0], back[0], back[1]}) close(fd);
  std::sort(us.begin(), us.end());
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 1000, gap_us = 3000;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) {
      std::fprintf(stderr, "%s needs a value\nusage: bench_wakeup [--rounds N] [--gap-us US]\n", argv[i]);
      return 2;
    }
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(10, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--gap-us")) gap_us = std::max(0, std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: bench_wakeup [--rounds N] [--gap-us US]\n");
      return 2;
    }
  }
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.empty()) {
    std::fprintf(stderr, "sched_getaffinity: %s\n", std::strerror(errno));
    return 1;
  }
  std::printf("pipe round trip (two wake-ups) after %d us idle, %d rounds, us\n", gap_us, rounds);
  std::printf("%-16s %8s %8s %8s\n", "echo thread", "p10", "p50", "p90");
  // The echo thread on the caller's CPU, then (if the process may use two) on another one.
  for (size_t k = 0; k < std::min<size_t>(2, cpus.size()); ++k) {
    const std::vector<double> us = round_trips(cpus[0], cpus[k], rounds, gap_us);
    auto at = [&](double q) { return us[static_cast<size_t>(q * static_cast<double>(us.size() - 1))]; };
    std::printf("%-16s %8.1f %8.1f %8.1f\n", k == 0 ? "same CPU" : "other CPU", at(0.1), at(0.5), at(0.9));
  }
  if (cpus.size() < 2) std::printf("(one CPU allowed: no cross-CPU figure)\n");
  return 0;
}
