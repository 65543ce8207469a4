// SPDX-License-Identifier: Apache-2.0
// The daemon's own checks of what a client sends, reached by a client of the test's own
// (tests/service/raw_protocol_client.h): libllmsvc refuses these before sending, so without
// it the daemon's side of each rule would go untested.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/protocol/frame.h"
#include "tests/service/daemon_fixture.h"
#include "tests/service/raw_protocol_client.h"

namespace {

namespace p = llmsvc::protocol;
using llmsvc::Code;
using llmsvc::test::RawProtocolClient;

class DaemonLimits : public llmsvc::test::DaemonTest {};

// A prompt past WELCOME.max_prompt_bytes: ERROR CONTEXT_OVERFLOW on its stream, the context
// unchanged, and the connection goes on (a later call on the same context works).
TEST_F(DaemonLimits, APromptPastTheDaemonsLimitIsContextOverflowAndChangesNothing) {
  auto& d = start_daemon();
  RawProtocolClient c(d.socket_path(), p::kMaxVersion);
  ASSERT_TRUE(c.connected());
  auto w = c.handshake("limits test");
  ASSERT_TRUE(w.ok()) << w.status().message();
  const uint32_t limit = w->max_prompt_bytes;
  ASSERT_GT(limit, 0u);
  ASSERT_LT(limit + 64u, p::kDefaultMaxPayload);  // the frame itself is within the payload limit

  ASSERT_TRUE(c.send(1, p::ContextNew{"big", std::nullopt, true}));
  auto opened = c.answer(1);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  ASSERT_TRUE(std::holds_alternative<p::ContextOpened>(*opened));
  const uint32_t handle = std::get<p::ContextOpened>(*opened).handle;

  p::Call call;
  call.handle = handle;
  call.prompt = std::string(limit + 1, 'a');
  call.options.max_tokens = 1;
  ASSERT_TRUE(c.send(3, call));
  auto refused = c.answer(3);
  ASSERT_TRUE(refused.ok()) << refused.status().message();
  ASSERT_TRUE(std::holds_alternative<p::Error>(*refused));
  const llmsvc::Status st = std::get<p::Error>(*refused).to_status();
  EXPECT_EQ(st.code(), Code::context_overflow) << st.message();
  EXPECT_NE(st.message().find(std::to_string(limit)), std::string::npos) << st.message();

  ASSERT_TRUE(c.send(5, p::ContextInfo{{"big"}}));
  auto info = c.answer(5);
  ASSERT_TRUE(info.ok()) << info.status().message();
  ASSERT_TRUE(std::holds_alternative<p::ContextInfoReply>(*info));
  EXPECT_EQ(std::get<p::ContextInfoReply>(*info).tokens, 0);  // nothing of it went in

  call.prompt = "Hello";
  ASSERT_TRUE(c.send(7, call));
  auto result = c.answer(7);
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_TRUE(std::holds_alternative<p::CallResult>(*result));
  EXPECT_EQ(std::get<p::CallResult>(*result).status, 0u) << std::get<p::CallResult>(*result).message;
}

// A client that sends requests and never reads their answers: once the daemon's bound on its
// unsent answers is reached it stops reading that connection, so the client's own sends
// block (backpressure, nothing buffered without bound); after write_timeout_ms without
// progress the daemon closes it. Another app's calls meanwhile go on, and the daemon too.
TEST_F(DaemonLimits, ASlowReaderIsHeldBackThenDisconnectedWhileOthersCallsGoOn) {
  constexpr size_t kMaxUnsent = 64 << 10;
  constexpr int kWriteTimeoutMs = 3000;
  auto& d = start_daemon(config_args("max_unsent_bytes = " + std::to_string(kMaxUnsent) +
                                     "\nwrite_timeout_ms = " + std::to_string(kWriteTimeoutMs) + "\n"));
  RawProtocolClient slow(d.socket_path(), p::kMaxVersion);
  ASSERT_TRUE(slow.connected());
  auto w = slow.handshake("slow reader");
  ASSERT_TRUE(w.ok()) << w.status().message();

  // 200,000 STATS requests (3.2 MB; each answer is many times its request), sent without
  // blocking until the socket stays full for half a second.
  constexpr uint32_t kRequests = 200000;
  std::vector<uint8_t> out;
  for (uint32_t i = 1; i <= kRequests; ++i)
    ASSERT_TRUE(p::append_frame(out, p::Role::client, i, p::Stats{}, p::kDefaultMaxPayload, p::kMaxVersion).ok());
  size_t sent = 0;
  auto last_progress = std::chrono::steady_clock::now();
  while (sent < out.size() && std::chrono::steady_clock::now() - last_progress < std::chrono::milliseconds(500)) {
    const ssize_t n = ::send(slow.fd(), out.data() + sent, out.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      last_progress = std::chrono::steady_clock::now();
    } else {
      ASSERT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << std::strerror(errno);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  EXPECT_LT(sent, out.size()) << "the daemon kept reading a client that reads nothing";

  // Meanwhile another app (here: another connection) calls the model.
  llmsvc_service* svc = llmsvc::test::bind_target(d.target());
  ASSERT_NE(svc, nullptr);
  llmsvc_context* ctx = llmsvc::test::create_context(svc, "other");
  ASSERT_NE(ctx, nullptr);
  llmsvc::test::Collected got;
  const llmsvc_call_options opt = llmsvc::test::greedy_options(4);
  llmsvc_call_result res;
  llmsvc_call_result_init(&res);
  ASSERT_EQ(llmsvc_call(ctx, "Hello", 5, &opt, llmsvc::test::collect_piece, &got, &res), LLMSVC_OK)
      << llmsvc::test::last_api_error();
  EXPECT_EQ(res.generated_tokens, 4);

  // Past the write timeout the daemon closes the slow connection (its log says so; waiting
  // for that line rather than a fixed time keeps a slow, instrumented daemon from seeing our
  // reads as progress first). Reading now drains what was written to it (STATS_REPLYs only,
  // fewer than were asked for) and then its end.
  const std::string closed_line = "read nothing for " + std::to_string(kWriteTimeoutMs) + " ms";
  auto log_text = [&] {
    std::ifstream log(d.log_path());
    std::stringstream text;
    text << log.rdbuf();
    return text.str();
  };
  for (int i = 0; i < 600 && log_text().find(closed_line) == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_NE(log_text().find(closed_line), std::string::npos) << log_text();
  size_t replies = 0;
  for (;;) {
    auto m = slow.receive();
    if (!m.ok()) {
      EXPECT_EQ(m.status().code(), Code::unavailable) << m.status().message();  // closed, not garbage
      break;
    }
    ASSERT_TRUE(std::holds_alternative<p::StatsReply>(*m)) << "answer " << replies;
    ++replies;
  }
  EXPECT_GT(replies, 0u);
  EXPECT_LT(replies, kRequests);
  std::printf("slow reader: %zu of %zu request bytes taken, %zu of %u answered before the close\n", sent, out.size(),
              replies, kRequests);

  // The daemon goes on: the other app's next call works.
  llmsvc_call_result_init(&res);
  ASSERT_EQ(llmsvc_call(ctx, " again", 6, &opt, llmsvc::test::collect_piece, &got, &res), LLMSVC_OK)
      << llmsvc::test::last_api_error();
  EXPECT_EQ(res.generated_tokens, 4);
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
}

}  // namespace
