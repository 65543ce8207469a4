// SPDX-License-Identifier: Apache-2.0
// Protocol version 4 through llmsvcd and against older peers: model information and token
// counting as the embedded engine gives them, the daemon's bounds on counting, a version-3
// client that sends a version-4 message (a connection error) or calls (no ids in its PIECEs),
// and the client library bound to a version-3 daemon (a fake one here): the new functions are
// UNSUPPORTED, nothing of version 4 is sent, and the connection goes on.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/client/piece_joiner.h"
#include "tests/service/daemon_fixture.h"
#include "tests/service/raw_protocol_client.h"

namespace llmsvc::test {
namespace {

namespace p = protocol;

using DaemonInfo = DaemonTest;

TEST_F(DaemonInfo, ModelInfoAndCountsMatchEmbedded) {
  DaemonProcess& d = start_daemon();
  llmsvc_service* remote = bind_target(d.target());
  llmsvc_service* local = bind_embedded();
  ASSERT_TRUE(remote && local);
  llmsvc_model_info r, l;
  llmsvc_model_info_init(&r);
  llmsvc_model_info_init(&l);
  ASSERT_EQ(llmsvc_model_info_get(remote, &r), LLMSVC_OK) << last_api_error();
  ASSERT_EQ(llmsvc_model_info_get(local, &l), LLMSVC_OK) << last_api_error();
  EXPECT_EQ(0, std::memcmp(&r, &l, sizeof r)) << "the daemon describes its model as embedded does";
  EXPECT_EQ(r.n_ctx, r.n_ctx_train) << "no 4096 cap";
  // Counting, with more ids than one reply carries (the client asks window by window).
  std::string text;
  for (int i = 0; i < 9000; ++i) text.append(" ").append(std::to_string(i % 10));
  llmsvc_count_options o;
  llmsvc_count_options_init(&o);
  o.chat = 1;
  o.first_turn = 1;
  std::vector<int32_t> ids_r(20000, -1), ids_l(20000, -1);
  int32_t n_r = 0, n_l = 0;
  o.ids = ids_r.data();
  o.ids_capacity = ids_r.size();
  ASSERT_EQ(llmsvc_count_tokens(remote, text.data(), text.size(), &o, &n_r), LLMSVC_OK) << last_api_error();
  o.ids = ids_l.data();
  ASSERT_EQ(llmsvc_count_tokens(local, text.data(), text.size(), &o, &n_l), LLMSVC_OK) << last_api_error();
  EXPECT_GT(n_r, static_cast<int32_t>(p::kMaxCountIds));
  EXPECT_EQ(n_r, n_l);
  EXPECT_EQ(ids_r, ids_l);
  llmsvc_unbind(remote);
  llmsvc_unbind(local);
}

// What a client can make the daemon count is what it may send as a prompt: past it, ERROR
// CONTEXT_OVERFLOW on that stream, and the connection goes on. Ids past the end: none.
TEST_F(DaemonInfo, CountingIsBounded) {
  DaemonProcess& d = start_daemon();
  RawProtocolClient c(d.socket_path(), p::kMaxVersion);
  ASSERT_TRUE(c.connected());
  auto w = c.handshake("counter");
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w->version, p::kMaxVersion);
  p::CountTokens big;
  big.text.assign(w->max_prompt_bytes + 1, 'x');
  ASSERT_TRUE(c.send(1, big));
  auto e = c.answer(1);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_TRUE(std::holds_alternative<p::Error>(*e));
  EXPECT_EQ(std::get<p::Error>(*e).status, p::code_to_wire(Code::context_overflow)) << std::get<p::Error>(*e).message;
  big.text.resize(w->max_prompt_bytes / 2);
  big.params.system_prompt.assign(w->max_prompt_bytes / 2 + 1, 's');  // together past it
  big.params.chat = big.params.first_turn = true;
  ASSERT_TRUE(c.send(2, big));
  e = c.answer(2);
  ASSERT_TRUE(e.ok() && std::holds_alternative<p::Error>(*e));
  // A message list (version 5) is bounded the same, its messages together.
  p::CountTokens listed;
  listed.params.chat = true;
  listed.params.messages = {{MessageRole::user, std::string(w->max_prompt_bytes / 2, 'a')},
                            {MessageRole::assistant, std::string(w->max_prompt_bytes / 2 + 1, 'b')}};
  ASSERT_TRUE(c.send(5, listed));
  e = c.answer(5);
  ASSERT_TRUE(e.ok() && std::holds_alternative<p::Error>(*e));
  EXPECT_EQ(std::get<p::Error>(*e).status, p::code_to_wire(Code::context_overflow)) << std::get<p::Error>(*e).message;
  ASSERT_TRUE(c.send(3, p::CountTokens{"three small words", {}, 1000, 16}));
  auto r = c.answer(3);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(std::holds_alternative<p::CountTokensReply>(*r));
  EXPECT_GT(std::get<p::CountTokensReply>(*r).count, 0);
  EXPECT_TRUE(std::get<p::CountTokensReply>(*r).ids.empty());
  ASSERT_TRUE(c.send(4, p::ModelInfoRequest{}));
  r = c.answer(4);
  ASSERT_TRUE(r.ok() && std::holds_alternative<p::ModelInfoReply>(*r));
  EXPECT_TRUE(std::get<p::ModelInfoReply>(*r).info.ready);
}

// A version-3 connection: a version-4 message is a connection error (ERROR on stream 0, then
// the daemon closes), and before that a CALL's PIECEs carry no version-4 bytes.
TEST_F(DaemonInfo, VersionThreeClient) {
  DaemonProcess& d = start_daemon();
  RawProtocolClient c(d.socket_path(), 3);
  ASSERT_TRUE(c.connected());
  auto w = c.handshake("a version-3 client");
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->version, 3);
  ASSERT_TRUE(c.send(1, p::ContextNew{"v3", std::nullopt, true}));
  auto opened = c.answer(1);
  ASSERT_TRUE(opened.ok() && std::holds_alternative<p::ContextOpened>(*opened));
  p::Call call;
  call.handle = std::get<p::ContextOpened>(*opened).handle;
  call.prompt = "The colours of the rainbow are";
  call.options.max_tokens = 6;
  ASSERT_TRUE(c.send(2, call));
  int pieces = 0;
  for (;;) {
    auto m = c.receive();
    ASSERT_TRUE(m.ok()) << m.status().message();  // strict: a version-4 PIECE would not decode
    if (std::holds_alternative<p::Piece>(*m)) {
      ++pieces;
      continue;
    }
    ASSERT_TRUE(std::holds_alternative<p::CallResult>(*m));
    break;
  }
  EXPECT_GT(pieces, 0);
  ASSERT_TRUE(c.send(3, p::ModelInfoRequest{}));
  uint32_t stream = 1;
  auto e = c.receive(&stream);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_TRUE(std::holds_alternative<p::Error>(*e));
  EXPECT_EQ(stream, 0u);
  EXPECT_NE(std::get<p::Error>(*e).message.find("protocol version 4"), std::string::npos)
      << std::get<p::Error>(*e).message;
  EXPECT_FALSE(c.receive().ok()) << "the daemon closes the connection";
}

// ---- the client library against a daemon that speaks version 3 at most (a fake one)

// Answers HELLO with WELCOME version 3, CONTEXT_NEW with CONTEXT_OPENED, CONTEXT_CLOSE /
// CONTEXT_DELETE with ACK, STATS with STATS_REPLY; notes every type it receives.
class Version3Daemon {
 public:
  explicit Version3Daemon(std::string path) : path_(std::move(path)) {
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    ok_ = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && ::listen(listen_fd_, 4) == 0;
    if (ok_) thread_ = std::thread([this] { serve(); });
  }
  ~Version3Daemon() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    if (conn_fd_ >= 0) ::shutdown(conn_fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(listen_fd_);
    if (conn_fd_ >= 0) ::close(conn_fd_);
    ::unlink(path_.c_str());
  }
  bool ok() const { return ok_; }
  std::set<p::MsgType> received() {
    std::lock_guard lock(mu_);
    return received_;
  }

 private:
  void serve() {
    conn_fd_ = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn_fd_ < 0) return;
    p::FrameReader reader(p::Role::server, p::kDefaultMaxPayload);
    uint8_t buf[4096];
    for (;;) {
      const ssize_t n = ::recv(conn_fd_, buf, sizeof buf, 0);
      if (n <= 0 || !reader.feed({buf, static_cast<size_t>(n)}).ok()) return;
      while (auto f = reader.next()) {
        {
          std::lock_guard lock(mu_);
          received_.insert(f->type);
        }
        if (!answer(*f)) return;
      }
    }
  }
  bool answer(const p::Frame& f) {
    std::vector<uint8_t> out;
    auto put = [&](uint32_t stream, const p::Message& m) {
      return p::append_frame(out, p::Role::server, stream, m, p::kDefaultMaxPayload, 3).ok();
    };
    auto m = p::decode_frame(f, 3);
    if (!m.ok()) return false;
    bool sent = true;
    if (std::holds_alternative<p::Hello>(*m)) {
      p::Welcome w;
      w.version = 3;
      w.max_prompt_bytes = 1 << 16;
      w.max_context_tokens = 2048;
      w.max_calls = 1;
      w.server = "llmsvcd (version 3)";
      sent = put(0, w);
    } else if (const auto* nw = std::get_if<p::ContextNew>(&*m)) {
      sent = put(f.stream, p::ContextOpened{1, nw->id.value_or("generated")});
    } else if (std::holds_alternative<p::ContextClose>(*m) || std::holds_alternative<p::ContextDelete>(*m)) {
      sent = put(f.stream, p::Ack{});
    } else if (std::holds_alternative<p::Stats>(*m)) {
      sent = put(f.stream, p::StatsReply{});
    } else if (!std::holds_alternative<p::Ping>(*m) && !std::holds_alternative<p::Pong>(*m)) {
      sent = put(f.stream, p::Error{p::code_to_wire(Code::internal), "the fake daemon does not do that"});
    }
    return sent && ::send(conn_fd_, out.data(), out.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(out.size());
  }

  std::string path_;
  int listen_fd_ = -1;
  std::atomic<int> conn_fd_{-1};
  bool ok_ = false;
  std::thread thread_;
  std::mutex mu_;
  std::set<p::MsgType> received_;
};

int count_piece(const llmsvc_piece*, void* user) {
  ++*static_cast<int*>(user);
  return 0;
}

TEST_F(DaemonInfo, OlderDaemonAnswersUnsupportedCleanly) {
  Version3Daemon old(dir_ + "/old.sock");
  ASSERT_TRUE(old.ok());
  llmsvc_service* svc = bind_target("unix:" + dir_ + "/old.sock");
  ASSERT_NE(svc, nullptr);
  llmsvc_model_info info;
  llmsvc_model_info_init(&info);
  EXPECT_EQ(llmsvc_model_info_get(svc, &info), LLMSVC_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(llmsvc_last_error()).find("protocol version 4"), std::string::npos) << llmsvc_last_error();
  EXPECT_EQ(info.ready, 0);
  int32_t n = -1;
  EXPECT_EQ(llmsvc_count_tokens(svc, "hi", 2, nullptr, &n), LLMSVC_ERR_UNSUPPORTED);
  EXPECT_EQ(n, -1);
  llmsvc_context* ctx = create_context(svc, "old", true);
  ASSERT_NE(ctx, nullptr);
  llmsvc_call_options o = greedy_options(4);
  int pieces = 0;
  o.on_tokens = count_piece;
  o.on_tokens_user = &pieces;
  EXPECT_EQ(llmsvc_call(ctx, "Hello", 5, &o, nullptr, nullptr, nullptr), LLMSVC_ERR_UNSUPPORTED);
  EXPECT_EQ(pieces, 0);
  // An elastic level (protocol 7), any but 0 (the service's choice): the old daemon would not
  // hear it and run its own.
  for (int32_t level : {20, 100}) {
    llmsvc_call_options lv = greedy_options(4);
    lv.level_percent = level;
    EXPECT_EQ(llmsvc_call(ctx, "Hello", 5, &lv, nullptr, nullptr, nullptr), LLMSVC_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(llmsvc_last_error()).find("protocol version 7"), std::string::npos) << llmsvc_last_error();
  }
  // The connection goes on: nothing the old daemon does not speak was sent.
  llmsvc_stats st;
  llmsvc_stats_init(&st);
  EXPECT_EQ(llmsvc_get_stats(svc, &st), LLMSVC_OK) << last_api_error();
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
  const std::set<p::MsgType> got = old.received();
  EXPECT_FALSE(got.count(p::MsgType::model_info) || got.count(p::MsgType::count_tokens) || got.count(p::MsgType::call));
  EXPECT_TRUE(got.count(p::MsgType::stats));
}

// ---- the client's joining of PIECEs (unit)

TEST(PieceJoiner, IdsOfPiecesWithoutTextJoinTheNext) {
  std::vector<std::pair<std::string, std::vector<int32_t>>> got;
  std::vector<size_t> lps;
  TokenPieceFn sink = [&](const TokenPiece& t) {
    got.emplace_back(std::string(t.text), std::vector<int32_t>(t.ids.begin(), t.ids.end()));
    lps.push_back(t.logprobs.size());
    return true;
  };
  client::PieceJoiner j(sink);
  EXPECT_TRUE(j.add(p::Piece{3, "a", {1, 2, 3}, {-1, -1, -1}}));
  EXPECT_TRUE(j.add(p::Piece{-1, "", {4, 5}, {-1, -1}}));  // more ids than one frame held
  EXPECT_TRUE(j.add(p::Piece{6, "b", {6}, {-1}}));
  EXPECT_TRUE(j.add(p::Piece{6, "c", {}, {}}));  // the rest of a long text
  EXPECT_TRUE(j.add(p::Piece{-1, "", {7}, {-1}}));  // the end of turn
  EXPECT_TRUE(j.finish());
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], (std::pair<std::string, std::vector<int32_t>>{"a", {1, 2, 3}}));
  EXPECT_EQ(got[1], (std::pair<std::string, std::vector<int32_t>>{"b", {4, 5, 6}}));
  EXPECT_EQ(got[2], (std::pair<std::string, std::vector<int32_t>>{"c", {}}));
  EXPECT_EQ(got[3], (std::pair<std::string, std::vector<int32_t>>{"", {7}}));
  EXPECT_EQ(lps, (std::vector<size_t>{3, 3, 0, 1}));
  client::PieceJoiner none(sink);
  EXPECT_TRUE(none.finish());
  EXPECT_EQ(got.size(), 4u) << "nothing held: no last piece";
}

}  // namespace
}  // namespace llmsvc::test
