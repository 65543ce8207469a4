// SPDX-License-Identifier: Apache-2.0
// No OpenCL platform (the ICD loader pointed at an empty vendors folder): listing and choosing
// a device are a clear UNSUPPORTED error that says where the loader looked. A binary of its own:
// the loader reads its configuration once per process.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>

#include "hal/opencl/cl_platform.h"
#include "tests/common/file_facts.h"

namespace llmsvc::hal::opencl {
namespace {

TEST(OpenClNone, NoPlatformIsAClearError) {
  const std::string empty = test::make_temp_dir("llmsvc-no-icd");
  ASSERT_FALSE(empty.empty());
  ASSERT_EQ(::setenv("OCL_ICD_VENDORS", empty.c_str(), 1), 0);
  auto all = list_cl_devices();
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), Code::unsupported);
  EXPECT_NE(all.status().message().find("no OpenCL platform"), std::string::npos) << all.status().message();
  EXPECT_NE(all.status().message().find("OCL_ICD_VENDORS"), std::string::npos) << all.status().message();
  EXPECT_EQ(select_cl_device("").status().code(), Code::unsupported);
  std::filesystem::remove_all(empty);
}

}  // namespace
}  // namespace llmsvc::hal::opencl
