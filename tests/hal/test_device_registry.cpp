// SPDX-License-Identifier: Apache-2.0
// The device registry: the CPU is present and opens by its names; anything else is
// UNSUPPORTED, naming what was asked (made printable) and listing the devices present.
#include "hal/devices/device_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace llmsvc::hal {
namespace {

TEST(DeviceRegistry, TheCpuIsPresentAndOpensByItsNames) {
  const std::vector<std::string> present = present_devices();
  EXPECT_NE(std::find(present.begin(), present.end(), "cpu"), present.end());
  for (const char* spec : {"", "cpu", "cpu:0"}) {
    auto d = open_device(spec, DeviceOptions{2});
    ASSERT_TRUE(d.ok()) << spec << ": " << d.status().message();
    EXPECT_EQ((*d)->kind(), DeviceKind::cpu);
    EXPECT_NE((*d)->name().find("2 threads"), std::string::npos) << (*d)->name();
  }
}

TEST(DeviceRegistry, ASecondCpuDeviceHasAMemoryPoolOfItsOwn) {
  auto host = open_device("cpu", DeviceOptions{1});
  auto second = open_device("cpu:1", DeviceOptions{1, 1 << 20});
  ASSERT_TRUE(host.ok() && second.ok());
  EXPECT_EQ((*host)->memory().space(), "host");
  EXPECT_EQ((*second)->memory().space(), "cpu:1");
  EXPECT_EQ((*second)->memory().capacity(), 1u << 20);
  auto b = (*second)->memory().alloc(4096);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*second)->memory().used(), 4096u);
  // Past its capacity: a clean out-of-memory naming the space, and nothing held.
  auto big = (*second)->memory().alloc(2 << 20);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), Code::out_of_memory);
  EXPECT_NE(big.status().message().find("cpu:1"), std::string::npos) << big.status().message();
  EXPECT_EQ((*second)->memory().used(), 4096u);
  b->reset();
  EXPECT_EQ((*second)->memory().used(), 0u);
}

TEST(DeviceRegistry, AnUnknownDeviceIsUnsupportedAndTheMessageListsThosePresent) {
  std::vector<std::string> specs = {"gpu", "cpu:2", "opencl:NVIDIA", "CPU", "cpu:"};
  specs.emplace_back("n\x01\xff", 3);
  for (const std::string& spec : specs) {
    auto d = open_device(spec, DeviceOptions{1});
    ASSERT_FALSE(d.ok()) << spec;
    EXPECT_EQ(d.status().code(), Code::unsupported) << spec;
    const std::string m = d.status().message();
    EXPECT_NE(m.find("present: cpu"), std::string::npos) << m;
    for (char c : m) EXPECT_TRUE(c >= 0x20 && c <= 0x7e) << "unprintable byte in: " << m;
  }
  EXPECT_NE(open_device("gpu", DeviceOptions{1}).status().message().find("'gpu'"), std::string::npos);
  const std::string long_name(5000, 'x');
  EXPECT_LT(open_device(long_name, DeviceOptions{1}).status().message().size(), 200u);
}

}  // namespace
}  // namespace llmsvc::hal
