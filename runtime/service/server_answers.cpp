// SPDX-License-Identifier: Apache-2.0
// Server, answers: frames encoded into a connection's writer, CONTEXT_LIST parts produced
// as the client reads, workers' answers handed over through outboxes, and the flushes.
#include "runtime/service/server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "base/file_io.h"
#include "runtime/protocol/engine_types.h"
#include "runtime/service/log.h"

namespace llmsvc::service {
namespace {

namespace p = protocol;

size_t estimate_bytes(const p::Message& m) {
  if (const auto* piece = std::get_if<p::Piece>(&m)) return p::kHeaderBytes + 8 + piece->text.size();
  return 256;
}

}  // namespace

void Server::send(const SessionPtr& s, uint32_t stream, const p::Message& m) {
  bool finished = false;
  {
    std::lock_guard wlock(s->wmu);
    finished = encode_locked(s, stream, m);
  }
  if (finished) call_finished(s, stream);
}

bool Server::encode_locked(const SessionPtr& s, uint32_t stream, const p::Message& m, bool written) {
  if (Status st = s->state.on_send(stream, m); !st.ok()) {
    // A worker's answer that went out before the loop closed the connection (an ERROR on
    // stream 0 since) is no fault of ours.
    if (!(written && s->state.phase() == p::Phase::closed))
      log_line("internal: " + std::string(written ? "sent" : "not sent") + " to " + s->app.label() + ": " +
               st.message());
    return false;
  }
  if (!written) {
    if (s->writer.pending_bytes() == 0) s->last_write_progress = Clock::now();  // the write clock starts now
    Status st = s->writer.write(stream, m);
    if (!st.ok()) {
      log_line("internal: cannot encode for " + s->app.label() + ": " + st.message());
      if (stream != 0 && p::is_final_answer(m))
        (void)s->writer.write(stream, p::error_message(Status(Code::internal, st.message())));
    }
  }
  s->direct_ok = s->state.phase() == p::Phase::ready;
  return stream != 0 && p::type_of(m) != p::MsgType::piece && p::is_final_answer(m) && s->call_handle.count(stream);
}

size_t Server::pending_bytes(const SessionPtr& s) {
  std::lock_guard wlock(s->wmu);
  return s->writer.pending_bytes();
}

void Server::send_error(const SessionPtr& s, uint32_t stream, const Status& st) { send(s, stream, p::error_message(st)); }

void Server::produce_lists(const SessionPtr& s) {
  std::vector<uint32_t> finished;
  {
    std::lock_guard wlock(s->wmu);
    const size_t budget = s->peer_max_payload - 64;
    while (!s->lists.empty() && s->writer.pending_bytes() < opt_.max_unsent_bytes) {
      ListCursor& c = s->lists.front();
      p::ContextListReply part;
      size_t bytes = 0;
      while (c.next < c.ids->size() && part.ids.size() < p::kMaxListIds &&
             bytes + 4 + (*c.ids)[c.next].size() <= budget) {
        bytes += 4 + (*c.ids)[c.next].size();
        part.ids.push_back(std::move((*c.ids)[c.next++]));
      }
      c.bytes -= bytes;
      s->list_bytes -= bytes;
      part.more = c.next < c.ids->size();
      const uint32_t stream = c.stream;
      if (!part.more) s->lists.pop_front();
      if (encode_locked(s, stream, part)) finished.push_back(stream);
    }
  }
  for (uint32_t stream : finished) call_finished(s, stream);
}

void Server::flush(const SessionPtr& s) {
  std::string failed;
  size_t pending = 0;
  for (bool more = true; more && failed.empty();) {
    if (!s->lists.empty()) produce_lists(s);
    std::lock_guard wlock(s->wmu);
    while (s->writer.pending_bytes() > 0) {
      auto data = s->writer.pending();
      const ssize_t n = ::send(s->fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        s->writer.consume(static_cast<size_t>(n));
        s->bytes_sent += static_cast<uint64_t>(n);
        s->last_write_progress = s->last_activity = Clock::now();
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      failed = n < 0 ? "write: " + fileio::errno_text(errno) : "write failed";
      break;
    }
    pending = s->writer.pending_bytes();
    // All sent and more of a list to encode: another round (the socket may take it too).
    more = pending == 0 && !s->lists.empty();
    std::lock_guard lock(s->mu);
    s->unsent_bytes = pending;
  }
  if (!failed.empty()) return drop(s, failed);
  s->drained.notify_all();
  if (s->closing && pending == 0) return drop(s, kAfterProtocolError);
  // Room again: frames held back by the bounds.
  if (s->reader.queued() > 0 && !s->closing) process_frames(s);
  if (sessions_.count(s->fd) && sessions_[s->fd] == s) update_interest(s);
}

bool Server::post(const SessionPtr& s, Outgoing out) {
  {
    std::lock_guard lock(s->mu);
    if (s->dead) {
      if (out.assign_handle) {
        if (const auto* opened = std::get_if<p::ContextOpened>(&out.message)) (void)apps_.close(s->app, opened->id);
      }
      return false;
    }
    s->outbox_bytes += estimate_bytes(out.message);
    s->outbox.push_back(std::move(out));
  }
  kick(s);
  return true;
}

void Server::kick(const SessionPtr& s) {
  {
    std::lock_guard lock(s->mu);
    if (s->queued_dirty) return;
    s->queued_dirty = true;
  }
  {
    std::lock_guard lock(dirty_mu_);
    dirty_.push_back(s);
  }
  uint64_t one = 1;
  ssize_t w = ::write(evfd_, &one, sizeof(one));
  (void)w;
}

size_t Server::send_now_locked(const SessionPtr& s) {
  auto data = s->writer.pending();
  const ssize_t n = ::send(s->fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n > 0) {
    s->writer.consume(static_cast<size_t>(n));
    s->bytes_sent += static_cast<uint64_t>(n);
  }
  const size_t left = s->writer.pending_bytes();
  if (left > 0) {
    // A full socket buffer or an error: the loop sends the rest, or sees the error.
    s->last_write_progress = Clock::now();
    std::lock_guard lock(s->mu);
    s->unsent_bytes = left;
  }
  return left;
}

bool Server::send_piece(const SessionPtr& s, uint32_t stream, p::Piece piece) {
  {
    // Straight to the socket only in order: nothing left unsent and nothing queued (the loop
    // empties the outbox and encodes it under wmu, so nothing is in between). A worker does
    // not wait for the loop's turn at the socket: it queues instead.
    std::unique_lock wlock(s->wmu, std::try_to_lock);
    if (wlock.owns_lock() && s->direct_ok && s->writer.pending_bytes() == 0) {
      bool queued = false;
      {
        std::lock_guard lock(s->mu);  // (not dead: drop() clears direct_ok under wmu first)
        queued = !s->outbox.empty();
      }
      if (!queued && s->writer.write(stream, piece).ok()) {
        if (send_now_locked(s) == 0) return true;
        wlock.unlock();
        kick(s);
        return true;
      }
    }
  }
  return post(s, Outgoing{stream, std::move(piece), false});
}

bool Server::send_result(const SessionPtr& s, uint32_t stream, p::Message m) {
  bool sent = false;
  {
    // As send_piece, in order only; but a final answer waits for the loop's turn at the
    // socket (the loop holds wmu briefly) rather than queueing behind a wake-up.
    std::lock_guard wlock(s->wmu);
    if (s->direct_ok && s->writer.pending_bytes() == 0) {
      std::unique_lock lock(s->mu);  // (not dead: drop() clears direct_ok under wmu first)
      if (s->outbox.empty() && s->writer.write(stream, m).ok()) {
        // The record goes first: the loop can take it only once wmu is released, when the
        // answer is on its way, and it takes it before it reads what the app sends next.
        s->outbox.push_back(Outgoing{stream, std::move(m), false, true});
        lock.unlock();
        (void)send_now_locked(s);
        sent = true;
      }
    }
  }
  if (!sent) return post(s, Outgoing{stream, std::move(m), false});
  kick(s);  // the record's bookkeeping, and any bytes left unsent
  return true;
}

bool Server::wait_for_room(const SessionPtr& s) {
  std::unique_lock lock(s->mu);
  const bool ok = s->drained.wait_for(lock, std::chrono::milliseconds(opt_.write_timeout_ms), [&] {
    return s->dead || s->unsent_bytes + s->outbox_bytes <= opt_.max_unsent_bytes;
  });
  return ok && !s->dead;
}

void Server::take_outboxes() {
  std::vector<SessionPtr> dirty;
  {
    std::lock_guard lock(dirty_mu_);
    dirty.swap(dirty_);
  }
  for (const SessionPtr& s : dirty) take_outbox(s);
}

void Server::take_outbox(const SessionPtr& s) {
  std::vector<uint32_t> finished;
  {
    // Emptied and encoded under wmu: a worker's piece cannot slip in between.
    std::lock_guard wlock(s->wmu);
    std::deque<Outgoing> out;
    {
      std::lock_guard lock(s->mu);
      out.swap(s->outbox);
      s->outbox_bytes = 0;
      s->queued_dirty = false;
    }
    if (!sessions_.count(s->fd) || sessions_[s->fd] != s) return;
    for (Outgoing& o : out) {
      if (o.op_done && s->ops_in_flight > 0) --s->ops_in_flight;
      if (o.list_ids) {
        ListCursor c{o.stream, std::move(o.list_ids), 0, 0};
        for (const std::string& id : *c.ids) c.bytes += 4 + id.size();
        s->list_bytes += c.bytes;
        s->lists.push_back(std::move(c));
        continue;
      }
      if (o.assign_handle) {
        auto* opened = std::get_if<p::ContextOpened>(&o.message);
        const uint32_t h = s->next_handle++;
        if (s->next_handle == 0) s->next_handle = 1;
        s->handles[h] = Session::Handle{opened->id, 0, {}};
        opened->handle = h;
      }
      if (encode_locked(s, o.stream, o.message, o.already_sent)) finished.push_back(o.stream);
    }
  }
  for (uint32_t stream : finished) call_finished(s, stream);
  flush(s);
}

}  // namespace llmsvc::service
