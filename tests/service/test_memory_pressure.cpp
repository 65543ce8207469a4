// SPDX-License-Identifier: Apache-2.0
// MemoryPressure, llmsvcd's side of systemd's memory-pressure protocol: "/dev/null" turns it
// off; a trigger that is not base64 and a source that does not exist are errors naming them; on
// an AF_UNIX socket the decoded trigger is sent and anything the peer writes is pressure, its
// hang-up the end; on a FIFO a write is pressure; the system's PSI file takes the default
// trigger where the kernel lets this process set one.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "runtime/service/memory_pressure.h"
#include "tests/model/bad_input_util.h"

namespace llmsvc::service {
namespace {

std::string base64(const std::string& text) {
  std::string out(sodium_base64_ENCODED_LEN(text.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(text.data()), text.size(),
                    sodium_base64_VARIANT_ORIGINAL);
  out.resize(std::strlen(out.c_str()));
  return out;
}

bool readable(int fd, uint32_t events, int timeout_ms = 2000) {
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = events;
  EXPECT_EQ(::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
  epoll_event got{};
  const int n = ::epoll_wait(ep, &got, 1, timeout_ms);
  ::close(ep);
  return n == 1;
}

TEST(MemoryPressure, OffBadTriggerAndMissingSource) {
  auto off = MemoryPressure::open("/dev/null", nullptr);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->kind(), MemoryPressure::Kind::none);

  auto bad = MemoryPressure::open("/proc/pressure/memory", "not base64 at all!");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("MEMORY_PRESSURE_WRITE"), std::string::npos);

  auto missing = MemoryPressure::open("/nonexistent/memory.pressure", nullptr);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/memory.pressure"), std::string::npos);
}

TEST(MemoryPressure, ASocketGetsTheTriggerAndItsWritesArePressure) {
  test::ScratchDir dir;
  const std::string path = dir.file("pressure.sock");
  const int ls = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path.c_str());
  ASSERT_EQ(::bind(ls, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(ls, 1), 0);

  const std::string trigger = "full 100000 4000000";
  auto m = MemoryPressure::open(path.c_str(), base64(trigger).c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->kind(), MemoryPressure::Kind::socket);
  const int peer = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(peer, 0);
  char got[64] = {};
  ASSERT_EQ(::read(peer, got, sizeof got), static_cast<ssize_t>(trigger.size() + 1));
  EXPECT_EQ(std::string(got), trigger);

  EXPECT_TRUE(m->drain());  // nothing sent yet: still watched
  ASSERT_EQ(::write(peer, "x", 1), 1);
  EXPECT_TRUE(readable(m->fd(), m->epoll_events()));
  EXPECT_TRUE(m->drain());
  ::close(peer);
  EXPECT_TRUE(readable(m->fd(), m->epoll_events()));
  EXPECT_FALSE(m->drain());  // the peer is gone
  ::close(ls);
}

TEST(MemoryPressure, AFifosWritesArePressureAndItNeverHangsUp) {
  test::ScratchDir dir;
  const std::string path = dir.file("pressure");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto m = MemoryPressure::open(path.c_str(), nullptr);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->kind(), MemoryPressure::Kind::fifo);
  for (int round = 0; round < 2; ++round) {  // a writer that comes and goes
    const int w = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(w, 0);
    ASSERT_EQ(::write(w, "!", 1), 1);
    ::close(w);
    EXPECT_TRUE(readable(m->fd(), m->epoll_events()));
    EXPECT_TRUE(m->drain());
    EXPECT_FALSE(readable(m->fd(), m->epoll_events(), 50));  // drained, and no hang-up
  }
}

TEST(MemoryPressure, ThePsiFileTakesTheDefaultTrigger) {
  struct stat st{};
  if (::stat("/proc/pressure/memory", &st) != 0)
    GTEST_SKIP() << "/proc/pressure/memory is absent: this kernel was built or booted without PSI";
  auto m = MemoryPressure::open("/proc/pressure/memory", nullptr);
  if (!m.ok()) {
    // A kernel may refuse the trigger to an unprivileged process: the error names the file.
    EXPECT_NE(m.status().message().find("/proc/pressure/memory"), std::string::npos) << m.status().message();
    return;
  }
  EXPECT_EQ(m->kind(), MemoryPressure::Kind::psi);
  EXPECT_EQ(m->epoll_events(), static_cast<uint32_t>(EPOLLPRI));
  EXPECT_EQ(m->describe(), "psi /proc/pressure/memory: some 200000 2000000");
}

}  // namespace
}  // namespace llmsvc::service
