// SPDX-License-Identifier: Apache-2.0
// ClMatmul on the first OpenCL device (or the one --device= names): GEMV for 1, 2 and 4 tokens
// at 7B shapes (4096 x 4096, 4096 x 11008, 11008 x 4096), GEMM for 8 and 16 (where the GEMV
// hands over: compare the time per token) and 512 tokens (prefill), for random
// Q4_0 and Q4_1 weights (--types=q4_0,q4_1,q4_k,q8_0,q6_k,f16,e0m4 picks others; e0m4: the Q4_0
// weights repacked as Transformer-Lite's E0M4, cl_matmul.cpp). Each call uses the
// next of enough weight copies to exceed the GPU's L2, as a decode step walking the layers does,
// so GB/s is the rate weights stream from device memory. One JSON line per measurement:
//   {"bench":"cl_matmul","device":...,"type":"q4_0","rows":4096,"cols":4096,"tokens":1,
//    "mma":false,"int8":false,"dp4a":true,"us":...,"gbps":...,"gflops":...}   (mma: the tensor-core
//    GEMM ran, int8: its int8 form, LLMSVC_CL_MMQ=0 / 1 turns that off / on; dp4a: the int8-
//    activation GEMV of decode ran, LLMSVC_CL_GEMV_DP4A=0 turns it off)
//   bench_cl_matmul [--device=SPEC] [--types=LIST] [--tokens=1,2,4,8,16,512] [--ab] [--quick]
// (--ab: every GEMV measurement of 1-4 tokens twice, the int8 GEMV's then the float GEMV's, on
// the same weights; --quick: small shapes and at most 64 tokens, a smoke run). A call's time
// includes its input's quantization (one launch either way), as a decode step's matmul pays it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hal/host/fp16.h"
#include "hal/opencl/cl_matmul.h"

namespace llmsvc::hal::opencl {
namespace {

struct TypeName {
  const char* name;
  WeightType type;
};
constexpr TypeName kTypeNames[] = {{"q4_0", WeightType::Q4_0}, {"q4_1", WeightType::Q4_1}, {"q4_k", WeightType::Q4_K},
                                   {"q8_0", WeightType::Q8_0},  {"q6_k", WeightType::Q6_K}, {"f16", WeightType::F16},
                                   {"e0m4", WeightType::Q4_0}};

// Random codes with sane f16 scales (d first, Q6_K's last; a min second where there is one).
std::vector<uint8_t> random_weight(WeightType type, int64_t rows, int64_t cols) {
  std::mt19937 rng(1);
  std::vector<uint8_t> w(row_bytes(type, cols) * static_cast<size_t>(rows));
  if (type == WeightType::F16) {
    for (size_t i = 0; i < w.size(); i += 2) {
      const uint16_t h = fp32_to_fp16(static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 1000.f);
      std::memcpy(&w[i], &h, 2);
    }
    return w;
  }
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const size_t bs = block_bytes(type), d_off = type == WeightType::Q6_K ? 208 : 0;
  for (size_t i = 0; i < w.size(); i += bs) {
    const uint16_t d = fp32_to_fp16(0.001f + 0.01f * static_cast<float>(rng() % 1000) / 1000.f);
    std::memcpy(&w[i + d_off], &d, 2);
    if (type == WeightType::Q4_1 || type == WeightType::Q4_K) std::memcpy(&w[i + 2], &d, 2);
  }
  return w;
}

// Whether a comma-separated list names `item`.
bool listed(std::string_view list, std::string_view item) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (list.substr(0, comma) == item) return true;
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
  return false;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(std::string_view device, std::string_view types, std::string_view tokens, bool ab, bool quick) {
  auto info = select_cl_device(device);
  if (!info.ok()) {
    std::fprintf(stderr, "bench_cl_matmul: %s\n", info.status().message().c_str());
    return 1;
  }
  auto ctx = ClDeviceContext::open(*info, ClOptions{});
  if (!ctx.ok()) {
    std::fprintf(stderr, "bench_cl_matmul: %s\n", ctx.status().message().c_str());
    return 1;
  }
  auto plain = ClMatmul::create(**ctx, false);
  auto repacked = ClMatmul::create(**ctx, true);
  // --ab's float GEMV (the rest of its matmul as plain's).
  auto float_gemv = ClMatmul::create(**ctx, false, std::nullopt, false);
  auto float_e0m4 = ClMatmul::create(**ctx, true, std::nullopt, false);
  for (auto* made : {&plain, &repacked, &float_gemv, &float_e0m4}) {
    if (!made->ok()) {
      std::fprintf(stderr, "bench_cl_matmul: %s\n", made->status().message().c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "bench_cl_matmul: int8 GEMV: %s\n",
               (*plain)->dp4a_gemv_note().empty() ? "dp4a through PTX" : (*plain)->dp4a_gemv_note().c_str());
  cl_ulong local = 0;
  clGetDeviceInfo(info->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, nullptr);
  std::fprintf(stderr, "bench_cl_matmul: %s, %llu bytes of local memory; int8 GEMM: %s\n", info->device_name.c_str(),
               static_cast<unsigned long long>(local),
               (*plain)->int8_gemm_note().empty() ? "on" : (*plain)->int8_gemm_note().c_str());
  if (!(*plain)->tensor_core_note().empty())
    std::fprintf(stderr, "bench_cl_matmul: no tensor-core GEMM: %s\n", (*plain)->tensor_core_note().c_str());
  cl_command_queue queue = (*ctx)->queue().handle();
  struct Shape {
    int64_t rows, cols;
  };
  const std::vector<Shape> shapes =
      quick ? std::vector<Shape>{{256, 512}} : std::vector<Shape>{{4096, 4096}, {4096, 11008}, {11008, 4096}};
  std::vector<int> counts;
  for (std::string_view rest = tokens; !rest.empty();) {
    const size_t comma = rest.find(',');
    const int n = std::atoi(std::string(rest.substr(0, comma)).c_str());
    if (n > 0) counts.push_back(quick ? std::min(n, 64) : n);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  if (counts.empty()) return 2;
  const int max_tokens = *std::max_element(counts.begin(), counts.end());
  const size_t stream_bytes = quick ? (1u << 20) : (320u << 20);  // past an H100's 50 MB of L2

  // Activations for the largest shape, random.
  const size_t max_cols = 11008, x_floats = static_cast<size_t>(max_tokens) * max_cols;
  std::vector<float> xh(x_floats);
  std::mt19937 rng(2);
  for (float& v : xh) v = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 1000.f;
  auto xd = (*ctx)->pool().alloc(x_floats * 4), yd = (*ctx)->pool().alloc(x_floats * 4);
  if (!xd.ok() || !yd.ok()) return 1;
  clEnqueueWriteBuffer(queue, ClPool::mem(*xd), CL_TRUE, 0, x_floats * 4, xh.data(), 0, nullptr, nullptr);
  const ClView x{ClPool::mem(*xd), 0}, y{ClPool::mem(*yd), 0};

  for (const TypeName& t : kTypeNames) {
    if (!listed(types, t.name)) continue;
    const bool e0m4 = std::string_view(t.name) == "e0m4";
    ClMatmul* mm = e0m4 ? repacked->get() : plain->get();
    ClMatmul* mm_float = e0m4 ? float_e0m4->get() : float_gemv->get();
    for (const Shape& s : shapes) {
      const auto bytes = random_weight(t.type, s.rows, s.cols);
      const WeightRef ref{t.type, bytes.data(), s.rows, s.cols, row_bytes(t.type, s.cols)};
      std::vector<std::unique_ptr<ClWeight>> ws;
      do {
        auto w = mm->upload(ref);
        if (!w.ok()) {
          std::fprintf(stderr, "bench_cl_matmul: %s\n", w.status().message().c_str());
          return 1;
        }
        ws.push_back(std::move(w).value());
      } while (ws.size() * ws[0]->device_bytes() < stream_bytes);
      // A weight is buffers of the shared context: either ClMatmul multiplies it.
      std::vector<std::pair<int, ClMatmul*>> runs;
      for (int n : counts) {
        runs.emplace_back(n, mm);
        if (ab && mm->uses_dp4a_gemv(*ws[0], n)) runs.emplace_back(n, mm_float);
      }
      for (const auto& [n, m] : runs) {
        // Warm-up (first launches compile or upload code), then enough calls for ~0.3 s.
        for (size_t i = 0; i < ws.size(); ++i)
          if (!m->matmul(*ws[i], x, n, y).ok()) return 1;
        clFinish(queue);
        size_t calls = 0;
        const auto t0 = std::chrono::steady_clock::now();
        double elapsed = 0;
        while (elapsed < 0.3) {
          for (size_t i = 0; i < ws.size(); ++i)
            if (!m->matmul(*ws[i], x, n, y).ok()) return 1;
          clFinish(queue);
          calls += ws.size();
          elapsed = seconds_since(t0);
        }
        const double per_call = elapsed / static_cast<double>(calls);
        const double gbps = static_cast<double>(ws[0]->device_bytes()) / per_call / 1e9;
        const double gflops = 2.0 * static_cast<double>(s.rows) * static_cast<double>(s.cols) * n / per_call / 1e9;
        std::printf(
            "{\"bench\":\"cl_matmul\",\"device\":\"%s\",\"type\":\"%s\",\"rows\":%lld,\"cols\":%lld,\"tokens\":%d,"
            "\"copies\":%zu,\"mma\":%s,\"int8\":%s,\"dp4a\":%s,\"us\":%.2f,\"gbps\":%.1f,\"gflops\":%.1f}\n",
            info->device_name.c_str(), t.name, static_cast<long long>(s.rows), static_cast<long long>(s.cols), n,
            ws.size(), m->uses_tensor_cores(n) ? "true" : "false", m->uses_int8_gemm(*ws[0], n) ? "true" : "false",
            m->uses_dp4a_gemv(*ws[0], n) ? "true" : "false", per_call * 1e6, gbps, gflops);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace llmsvc::hal::opencl

int main(int argc, char** argv) {
  std::string_view device, types = "q4_0,q4_1", tokens = "1,2,4,8,16,512";
  bool quick = false, ab = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.starts_with("--device=")) {
      device = a.substr(9);
    } else if (a.starts_with("--types=")) {
      types = a.substr(8);
    } else if (a.starts_with("--tokens=")) {
      tokens = a.substr(9);
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--ab") {
      ab = true;
    } else {
      std::fprintf(stderr, "usage: bench_cl_matmul [--device=SPEC] [--types=q4_0,q4_1,...] [--tokens=1,2,4,8,16,512] [--ab] [--quick]\n");
      return 2;
    }
  }
  return llmsvc::hal::opencl::run(device, types, tokens, ab, quick);
}
