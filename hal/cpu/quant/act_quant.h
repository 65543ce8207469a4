// SPDX-License-Identifier: Apache-2.0
// Activation quantization: fp32 rows to int8 blocks, the input side of the integer dot products.
//
// Q8 (blocks of 32, for the legacy weight types) follows ggml's quantize_row_q8_0 / q8_1:
// d = amax / 127 (kept fp16-rounded, as ggml stores it), q = round(x * 127 / amax) with ties
// to even, s = fp16(d * sum(q)). Planes are kept separate so kernels can broadcast from them.
// The kernels keep ggml's per-lane sums (one lane per group of 4 consecutive elements), so
// each group also gets an int32 `bias` that both corrects for the weights' zero point and
// makes the int32 lane directly readable as a float (see kGroupBias).
// Q8K (superblocks of 256, for the K-quants) follows ggml's quantize_row_q8_K_ref.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llmsvc::hal::cpu {

// Tokens are stored in groups of kTokenGroup so that a kernel finds the same block of
// consecutive tokens at consecutive addresses.
constexpr int kTokenGroup = 16;

// Integer sums of 4 products are turned into floats without a conversion instruction: with
// the int32 lane started at kGroupBias (the bits of 1.5 * 2^23), lane + P read as a float is
// exactly kGroupBiasF + P for |P| < 2^22, and subtracting kGroupBiasF leaves float(P) exactly.
constexpr int32_t kGroupBias = 0x4B400000;
constexpr float kGroupBiasF = 12582912.0f;

// n_tokens rows of `cols` activations (cols % 32 == 0), quantized in blocks of 32.
// Layout: planes q / d / s / bias; inside a plane, group G (tokens 16G .. 16G+tg-1, tg <= 16)
// starts after the full groups before it and is ordered [block][token in group].
struct ActQ8 {
  int8_t* q = nullptr;      // 32 quants per token and block
  float* d = nullptr;       // block scale
  float* s = nullptr;       // d * sum(q), for weights with a min (Q4_1, Q5_1)
  int32_t* bias = nullptr;  // 8 per token and block: kGroupBias - zero_point * (sum of q's group of 4)
  int64_t cols = 0;
  int n_tokens = 0;

  int64_t nb() const { return cols / 32; }
  int group_size(int g) const { return n_tokens - g * kTokenGroup < kTokenGroup ? n_tokens - g * kTokenGroup : kTokenGroup; }
  // Index of (token, block) in the per-block planes d / s; q is at 32 * that index, bias at 8 *.
  int64_t index(int token, int64_t block) const {
    const int g = token / kTokenGroup;
    return static_cast<int64_t>(g) * kTokenGroup * nb() + block * group_size(g) + token % kTokenGroup;
  }
  // The inverse: token and block of storage index o.
  void entry(int64_t o, int* token, int64_t* block) const {
    const int g = static_cast<int>(o / (kTokenGroup * nb()));
    const int64_t r = o - static_cast<int64_t>(g) * kTokenGroup * nb();
    const int tg = group_size(g);
    *token = g * kTokenGroup + static_cast<int>(r % tg);
    *block = r / tg;
  }

  static size_t bytes(int64_t cols, int n_tokens) {
    return static_cast<size_t>(n_tokens) * static_cast<size_t>(cols + (cols / 32) * (4 + 4 + 32)) + 3 * 64;
  }
  // Lays the planes out in `mem` (>= bytes(cols, n_tokens), 64-aligned).
  static ActQ8 in(void* mem, int64_t cols, int n_tokens);
};

// Quantizes entries [o_begin, o_end) of a's storage order (see ActQ8::index; entry o holds
// one block of 32 of one token) from x ([n_tokens][cols], token-major). Threads that split
// the storage order write disjoint, contiguous memory (no false sharing).
// bias[g] = kGroupBias - zero_point * (q[4g] + .. + q[4g+3]): the zero-point term turns a dot
// product with weights stored as unsigned (q_w + zero_point) back into one with the signed weights.
void quantize_q8(const float* x, const ActQ8& a, int64_t o_begin, int64_t o_end, int32_t zero_point);

// Scalar reference of quantize_q8 for one row of n values (tests); bias: 8 per block.
void quantize_q8_ref(const float* x, int8_t* q, float* d, float* s, int32_t* bias, int64_t n, int32_t zero_point);

// n_tokens rows quantized in superblocks of 256 (ggml's Q8_K: one float scale per 256, the
// signed extreme maps to -127). Same grouped storage as ActQ8 with 32-element entries for q
// and s16, and 256-element entries for d.
struct ActQ8K {
  int8_t* q = nullptr;     // 32 quants per token and 32-block (ActQ8 order)
  float* d = nullptr;      // per token and superblock
  int32_t* s16 = nullptr;  // per token and 32-block: sums of its two halves of 16, as int16 (lo, hi)
  int32_t* z6 = nullptr;   // 8 per token and 32-block: -32 * (sum of q's group of 4), Q6_K's zero-point term
  int64_t cols = 0;
  int n_tokens = 0;

  int64_t nb() const { return cols / 32; }
  int64_t nsb() const { return cols / 256; }
  int group_size(int g) const { return n_tokens - g * kTokenGroup < kTokenGroup ? n_tokens - g * kTokenGroup : kTokenGroup; }
  // Index of (token, 32-block) in q (times 32), s16 and z6 (times 8); of (token, superblock) in d.
  int64_t index(int token, int64_t block) const {
    const int g = token / kTokenGroup;
    return static_cast<int64_t>(g) * kTokenGroup * nb() + block * group_size(g) + token % kTokenGroup;
  }
  int64_t index_sb(int token, int64_t sb) const {
    const int g = token / kTokenGroup;
    return static_cast<int64_t>(g) * kTokenGroup * nsb() + sb * group_size(g) + token % kTokenGroup;
  }

  static size_t bytes(int64_t cols, int n_tokens) {
    return static_cast<size_t>(n_tokens) * static_cast<size_t>(cols + (cols / 256) * 4 + (cols / 32) * (4 + 32)) + 4 * 64;
  }
  static ActQ8K in(void* mem, int64_t cols, int n_tokens);
};

// Quantizes tokens [t_begin, t_end) of x ([n_tokens][cols], cols % 256 == 0). Threads should
// split at multiples of kTokenGroup (disjoint memory).
void quantize_q8k(const float* x, const ActQ8K& a, int t_begin, int t_end);

}  // namespace llmsvc::hal::cpu
