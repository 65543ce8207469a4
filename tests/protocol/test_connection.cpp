// SPDX-License-Identifier: Apache-2.0
// ConnectionState: the connection rules of docs/PROTOCOL.md section 6, on both ends.
#include <gtest/gtest.h>

#include "runtime/protocol/connection.h"

namespace llmsvc::protocol {
namespace {

Welcome welcome(uint32_t max_calls) {
  Welcome w;
  w.max_calls = max_calls;
  return w;
}

// Both ends through the handshake.
struct Pair {
  ConnectionState client{Role::client};
  ConnectionState server{Role::server};
  explicit Pair(uint32_t max_calls = 2) {
    EXPECT_TRUE(client.on_send(0, Hello{}).ok());
    EXPECT_TRUE(server.on_receive(0, Hello{}).ok());
    EXPECT_TRUE(server.on_send(0, welcome(max_calls)).ok());
    EXPECT_TRUE(client.on_receive(0, welcome(max_calls)).ok());
  }
  // The client sends m on `stream`, the server receives it.
  Result<Received> request(uint32_t stream, const Message& m) {
    if (auto s = client.on_send(stream, m); !s.ok()) return s;
    return server.on_receive(stream, m);
  }
  // The server answers, the client receives.
  Result<Received> answer(uint32_t stream, const Message& m) {
    if (auto s = server.on_send(stream, m); !s.ok()) return s;
    return client.on_receive(stream, m);
  }
};

Call call_msg() {
  Call c;
  c.handle = 1;
  return c;
}

TEST(Connection, HandshakeReachesReady) {
  Pair p;
  EXPECT_EQ(p.client.phase(), Phase::ready);
  EXPECT_EQ(p.server.phase(), Phase::ready);
  EXPECT_EQ(p.client.max_calls(), 2u);
  EXPECT_EQ(p.server.max_calls(), 2u);
}

// Both ends record the version the WELCOME agreed on: how every later payload is laid out.
TEST(Connection, BothEndsKnowTheAgreedVersion) {
  for (uint16_t v : {uint16_t{1}, uint16_t{2}}) {
    ConnectionState client(Role::client), server(Role::server);
    EXPECT_EQ(client.version(), kMinVersion);
    EXPECT_EQ(server.version(), kMinVersion);
    Welcome w = welcome(1);
    w.version = v;
    ASSERT_TRUE(client.on_send(0, Hello{}).ok());
    ASSERT_TRUE(server.on_receive(0, Hello{}).ok());
    ASSERT_TRUE(server.on_send(0, w).ok());
    ASSERT_TRUE(client.on_receive(0, w).ok());
    EXPECT_EQ(server.version(), v);
    EXPECT_EQ(client.version(), v);
  }
}

// A type a later version added is refused on a connection that agreed on an older one, both
// ways (the client library checks the version before it would send one: UNSUPPORTED).
TEST(Connection, NewerTypesNeedTheirVersion) {
  ConnectionState client(Role::client), server(Role::server);
  Welcome w = welcome(1);
  w.version = kVersionModelInfo - 1;
  ASSERT_TRUE(client.on_send(0, Hello{}).ok());
  ASSERT_TRUE(server.on_receive(0, Hello{}).ok());
  ASSERT_TRUE(server.on_send(0, w).ok());
  ASSERT_TRUE(client.on_receive(0, w).ok());
  EXPECT_FALSE(client.on_send(1, ModelInfoRequest{}).ok());
  auto r = server.on_receive(1, CountTokens{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("COUNT_TOKENS is a message of protocol version 4"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(server.on_bad_request(2, MsgType::model_info).ok());
  // At version 4 they are requests like the others, each answered by its reply.
  Pair p;
  ASSERT_TRUE(p.request(1, ModelInfoRequest{}).ok());
  ASSERT_TRUE(p.request(2, CountTokens{}).ok());
  EXPECT_FALSE(p.answer(1, CountTokensReply{}).ok());
  auto a = p.answer(1, ModelInfoReply{});
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->ends_request);
  a = p.answer(2, CountTokensReply{});
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->ends_request);
}

TEST(Connection, HelloMustComeFirst) {
  ConnectionState server(Role::server);
  auto r = server.on_receive(1, ContextList{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("first frame must be HELLO"), std::string::npos);
  ConnectionState s2(Role::server);
  EXPECT_FALSE(s2.on_receive(0, Ping{}).ok());
}

TEST(Connection, NothingBeforeWelcome) {
  ConnectionState client(Role::client);
  EXPECT_FALSE(client.on_send(1, ContextList{}).ok());  // before HELLO
  ASSERT_TRUE(client.on_send(0, Hello{}).ok());
  EXPECT_FALSE(client.on_send(1, ContextList{}).ok());  // before WELCOME
  EXPECT_FALSE(client.on_send(0, Hello{}).ok());        // a second HELLO
  ConnectionState server(Role::server);
  ASSERT_TRUE(server.on_receive(0, Hello{}).ok());
  EXPECT_FALSE(server.on_receive(1, ContextList{}).ok());  // the client did not wait
}

TEST(Connection, SecondHelloIsAConnectionError) {
  Pair p;
  EXPECT_FALSE(p.server.on_receive(0, Hello{}).ok());
}

TEST(Connection, WelcomeOnlyAnswersHello) {
  ConnectionState server(Role::server);
  EXPECT_FALSE(server.on_send(0, welcome(1)).ok());
  ConnectionState client(Role::client);
  EXPECT_FALSE(client.on_receive(0, welcome(1)).ok());
  Pair p;
  EXPECT_FALSE(p.client.on_receive(0, welcome(1)).ok());  // a second WELCOME
}

TEST(Connection, StreamIdsAreNotReusedWhileInFlight) {
  Pair p;
  ASSERT_TRUE(p.request(1, ContextList{}).ok());
  EXPECT_FALSE(p.client.on_send(1, Stats{}).ok());
  auto r = p.server.on_receive(1, Stats{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("in flight"), std::string::npos);
  // Once answered, the id may be reused.
  ContextListReply last;
  auto a = p.answer(1, last);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->ends_request);
  EXPECT_TRUE(p.request(1, Stats{}).ok());
}

TEST(Connection, RequestsNeedANonZeroStream) {
  Pair p;
  EXPECT_FALSE(p.client.on_send(0, Stats{}).ok());
  EXPECT_FALSE(p.server.on_receive(0, Stats{}).ok());
}

TEST(Connection, OneFinalAnswerPerRequest) {
  Pair p;
  ASSERT_TRUE(p.request(3, call_msg()).ok());
  EXPECT_EQ(p.server.calls_in_flight(), 1u);
  auto piece = p.answer(3, Piece{});
  ASSERT_TRUE(piece.ok());
  EXPECT_FALSE(piece->ends_request);
  EXPECT_EQ(piece->request, MsgType::call);
  auto result = p.answer(3, CallResult{});
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->ends_request);
  EXPECT_EQ(p.server.calls_in_flight(), 0u);
  EXPECT_EQ(p.client.in_flight(), 0u);
  // Nothing after the final answer, on either side.
  EXPECT_FALSE(p.server.on_send(3, Piece{}).ok());
  EXPECT_FALSE(p.client.on_receive(3, CallResult{}).ok());
}

TEST(Connection, ListRepliesEndOnTheLastPart) {
  Pair p;
  ASSERT_TRUE(p.request(2, ContextList{}).ok());
  ContextListReply part;
  part.more = true;
  auto a = p.answer(2, part);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->ends_request);
  part.more = false;
  a = p.answer(2, part);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->ends_request);
}

TEST(Connection, AnswersMustMatchTheirRequest) {
  Pair p;
  ASSERT_TRUE(p.request(1, ContextOpen{}).ok());
  EXPECT_FALSE(p.server.on_send(1, Ack{}).ok());
  EXPECT_FALSE(p.client.on_receive(1, Piece{}).ok());
  EXPECT_TRUE(p.answer(1, Error{}).ok());  // ERROR answers anything
}

TEST(Connection, UnknownStreamsAreRefused) {
  Pair p;
  auto r = p.client.on_receive(9, Ack{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no request in flight"), std::string::npos);
  EXPECT_FALSE(p.server.on_send(9, Ack{}).ok());
}

TEST(Connection, MaxCallsInFlight) {
  Pair p(2);
  ASSERT_TRUE(p.request(1, call_msg()).ok());
  ASSERT_TRUE(p.request(2, call_msg()).ok());
  // A client keeps within the limit itself...
  auto s = p.client.on_send(3, call_msg());
  EXPECT_EQ(s.code(), Code::quota_exceeded);
  // ...and a server refuses a third one with QUOTA_EXCEEDED (answered by ERROR, not closed).
  auto r = p.server.on_receive(3, call_msg());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->refuse.code(), Code::quota_exceeded);
  EXPECT_TRUE(p.server.on_send(3, Error{}).ok());
  EXPECT_EQ(p.server.calls_in_flight(), 2u);
  // Other requests are not limited.
  EXPECT_TRUE(p.request(4, Stats{}).ok());
}

TEST(Connection, CancelOfACallNotInFlightIsIgnored) {
  Pair p;
  ASSERT_TRUE(p.request(5, call_msg()).ok());
  Cancel c;
  c.call = 5;
  ASSERT_TRUE(p.client.on_send(0, c).ok());
  auto r = p.server.on_receive(0, c);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ignore);
  ASSERT_TRUE(p.answer(5, CallResult{}).ok());
  r = p.server.on_receive(0, c);  // the call just ended
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ignore);
  ASSERT_TRUE(p.request(6, Stats{}).ok());
  c.call = 6;  // not a call
  r = p.server.on_receive(0, c);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ignore);
}

TEST(Connection, ErrorOnStreamZeroCloses) {
  Pair p;
  ASSERT_TRUE(p.server.on_send(0, Error{}).ok());
  ASSERT_TRUE(p.client.on_receive(0, Error{}).ok());
  EXPECT_EQ(p.server.phase(), Phase::closed);
  EXPECT_EQ(p.client.phase(), Phase::closed);
  EXPECT_FALSE(p.client.on_send(1, Stats{}).ok());
  EXPECT_FALSE(p.server.on_receive(1, Stats{}).ok());
}

TEST(Connection, PingPongOnlyWhenReady) {
  ConnectionState client(Role::client);
  EXPECT_FALSE(client.on_send(0, Ping{}).ok());
  Pair p;
  EXPECT_TRUE(p.client.on_send(0, Ping{}).ok());
  EXPECT_TRUE(p.server.on_receive(0, Ping{}).ok());
  EXPECT_TRUE(p.server.on_send(0, Pong{}).ok());
  EXPECT_TRUE(p.client.on_receive(0, Pong{}).ok());
}

TEST(Connection, MalformedRequestsAreTrackedForTheirError) {
  Pair p;
  ASSERT_TRUE(p.server.on_bad_request(4, MsgType::call).ok());
  EXPECT_TRUE(p.server.on_send(4, Error{}).ok());
  EXPECT_FALSE(p.server.on_bad_request(0, MsgType::cancel).ok());  // stream 0: connection error
  ASSERT_TRUE(p.server.on_bad_request(5, MsgType::stats).ok());
  EXPECT_FALSE(p.server.on_bad_request(5, MsgType::stats).ok());  // in flight
  ConnectionState fresh(Role::server);
  EXPECT_FALSE(fresh.on_bad_request(1, MsgType::stats).ok());
}

}  // namespace
}  // namespace llmsvc::protocol
