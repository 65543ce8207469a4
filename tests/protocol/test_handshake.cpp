// SPDX-License-Identifier: Apache-2.0
// Version negotiation: the highest common version, refusals with Code::unsupported.
#include <gtest/gtest.h>

#include "runtime/protocol/handshake.h"

namespace llmsvc::protocol {
namespace {

TEST(ProtocolHandshake, PicksTheHighestCommonVersion) {
  auto v = negotiate(Hello{1, 1, kDefaultMaxPayload, ""});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 1);
  v = negotiate(Hello{1, 5, kDefaultMaxPayload, ""}, 2, 3);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 3);
  v = negotiate(Hello{3, 9, kDefaultMaxPayload, ""}, 1, 4);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 4);
}

TEST(ProtocolHandshake, NoCommonVersion) {
  auto v = negotiate(Hello{10, 11, kDefaultMaxPayload, ""});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Code::unsupported);
  EXPECT_EQ(v.status().message(), "no common protocol version: the client speaks 10..11, the server 1..9");
  EXPECT_FALSE(negotiate(Hello{1, 1, kDefaultMaxPayload, ""}, 2, 2).ok());
}

// This build speaks 1..9: an old client (1..1 or 1..2) still gets its version from the new
// daemon, and the new client (it offers 1..9) gets 1 to 8 from an old daemon, 9 from a new one.
TEST(ProtocolHandshake, NewestMeetsOlderPeers) {
  EXPECT_EQ(kMinVersion, 1);
  EXPECT_EQ(kMaxVersion, 9);
  auto v2 = negotiate(Hello{1, 2, kDefaultMaxPayload, "version-2 client"});
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(*v2, 2);
  auto v = negotiate(Hello{1, 1, kDefaultMaxPayload, "old client"});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 1);
  const Hello ours;  // what the client sends
  EXPECT_EQ(ours.min_version, 1);
  EXPECT_EQ(ours.max_version, 9);
  v = negotiate(ours, 1, 1);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 1);
  v = negotiate(ours, 1, 2);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 2);
  v = negotiate(ours, 1, 3);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 3);
  v = negotiate(ours, 1, 4);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 4);
  v = negotiate(ours, 1, 5);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 5);
  v = negotiate(ours, 1, 6);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 6);
  v = negotiate(ours, 1, 7);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 7);
  v = negotiate(ours, 1, 8);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 8);
  v = negotiate(ours);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 9);
}

TEST(ProtocolHandshake, ClientChecksTheWelcome) {
  const Hello hello{1, 2, kDefaultMaxPayload, "t"};
  Welcome w;
  w.version = 2;
  EXPECT_TRUE(check_welcome(hello, w).ok());
  w.version = 3;
  Status s = check_welcome(hello, w);
  EXPECT_EQ(s.code(), Code::unsupported);
  EXPECT_EQ(s.message(), "the server chose protocol version 3, outside the client's 1..2");
}

}  // namespace
}  // namespace llmsvc::protocol
