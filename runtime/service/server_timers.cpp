// SPDX-License-Identifier: Apache-2.0
// Server, timers: the handshake, write and idle timeouts and the minimum rates both ways.
#include "runtime/service/server.h"

namespace llmsvc::service {
namespace {

namespace p = protocol;

int ms_between(Clock::time_point a, Clock::time_point b) {
  return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count());
}

// One minimum-rate window (Session's send_window / recv_window): opened while bytes are owed,
// checked when it has lasted `window`; "" or why the connection goes.
std::string check_rate(std::optional<Clock::time_point>& start, uint64_t& at_start, uint64_t moved_total, bool owed,
                       Clock::time_point now, int window_ms, uint32_t min_rate, const char* what) {
  if (!owed || min_rate == 0) {
    start.reset();
    return {};
  }
  if (!start) {
    start = now;
    at_start = moved_total;
    return {};
  }
  const int elapsed = ms_between(*start, now);
  if (elapsed < window_ms) return {};
  const uint64_t moved = moved_total - at_start;
  const uint64_t needed = static_cast<uint64_t>(min_rate) * static_cast<uint64_t>(elapsed) / 1000;
  if (moved < needed)
    return std::string(what) + " too slowly (" + std::to_string(moved) + " bytes in " + std::to_string(elapsed) +
           " ms, the minimum is " + std::to_string(min_rate) + " bytes/s)";
  start = now;
  at_start = moved_total;
  return {};
}

}  // namespace

void Server::check_timers() {
  const auto now = Clock::now();
  if (accept_paused_ && now >= accept_resume_ && !stopping_) resume_accepting();
  std::vector<std::pair<SessionPtr, std::string>> expired;
  for (auto& [fd, s] : sessions_) {
    size_t pending = 0;
    uint64_t sent = 0;
    Clock::time_point progress;
    {
      std::lock_guard wlock(s->wmu);
      pending = s->writer.pending_bytes();
      progress = s->last_write_progress;
      sent = s->bytes_sent;
    }
    std::string slow = check_rate(s->send_window, s->sent_at_window, sent, pending > 0, now, opt_.rate_window_ms,
                                  opt_.min_rate_bytes_per_s, "reads its answers");
    if (slow.empty())
      slow = check_rate(s->recv_window, s->received_at_window, s->bytes_received, s->reader.mid_frame(), now,
                        opt_.rate_window_ms, opt_.min_rate_bytes_per_s, "sends a frame");
    if (s->state.phase() == p::Phase::handshake && ms_between(s->accepted, now) > opt_.handshake_timeout_ms) {
      expired.emplace_back(s, "no handshake within " + std::to_string(opt_.handshake_timeout_ms) + " ms");
    } else if (!slow.empty()) {
      expired.emplace_back(s, slow);
    } else if (pending > 0 && ms_between(progress, now) > opt_.write_timeout_ms) {
      expired.emplace_back(s, "the client read nothing for " + std::to_string(opt_.write_timeout_ms) + " ms");
    } else if (opt_.idle_timeout_ms > 0 && s->state.phase() == p::Phase::ready && s->state.in_flight() == 0 &&
               pending == 0 && !s->reader.mid_frame() &&
               ms_between(s->last_activity, now) > static_cast<int>(opt_.idle_timeout_ms)) {
      expired.emplace_back(s, "idle");
    }
  }
  for (auto& [s, why] : expired) drop(s, why);
}

}  // namespace llmsvc::service
