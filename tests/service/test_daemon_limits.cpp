// The daemon's own checks of what a client sends, reached by a client of the test's own
// (tests/service/raw_protocol_client.h): libllmsvc refuses these before sending, so without
// it the daemon's side of each rule would go untested.
#include <gtest/gtest.h>

#include <string>

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
  ASSERT_TRUE(c.send(0, p::Hello{p::kMinVersion, p::kMaxVersion, p::kDefaultMaxPayload, "limits test"}));
  auto w = c.receive();
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE(std::holds_alternative<p::Welcome>(*w));
  const uint32_t limit = std::get<p::Welcome>(*w).max_prompt_bytes;
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

}  // namespace
