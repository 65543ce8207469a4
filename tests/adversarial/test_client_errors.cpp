// SPDX-License-Identifier: Apache-2.0
// What a hostile client learns from the daemon's errors: the same status for an invalid id
// whatever the operation (and the id not echoed back), and never a path of the daemon's.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <functional>
#include <string>

#include "runtime/protocol/messages.h"
#include "tests/adversarial/hostile_client.h"
#include "tests/service/daemon_fixture.h"

namespace {

namespace p = llmsvc::protocol;
using llmsvc::Code;
using llmsvc::Status;
using namespace llmsvc::test;

using ClientErrors = DaemonTest;

TEST_F(ClientErrors, AnInvalidIdIsInvalidArgumentForEveryOperationAndIsNotEchoed) {
  DaemonProcess& d = start_daemon();
  HostileClient c;
  ASSERT_TRUE(c.connect(d.socket_path()));
  ASSERT_TRUE(c.handshake());
  for (const std::string id : {"../../etc", "a/b", "..", "sp ace", "\x01\x02"}) {
    const p::Message requests[] = {p::ContextOpen{{id}}, p::ContextInfo{{id}}, p::ContextDelete{{id}},
                                   p::ContextNew{id, std::nullopt, true}};
    for (const p::Message& m : requests) {
      uint32_t stream = 0;
      ASSERT_TRUE(c.request(m, &stream));
      const Status st = c.answer(stream);
      EXPECT_EQ(st.code(), Code::invalid_argument) << "type " << static_cast<int>(p::type_of(m)) << " id '" << id
                                                   << "': " << st.message();
      if (id != "..") {  // (".." is in the rule's own text)
        EXPECT_EQ(st.message().find(id), std::string::npos) << st.message();
      }
    }
  }
}

// The daemon checks a CALL's values itself (a client need not be the C library): each bad
// value is INVALID_ARGUMENT naming the field, and the context takes calls afterwards. (A
// float that is not finite never gets this far: the wire refuses it.)
TEST_F(ClientErrors, ACallWithBadValuesIsRefusedByTheDaemonItself) {
  DaemonProcess& d = start_daemon();
  HostileClient c;
  ASSERT_TRUE(c.connect(d.socket_path()));
  ASSERT_TRUE(c.handshake());
  uint32_t s = 0;
  p::Message m;
  ASSERT_TRUE(c.request(p::ContextNew{std::string("calls"), std::nullopt, true}, &s));
  ASSERT_TRUE(c.answer(s, &m).ok());
  const uint32_t handle = std::get<p::ContextOpened>(m).handle;
  const std::pair<const char*, std::function<void(p::CallOptions&)>> bad[] = {
      {"top_p", [](p::CallOptions& o) { o.top_p = 2.0f; }},
      {"top_k", [](p::CallOptions& o) { o.top_k = -1; }},
      {"repeat_penalty", [](p::CallOptions& o) { o.repeat_penalty = 0.0f; }},
      {"max_tokens", [](p::CallOptions& o) { o.max_tokens = -1; }},
      {"slo_ttft_ratio", [](p::CallOptions& o) { o.slo_ttft_ratio = -1.0f; }},
  };
  for (const auto& [field, spoil] : bad) {
    p::Call call;
    call.handle = handle;
    call.prompt = "x";
    spoil(call.options);
    ASSERT_TRUE(c.request(call, &s));
    const Status st = c.answer(s);
    EXPECT_EQ(st.code(), Code::invalid_argument) << field << ": " << st.message();
    EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
  }
  p::Call good;
  good.handle = handle;
  good.prompt = "x";
  good.options.max_tokens = 1;
  ASSERT_TRUE(c.request(good, &s));
  EXPECT_TRUE(c.answer(s).ok());
}

TEST_F(ClientErrors, ErrorsFromTheStateDirectoryShowNoServerPath) {
  DaemonProcess& d = start_daemon();
  uint32_t s = 0;
  {
    HostileClient c;
    ASSERT_TRUE(c.connect(d.socket_path()));
    ASSERT_TRUE(c.handshake());
    p::Message m;
    ASSERT_TRUE(c.request(p::ContextNew{std::string("broken"), std::nullopt, true}, &s));
    ASSERT_TRUE(c.answer(s, &m).ok());
  }
  // Its metadata damaged on storage while the daemon is down (a running daemon keeps a
  // closed context in memory): opening it after a restart fails with a message about that file.
  const std::string state = d.state_dir();
  ASSERT_EQ(d.kill_and_wait(SIGTERM), 0);
  const std::string meta = state + "/contexts/uid-" + std::to_string(::geteuid()) + "/broken/context.json";
  { std::ofstream(meta, std::ios::trunc) << "{ not json"; }
  DaemonProcess& again = start_daemon();
  HostileClient c;
  ASSERT_TRUE(c.connect(again.socket_path()));
  ASSERT_TRUE(c.handshake());
  for (const p::Message& req : {p::Message(p::ContextOpen{{"broken"}}), p::Message(p::ContextInfo{{"broken"}})}) {
    ASSERT_TRUE(c.request(req, &s));
    const Status st = c.answer(s);
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.message().find(state), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find("/tmp/"), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find("uid-"), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find("contexts/"), std::string::npos) << st.message();
  }
}

}  // namespace
