// SPDX-License-Identifier: Apache-2.0
// ProgramBuilder: clBuildProgram from a cached binary, else from source (then cached).
#include "hal/opencl/program_cache.h"

#include <xxhash.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "base/file_io.h"

namespace llmsvc::hal::opencl {
namespace {

constexpr size_t kMaxBinaryBytes = 256u << 20;
// A cached file: this magic, the binary's length and XXH3-64 (little-endian u64s), the binary.
// Checked before the driver sees a byte: a driver may trust its binaries (PoCL asserts on a
// truncated one), and the cache is storage anyone with the directory could have changed.
constexpr char kMagic[8] = {'L', 'L', 'C', 'L', 'B', 'I', 'N', '1'};
constexpr size_t kHeader = sizeof kMagic + 16;

uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
constexpr size_t kMaxLogBytes = 4000;

std::string build_log(cl_program p, cl_device_id d) {
  size_t n = 0;
  if (clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "(no build log)";
  std::string log(n, '\0');
  if (clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr) != CL_SUCCESS) return "(no build log)";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (log.size() > kMaxLogBytes) log = log.substr(0, kMaxLogBytes) + " ...";
  return log;
}

}  // namespace

ProgramBuilder::ProgramBuilder(cl_context context, const ClDeviceInfo& device, std::string cache_dir)
    : context_(context), device_(device), cache_dir_(std::move(cache_dir)) {}

std::string ProgramBuilder::cache_path(std::string_view source, std::string_view options) const {
  XXH3_state_t* st = XXH3_createState();
  if (!st) return {};
  XXH3_64bits_reset(st);
  // Length-prefixed parts: no two keys hash alike by concatenation.
  for (std::string_view part : {std::string_view(device_.platform_name), std::string_view(device_.device_name),
                                std::string_view(device_.driver_version), options, source}) {
    const uint64_t len = part.size();
    XXH3_64bits_update(st, &len, sizeof len);
    XXH3_64bits_update(st, part.data(), part.size());
  }
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.clbin", static_cast<unsigned long long>(h));
  return cache_dir_ + "/" + name;
}

Result<ClProgram> ProgramBuilder::from_binary(const std::string& path, std::string_view options) {
  auto bytes = fileio::read_file(path, kMaxBinaryBytes + kHeader);
  if (!bytes.ok() || bytes->size() <= kHeader || bytes->compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0)
    return Status(Code::not_found, "");
  const size_t len = bytes->size() - kHeader;
  const char* body = bytes->data() + kHeader;
  if (get_u64(bytes->data() + sizeof kMagic) != len || get_u64(bytes->data() + sizeof kMagic + 8) != XXH3_64bits(body, len))
    return Status(Code::not_found, "");
  const auto* data = reinterpret_cast<const unsigned char*>(body);
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  ClProgram p(clCreateProgramWithBinary(context_, 1, &device_.device, &len, &data, &status, &err));
  if (err != CL_SUCCESS || status != CL_SUCCESS || !p) return Status(Code::not_found, "");
  const std::string opts(options);
  if (clBuildProgram(p.get(), 1, &device_.device, opts.c_str(), nullptr, nullptr) != CL_SUCCESS)
    return Status(Code::not_found, "");
  return p;
}

void ProgramBuilder::store_binary(cl_program program, const std::string& path) {
  size_t len = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, nullptr) != CL_SUCCESS || len == 0 ||
      len > kMaxBinaryBytes)
    return;
  std::vector<uint8_t> bin(len);
  unsigned char* ptr = bin.data();
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) != CL_SUCCESS) return;
  std::vector<uint8_t> file(kMagic, kMagic + sizeof kMagic);
  put_u64(file, len);
  put_u64(file, XXH3_64bits(bin.data(), len));
  file.insert(file.end(), bin.begin(), bin.end());
  // A cache that cannot be written only costs the next start a compile.
  if (fileio::make_dirs(cache_dir_).ok()) (void)fileio::write_atomic(path, file);
}

Result<ClProgram> ProgramBuilder::build(std::string_view source, std::string_view options) {
  const std::string path = cache_dir_.empty() ? std::string() : cache_path(source, options);
  if (!path.empty()) {
    auto cached = from_binary(path, options);
    if (cached.ok()) {
      ++loaded_;
      return cached;
    }
  }
  const char* src = source.data();
  const size_t len = source.size();
  cl_int err = CL_SUCCESS;
  ClProgram p(clCreateProgramWithSource(context_, 1, &src, &len, &err));
  if (err != CL_SUCCESS) return cl_status(err, "creating a program");
  const std::string opts(options);
  err = clBuildProgram(p.get(), 1, &device_.device, opts.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    std::string m = "opencl: building kernels for ";
    m.append(device_.description()).append(" failed (").append(cl_error_name(err)).append("): ");
    m.append(build_log(p.get(), device_.device));
    return Status(Code::internal, m);
  }
  ++compiled_;
  if (const char* log = std::getenv("LLMSVC_CL_BUILD_LOG"); log && std::string_view(log) == "1")
    std::fprintf(stderr, "opencl build (%s):\n%s\n", opts.c_str(), build_log(p.get(), device_.device).c_str());
  if (!path.empty()) store_binary(p.get(), path);
  return p;
}

}  // namespace llmsvc::hal::opencl
