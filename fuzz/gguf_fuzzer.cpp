// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the GGUF reader: any byte string must either be refused with
// model_invalid or yield a file whose every value and tensor can be touched safely.
// Invariants the reader promises are checked here too; a violation aborts (a finding).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "runtime/core/gguf/gguf_file.h"

namespace {

using llmsvc::gguf::GgufFile;
using llmsvc::gguf::TensorInfo;
using llmsvc::gguf::Value;
using llmsvc::gguf::ValueType;

volatile uint64_t g_sink;  // keeps the reads below from being optimised away

void check(bool ok) {
  if (!ok) std::abort();
}

void touch(const Value& v, int depth) {
  check(depth <= 8);
  uint64_t h = v.u ^ static_cast<uint64_t>(v.i) ^ v.s.size() ^ static_cast<uint64_t>(v.f != v.f);
  for (const std::string& s : v.strs) h += s.size() + (s.empty() ? 0 : static_cast<uint8_t>(s.back()));
  for (int64_t x : v.ints) h += static_cast<uint64_t>(x);
  for (uint64_t x : v.uints) h += x;
  for (double x : v.floats) h += x == x ? 1 : 2;
  for (const Value& e : v.arr) touch(e, depth + 1);
  if (v.type == ValueType::array) {
    const size_t n = v.array_size;
    switch (v.elem_type) {
      case ValueType::string: check(v.strs.size() == n); break;
      case ValueType::array: check(v.arr.size() == n); break;
      case ValueType::f32: case ValueType::f64: check(v.floats.size() == n); break;
      case ValueType::i8: case ValueType::i16: case ValueType::i32: case ValueType::i64:
        check(v.ints.size() == n);
        break;
      default: check(v.uints.size() == n && (v.ints.empty() || v.ints.size() == n)); break;
    }
  }
  g_sink = g_sink + h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = GgufFile::from_memory(std::span<const uint8_t>(data, size));
  if (!r.ok()) {
    // Every refusal is a named model_invalid, never another code or an empty message.
    check(r.status().code() == llmsvc::Code::model_invalid);
    check(r.status().message().rfind("gguf: ", 0) == 0);
    return 0;
  }
  const GgufFile& f = **r;
  check(f.alignment() != 0 && (f.alignment() & (f.alignment() - 1)) == 0);
  uint64_t h = 0;
  for (const auto& [key, v] : f.metadata()) {
    check(!key.empty() && f.find(key) == &v);
    touch(v, 0);
    if (auto s = f.get_string(key)) h += s->size();
    if (auto u = f.get_uint(key)) h += *u;
    if (auto i = f.get_int(key)) h += static_cast<uint64_t>(*i);
    if (auto d = f.get_float(key)) h += *d == *d;
    if (auto b = f.get_bool(key)) h += *b;
    if (const auto* a = f.get_string_array(key)) h += a->size();
    if (const auto* a = f.get_float_array(key)) h += a->size();
    if (const auto* a = f.get_int_array(key)) h += a->size();
  }
  const uint8_t* end = data + size;
  for (const TensorInfo& t : f.tensors()) {
    check(f.find_tensor(t.name) == &t);
    check(t.n_dims >= 1 && t.n_dims <= 4);
    uint64_t n = 1;
    for (uint64_t d : t.ne) n *= d;
    check(n == t.n_elems && t.n_bytes > 0);
    check(t.offset % f.alignment() == 0);
    check(t.data >= data && t.data <= end && t.n_bytes <= static_cast<uint64_t>(end - t.data));
    h += t.data[0] + t.data[t.n_bytes - 1];  // ASan checks both ends are in the input
  }
  g_sink = g_sink + h;
  return 0;
}
