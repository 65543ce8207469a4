// SPDX-License-Identifier: Apache-2.0
// ProgramBuilder: OpenCL programs built for one device, their binaries cached on storage (keyed
// by platform, device, driver version, build options and source), so a second start does not
// compile. A cached file whose length or checksum is wrong never reaches the driver, and one the
// driver refuses is rebuilt from source and replaced; a source the driver cannot build is an
// error carrying its build log.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "hal/opencl/cl_api.h"
#include "hal/opencl/cl_platform.h"

namespace llmsvc::hal::opencl {

class ProgramBuilder {
 public:
  // cache_dir: where binaries go (made if missing); "": no cache.
  ProgramBuilder(cl_context context, const ClDeviceInfo& device, std::string cache_dir);

  Result<ClProgram> build(std::string_view source, std::string_view options = {});

  uint64_t compiled() const { return compiled_; }  // built from source
  uint64_t loaded() const { return loaded_; }      // from a cached binary

 private:
  std::string cache_path(std::string_view source, std::string_view options) const;
  Result<ClProgram> from_binary(const std::string& path, std::string_view options);
  void store_binary(cl_program program, const std::string& path);

  cl_context context_;
  ClDeviceInfo device_;
  std::string cache_dir_;
  uint64_t compiled_ = 0, loaded_ = 0;
};

}  // namespace llmsvc::hal::opencl
