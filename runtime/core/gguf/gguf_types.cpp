// SPDX-License-Identifier: Apache-2.0
// Block geometry of the GGML tensor types we know, and value type names.
//
// Sizes are those of ggml's block structs (ggml-common.h), which define the file layout.
// Note Q8_1: ggml's block_q8_1 is {half d, half s, int8 qs[32]} = 36 bytes; gguf-py's
// table still says 40 (from when d and s were floats) and is wrong.
#include "runtime/core/gguf/gguf_types.h"

#include <string>

namespace llmsvc::gguf {

namespace {

constexpr uint32_t kQK = 32;    // elements per block of the legacy quant types
constexpr uint32_t kQKK = 256;  // elements per super-block of the k-quants

struct Entry {
  TensorType type;
  TypeTraits traits;
};

constexpr Entry kTypes[] = {
    {TensorType::F32, {"F32", 1, 4}},
    {TensorType::F16, {"F16", 1, 2}},
    {TensorType::BF16, {"BF16", 1, 2}},
    {TensorType::Q4_0, {"Q4_0", kQK, 2 + kQK / 2}},                    // d, 4-bit quants
    {TensorType::Q4_1, {"Q4_1", kQK, 4 + kQK / 2}},                    // d, m, 4-bit quants
    {TensorType::Q5_0, {"Q5_0", kQK, 2 + 4 + kQK / 2}},                // d, high bits, low nibbles
    {TensorType::Q5_1, {"Q5_1", kQK, 4 + 4 + kQK / 2}},                // d, m, high bits, nibbles
    {TensorType::Q8_0, {"Q8_0", kQK, 2 + kQK}},                        // d, int8 quants
    {TensorType::Q8_1, {"Q8_1", kQK, 4 + kQK}},                        // d, s, int8 quants
    {TensorType::Q2_K, {"Q2_K", kQKK, kQKK / 16 + kQKK / 4 + 4}},      // scales, quants, d, dmin
    {TensorType::Q3_K, {"Q3_K", kQKK, kQKK / 8 + kQKK / 4 + 12 + 2}},  // hmask, quants, scales, d
    {TensorType::Q4_K, {"Q4_K", kQKK, 4 + 12 + kQKK / 2}},             // d, dmin, scales, quants
    {TensorType::Q5_K, {"Q5_K", kQKK, 4 + 12 + kQKK / 8 + kQKK / 2}},  // + high bits
    {TensorType::Q6_K, {"Q6_K", kQKK, kQKK / 2 + kQKK / 4 + kQKK / 16 + 2}},  // ql, qh, scales, d
    {TensorType::Q8_K, {"Q8_K", kQKK, 4 + kQKK + kQKK / 16 * 2}},      // float d, quants, bsums
    // Types llmsvc does not compute with; their geometry lets such files parse so the
    // loader can name the unsupported type.
    {TensorType::IQ2_XXS, {"IQ2_XXS", kQKK, 2 + kQKK / 4}},
    {TensorType::IQ2_XS, {"IQ2_XS", kQKK, 2 + kQKK / 4 + kQKK / 32}},
    {TensorType::IQ3_XXS, {"IQ3_XXS", kQKK, 2 + 3 * kQKK / 8}},
    {TensorType::IQ1_S, {"IQ1_S", kQKK, 2 + kQKK / 8 + kQKK / 16}},
    {TensorType::IQ4_NL, {"IQ4_NL", kQK, 2 + kQK / 2}},
    {TensorType::IQ3_S, {"IQ3_S", kQKK, 2 + kQKK / 4 + kQKK / 32 + kQKK / 8 + kQKK / 64}},
    {TensorType::IQ2_S, {"IQ2_S", kQKK, 2 + kQKK / 4 + kQKK / 32 + kQKK / 32}},
    {TensorType::IQ4_XS, {"IQ4_XS", kQKK, 2 + 2 + kQKK / 64 + kQKK / 2}},
    {TensorType::I8, {"I8", 1, 1}},
    {TensorType::I16, {"I16", 1, 2}},
    {TensorType::I32, {"I32", 1, 4}},
    {TensorType::I64, {"I64", 1, 8}},
    {TensorType::F64, {"F64", 1, 8}},
    {TensorType::IQ1_M, {"IQ1_M", kQKK, kQKK / 8 + kQKK / 16 + kQKK / 32}},
    {TensorType::TQ1_0, {"TQ1_0", kQKK, (kQKK - 4 * kQKK / 64) / 5 + kQKK / 64 + 2}},
    {TensorType::TQ2_0, {"TQ2_0", kQKK, kQKK / 4 + 2}},
    {TensorType::MXFP4, {"MXFP4", kQK, 1 + kQK / 2}},
};

static_assert(kTypes[8].traits.block_bytes == 36, "Q8_1 follows ggml's block_q8_1");
static_assert(kTypes[9].traits.block_bytes == 84 && kTypes[10].traits.block_bytes == 110 &&
                  kTypes[11].traits.block_bytes == 144 && kTypes[12].traits.block_bytes == 176 &&
                  kTypes[13].traits.block_bytes == 210 && kTypes[14].traits.block_bytes == 292,
              "k-quant block sizes follow ggml-common.h");

}  // namespace

const TypeTraits* type_traits(uint32_t type) {
  for (const Entry& e : kTypes) {
    if (static_cast<uint32_t>(e.type) == type) return &e.traits;
  }
  return nullptr;
}

Result<TensorSize> tensor_size(uint32_t type, std::span<const uint64_t> ne) {
  const auto bad = [](const std::string& msg) { return Status(Code::invalid_argument, msg); };
  const auto num = [](uint64_t v) { return std::to_string(v); };
  if (ne.empty() || ne.size() > 4) return bad("n_dims " + num(ne.size()) + " is outside 1..4");
  TensorSize size;
  size.elems = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    const std::string field = "ne[" + num(d) + "]";
    if (ne[d] == 0) return bad(field + " is 0");
    if (__builtin_mul_overflow(size.elems, ne[d], &size.elems)) {
      return bad("element count overflows 64 bits at " + field + " = " + num(ne[d]));
    }
  }
  const TypeTraits* tt = type_traits(type);
  if (tt == nullptr) return bad("unknown tensor type " + num(type));
  if (ne[0] % tt->block_elems != 0) {
    return bad("ne[0] = " + num(ne[0]) + " is not a multiple of the " + std::string(tt->name) + " block size " +
               num(tt->block_elems));
  }
  // ne[0] is a whole number of blocks, hence so is elems.
  if (__builtin_mul_overflow(size.elems / tt->block_elems, uint64_t{tt->block_bytes}, &size.bytes)) {
    return bad("byte size overflows 64 bits");
  }
  return size;
}

std::string_view value_type_name(uint32_t type) {
  switch (static_cast<ValueType>(type)) {
    case ValueType::u8: return "u8";
    case ValueType::i8: return "i8";
    case ValueType::u16: return "u16";
    case ValueType::i16: return "i16";
    case ValueType::u32: return "u32";
    case ValueType::i32: return "i32";
    case ValueType::f32: return "f32";
    case ValueType::boolean: return "bool";
    case ValueType::string: return "string";
    case ValueType::array: return "array";
    case ValueType::u64: return "u64";
    case ValueType::i64: return "i64";
    case ValueType::f64: return "f64";
  }
  return "unknown";
}

}  // namespace llmsvc::gguf
