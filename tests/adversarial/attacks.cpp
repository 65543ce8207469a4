// SPDX-License-Identifier: Apache-2.0
// The attacks, the honest apps and the memory sampler.
#include "tests/adversarial/attacks.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <mutex>
#include <random>

#include "llmsvc/llmsvc.h"
#include "runtime/protocol/frame.h"
#include "tests/common/proc_status.h"

namespace llmsvc::test {

namespace p = protocol;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Lets this process hold as many descriptors as it may (the descriptor attack needs more than
// the usual soft limit of 1024).
void raise_descriptor_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &r);
  }
}

// The 16-byte header of a CALL on stream 1 claiming `length` payload bytes.
std::string claimed_call_header(uint32_t length) {
  std::string h = "LLMS";
  const uint16_t type = static_cast<uint16_t>(p::MsgType::call);
  const uint32_t stream = 1;
  h.append(reinterpret_cast<const char*>(&type), 2);  // little-endian hosts, like the tests'
  h.append(2, '\0');
  h.append(reinterpret_cast<const char*>(&stream), 4);
  h.append(reinterpret_cast<const char*>(&length), 4);
  return h;
}

// A 64-byte context id, the longest there is (the largest list answers).
std::string long_id(int i) {
  std::string id = "flood-" + std::to_string(i) + "-";
  id.resize(64, 'x');
  return id;
}

// Outcome of a connection the attacker kept until the end.
Seen final_state(HostileClient& c, bool throttled) {
  if (c.closed_by_peer()) return Seen::disconnected;
  return throttled ? Seen::throttled : Seen::open;
}

void count(AttackOutcome& o, Seen s) {
  switch (s) {
    case Seen::open: o.left_open++; break;
    case Seen::refused: o.refused++; break;
    case Seen::throttled: o.throttled++; break;
    case Seen::disconnected: o.disconnected++; break;
  }
}

// Connects `h` and shakes hands, counting the attempt in `o` (and a refusal); false if refused.
bool open_counted(HostileClient& h, const Target& t, AttackOutcome& o, std::mutex& mu) {
  const bool in = h.connect(t.socket_path) && h.handshake();
  std::lock_guard lock(mu);
  o.connections++;
  if (!in) o.refused++;
  return in;
}

// The flood of cheap requests with large answers; `trickle`: reads 16 bytes every 2 s.
AttackOutcome request_flood(const Target& t, const AttackPlan& plan, int connections, bool trickle) {
  AttackOutcome o;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back([&, c] {
      (void)as_uid(plan.attacker_uid, [&] {
        HostileClient h;
        if (!open_counted(h, t, o, mu)) return;
        if (c == 0) {  // the contexts whose ids make the list long: as many as the app may hold
          for (int i = 0; i < 4096; ++i) {
            uint32_t s = 0;
            if (!h.request(p::ContextNew{long_id(i), std::nullopt, true}, &s)) break;
            p::Message m;
            if (!h.answer(s, &m).ok()) break;
            uint32_t cs = 0;
            if (const auto* opened = std::get_if<p::ContextOpened>(&m); opened && h.request(p::ContextClose{opened->handle}, &cs))
              (void)h.answer(cs);
          }
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
        // A batch of requests built up front: LIST and STATS, never read.
        std::string batch;
        uint64_t sent = 0;
        bool throttled = false, closed = false;
        const auto start = Clock::now();
        auto last_read = start;
        while (seconds_since(start) < plan.seconds) {
          if (batch.empty())
            for (int i = 0; i < 256; ++i) batch += h.frame(i % 2 ? p::Message(p::ContextList{}) : p::Message(p::Stats{}));
          const ssize_t n = h.send_some(batch);
          if (n < 0) {
            closed = true;
            break;
          }
          if (n == 0) {
            throttled = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          } else {
            sent += static_cast<uint64_t>(n);
            batch.erase(0, static_cast<size_t>(n));
          }
          if (trickle && seconds_since(last_read) >= 2) {
            if (h.read_some(16) < 0) {
              closed = true;
              break;
            }
            last_read = Clock::now();
          }
        }
        std::lock_guard lock(mu);
        o.bytes_sent += sent;
        count(o, closed ? Seen::disconnected : final_state(h, throttled));
      });
    });
  }
  for (auto& th : threads) th.join();
  return o;
}

}  // namespace

// ---------------------------------------------------------------- sampler

RssSampler::RssSampler(pid_t pid) : pid_(pid) {
  const uint64_t now = proc_status_bytes(pid_, "VmRSS");
  peak_ = last_ = now;
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      const uint64_t v = proc_status_bytes(pid_, "VmRSS");
      if (v > 0) {
        last_ = v;
        if (v > peak_.load()) peak_ = v;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
}

RssSampler::~RssSampler() { stop(); }

void RssSampler::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

// ---------------------------------------------------------------- honest apps

struct HonestApps::App {
  uid_t uid = 0;
  llmsvc_service* svc = nullptr;
  llmsvc_context* ctx = nullptr;
  mutable std::mutex mu;
  std::vector<double> latencies_ms;
  int errors = 0;
  std::string first_error;
};

HonestApps::HonestApps(const Target& target, int count, uid_t first_uid)
    : target_(target), count_(count), first_uid_(first_uid) {}

HonestApps::~HonestApps() {
  stop();
  for (auto& a : apps_) {
    if (a->ctx) llmsvc_context_close(a->ctx);
    if (a->svc) llmsvc_unbind(a->svc);
  }
}

bool HonestApps::start(std::string* why) {
  for (int i = 0; i < count_; ++i) {
    auto app = std::make_unique<App>();
    app->uid = first_uid_ + static_cast<uid_t>(i);
    std::string err;
    const bool ran = as_uid(app->uid, [&] {
      const std::string target = "unix:" + target_.socket_path;
      llmsvc_bind_options bo;
      llmsvc_bind_options_init(&bo);
      bo.target = target.c_str();
      if (llmsvc_bind(&bo, &app->svc) != LLMSVC_OK) {
        err = std::string("bind: ") + llmsvc_last_error();
        return;
      }
      llmsvc_context_options co;
      llmsvc_context_options_init(&co);
      co.raw = 1;
      if (llmsvc_context_new(app->svc, &co, &app->ctx) != LLMSVC_OK) err = std::string("context: ") + llmsvc_last_error();
    });
    if (!ran) err = "cannot take uid " + std::to_string(app->uid) + " (not root?)";
    apps_.push_back(std::move(app));
    if (!err.empty()) {
      if (why) *why = "honest app " + std::to_string(i) + ": " + err;
      return false;
    }
  }
  return true;
}

void HonestApps::run() {
  stop();
  running_ = true;
  for (auto& a : apps_) {
    {
      std::lock_guard lock(a->mu);
      a->latencies_ms.clear();
      a->errors = 0;
      a->first_error.clear();
    }
    App* app = a.get();
    // A fresh context each round (the last one deleted), so a long run never fills one.
    llmsvc_context_options co;
    llmsvc_context_options_init(&co);
    co.raw = 1;
    (void)as_uid(app->uid, [&] {
      if (app->ctx) {
        const std::string id = llmsvc_context_id(app->ctx);
        llmsvc_context_close(app->ctx);
        app->ctx = nullptr;
        (void)llmsvc_context_delete(app->svc, id.c_str());
      }
      if (llmsvc_context_new(app->svc, &co, &app->ctx) != LLMSVC_OK) {
        std::lock_guard lock(app->mu);
        app->errors++;
        app->first_error = std::string("context: ") + llmsvc_last_error();
      }
    });
    if (!app->ctx) continue;
    threads_.emplace_back([this, app] {
      // Calls go out on the app's connection, made as its uid; should the library reconnect,
      // it does so from this thread, so as that uid too.
      if (!become_uid(app->uid)) return;
      llmsvc_call_options co;
      llmsvc_call_options_init(&co);
      co.max_tokens = 2;
      do {  // at least one call a round, however soon stop() comes
        const auto t0 = Clock::now();
        const llmsvc_status st = llmsvc_call(app->ctx, " Hi", 3, &co, nullptr, nullptr, nullptr);
        const double ms = seconds_since(t0) * 1000;
        std::lock_guard lock(app->mu);
        if (st == LLMSVC_OK) {
          app->latencies_ms.push_back(ms);
        } else {
          if (app->errors++ == 0) app->first_error = llmsvc_last_error();
        }
      } while (running_.load());
    });
  }
}

void HonestApps::stop() {
  running_ = false;
  for (auto& t : threads_) t.join();
  threads_.clear();
}

int HonestApps::calls() const {
  int n = 0;
  for (auto& a : apps_) {
    std::lock_guard lock(a->mu);
    n += static_cast<int>(a->latencies_ms.size()) + a->errors;
  }
  return n;
}

int HonestApps::apps_served() const {
  int n = 0;
  for (auto& a : apps_) {
    std::lock_guard lock(a->mu);
    n += a->latencies_ms.empty() ? 0 : 1;
  }
  return n;
}

int HonestApps::errors() const {
  int n = 0;
  for (auto& a : apps_) {
    std::lock_guard lock(a->mu);
    n += a->errors;
  }
  return n;
}

std::string HonestApps::first_error() const {
  for (auto& a : apps_) {
    std::lock_guard lock(a->mu);
    if (!a->first_error.empty()) return "uid " + std::to_string(a->uid) + ": " + a->first_error;
  }
  return {};
}

double HonestApps::p50_ms() const {
  std::vector<double> all;
  for (auto& a : apps_) {
    std::lock_guard lock(a->mu);
    all.insert(all.end(), a->latencies_ms.begin(), a->latencies_ms.end());
  }
  if (all.empty()) return 0;
  std::nth_element(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(all.size() / 2), all.end());
  return all[all.size() / 2];
}

double HonestApps::max_ms() const {
  double m = 0;
  for (auto& a : apps_) {
    std::lock_guard lock(a->mu);
    for (double v : a->latencies_ms) m = std::max(m, v);
  }
  return m;
}

// ---------------------------------------------------------------- attacks

std::string AttackOutcome::summary() const {
  std::string s;
  auto add = [&](int n, const char* what) {
    if (n == 0) return;
    if (!s.empty()) s += ", ";
    s += std::to_string(n) + " " + what;
  };
  add(refused, "refused");
  add(throttled, "throttled");
  add(disconnected, "disconnected");
  add(left_open, "left open");
  if (!note.empty()) s += (s.empty() ? "" : "; ") + note;
  return s;
}

AttackOutcome flood_without_reading(const Target& t, const AttackPlan& plan, int connections) {
  return request_flood(t, plan, connections, false);
}

AttackOutcome trickle_reader(const Target& t, const AttackPlan& plan, int connections) {
  return request_flood(t, plan, connections, true);
}

AttackOutcome claimed_length_headers(const Target& t, const AttackPlan& plan, int connections, int apps) {
  raise_descriptor_limit();
  AttackOutcome o;
  std::mutex mu;
  std::vector<std::unique_ptr<HostileClient>> held;
  std::vector<std::thread> threads;
  for (int a = 0; a < apps; ++a) {
    threads.emplace_back([&, a] {
      (void)as_uid(plan.attacker_uid + static_cast<uid_t>(a), [&] {
        for (int c = a; c < connections; c += apps) {
          auto h = std::make_unique<HostileClient>();
          const bool in = h->connect(t.socket_path) && h->handshake();
          // A CALL header on stream 1 claiming 1 MiB; not one byte of it follows.
          const bool sent = in && h->send_some(claimed_call_header(1u << 20)) == 16;
          std::lock_guard lock(mu);
          o.connections++;
          if (!sent) {
            o.refused++;
            continue;
          }
          o.bytes_sent += 16;
          held.push_back(std::move(h));
        }
      });
    });
  }
  for (auto& th : threads) th.join();
  const auto start = Clock::now();
  while (seconds_since(start) < plan.seconds) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (auto& h : held) count(o, final_state(*h, false));
  return o;
}

AttackOutcome descriptor_exhaustion(const Target& t, const AttackPlan& plan, int connections) {
  raise_descriptor_limit();
  AttackOutcome o;
  std::vector<std::unique_ptr<HostileClient>> held;
  (void)as_uid(plan.attacker_uid, [&] {
    for (int c = 0; c < connections; ++c) {
      auto h = std::make_unique<HostileClient>();
      o.connections++;
      if (!h->connect(t.socket_path)) {
        o.refused++;
        o.note = "connect failed after " + std::to_string(c) + " (backlog full)";
        break;
      }
      // The handshake is sent, its answer read later: the daemon answers a refused one at once.
      std::vector<uint8_t> hello;
      (void)p::append_frame(hello, p::Role::client, 0, p::Hello{}, p::kHandshakeMaxPayload, p::kMinVersion);
      (void)h->send_some(std::string(hello.begin(), hello.end()));
      held.push_back(std::move(h));
    }
  });
  const auto start = Clock::now();
  while (seconds_since(start) < plan.seconds) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (auto& h : held) count(o, h->closed_by_peer() ? Seen::refused : Seen::open);
  return o;
}

AttackOutcome context_flood(const Target& t, const AttackPlan& plan, size_t system_prompt_bytes) {
  AttackOutcome o;
  (void)as_uid(plan.attacker_uid, [&] {
    HostileClient h;
    o.connections = 1;
    if (!h.connect(t.socket_path) || !h.handshake()) {
      o.refused = 1;
      return;
    }
    std::string prompt;
    while (prompt.size() < system_prompt_bytes) prompt += "You are a helpful assistant who answers briefly. ";
    prompt.resize(system_prompt_bytes);
    // First: a system prompt past any context (~64k tokens): refused at creation, or not.
    uint32_t s = 0;
    std::string big;
    while (big.size() < (256u << 10)) big += "Tell me everything about everything, at length. ";
    big.resize(256u << 10);
    int created = 0, quota = 0, overflow = 0, other = 0;
    if (h.request(p::ContextNew{std::string("huge"), big, false}, &s)) {
      p::Message m;
      const Status st = h.answer(s, &m);
      if (st.code() == Code::context_overflow) {
        overflow++;
      } else if (st.ok()) {
        created++;
        if (const auto* opened = std::get_if<p::ContextOpened>(&m)) {
          uint32_t cs = 0;
          if (h.request(p::ContextClose{opened->handle}, &cs)) (void)h.answer(cs);
        }
      }
    }
    const auto start = Clock::now();
    for (int i = 0; seconds_since(start) < plan.seconds; ++i) {
      if (!h.request(p::ContextNew{std::string("c") + std::to_string(i), prompt, false}, &s)) break;
      p::Message m;
      const Status st = h.answer(s, &m);
      if (st.code() == Code::quota_exceeded) {
        quota++;
        if (quota >= 50) break;  // the point is made
        continue;
      }
      if (st.code() == Code::unavailable) break;
      if (!st.ok()) {
        other++;
        continue;
      }
      created++;
      if (const auto* opened = std::get_if<p::ContextOpened>(&m)) {
        uint32_t cs = 0;
        if (h.request(p::ContextClose{opened->handle}, &cs)) (void)h.answer(cs);
      }
    }
    o.note = std::to_string(created) + " contexts made, " + std::to_string(quota) + " over quota, " +
             std::to_string(overflow) + " system prompts past n_ctx refused" +
             (other ? ", " + std::to_string(other) + " other errors" : "");
    o.refused = quota + overflow;
    o.left_open = h.closed_by_peer() ? 0 : 1;
    o.disconnected = 1 - o.left_open;
  });
  return o;
}

AttackOutcome log_flood(const Target& t, const AttackPlan& plan, int connections) {
  raise_descriptor_limit();
  AttackOutcome o;
  (void)as_uid(plan.attacker_uid, [&] {
    const std::string garbage = "GARBAGE GARBAGE GARBAGE!";
    for (int c = 0; c < connections; ++c) {
      HostileClient h;
      o.connections++;
      if (!h.connect(t.socket_path)) {
        o.refused++;
        continue;
      }
      (void)h.send_some(garbage);
      o.bytes_sent += garbage.size();
    }
  });
  o.note = "each a protocol error";
  return o;
}

AttackOutcome interleaved_frames(const Target& t, const AttackPlan& plan, int connections, int apps) {
  AttackOutcome o;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back([&, c] {
      (void)as_uid(plan.attacker_uid + static_cast<uid_t>(c % apps), [&] {
        std::mt19937 rng(static_cast<uint32_t>(c) * 7919u + 1);
        const auto start = Clock::now();
        while (seconds_since(start) < plan.seconds) {
          HostileClient h;
          if (!open_counted(h, t, o, mu)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            continue;
          }
          bool closed = false;
          for (int i = 0; i < 200 && !closed && seconds_since(start) < plan.seconds; ++i) {
            std::string bytes;
            switch (rng() % 8) {
              case 0: bytes = h.frame(p::Ping{rng()}); break;
              case 1: bytes = h.frame(p::Stats{}); break;
              case 2: bytes = h.frame(p::ContextInfo{{"no-such-context"}}); break;
              case 3: bytes = h.frame(p::ContextList{}); break;
              case 4: {  // a request whose payload does not decode: ERROR on its stream
                bytes = h.frame(p::ContextInfo{{"x"}}).substr(0, 16);  // the header alone...
                const uint32_t len = 0;
                std::memcpy(bytes.data() + 12, &len, 4);  // ... saying so: an empty payload
                break;
              }
              case 5: bytes = h.frame(p::ContextClose{static_cast<uint32_t>(rng() % 5 + 1)}); break;
              case 6: bytes = h.frame(p::Cancel{static_cast<uint32_t>(rng() % 100 + 1)}); break;
              default: {  // a bad header: the connection's end
                bytes = "LLMS\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00";
                bytes.resize(16);
                break;
              }
            }
            if (h.send_some(bytes) < 0) closed = true;
            // Read what came, so this client is not a slow reader (that is another attack).
            while (h.read_some(65536) > 0) {
            }
            if (h.closed_by_peer()) closed = true;
          }
          std::lock_guard lock(mu);
          count(o, closed ? Seen::disconnected : Seen::open);
        }
      });
    });
  }
  for (auto& th : threads) th.join();
  o.note = "reconnecting after each close";
  return o;
}

size_t log_lines(const std::string& log_path) {
  std::ifstream in(log_path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n++;
  return n;
}

uint64_t tree_bytes(const std::string& dir) {
  std::error_code ec;
  uint64_t total = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) total += it->file_size(ec);
  }
  return total;
}

}  // namespace llmsvc::test
