// SPDX-License-Identifier: Apache-2.0
// The weight layouts ClMatmul repacks GGUF tensors into (cl_matmul.cpp says which type becomes
// which and why), their exact dequantization, and get_rows.
//
// Every dequantization here performs the same float operations in the same order as the CPU's
// (hal/cpu/quant/dequantize.cpp), so a row read here is the CPU's row bit for bit: products of
// a small integer code and an f16-derived scale are exact in f32, which keeps the result the
// same whether or not the compiler contracts them into a mad.

#define L_F32 0
#define L_F16 1
#define L_BF16 2
#define L_Q4_0 3
#define L_Q4_1 4
#define L_Q4_K 5
#define L_I8 6
#define L_I8M 7

// A repacked weight: up to three parts (codes, scales, scales or mins) and its shape. kp is the
// row stride in elements of the float layouts (cols rounded up to 8, zero-padded); gs is log2 of
// the group size of the int8 layouts (16 or 32 elements share a scale).
typedef struct {
  __global const uchar* p0;
  __global const uchar* p1;
  __global const uchar* p2;
  uint rows, cols, kp, gs;
} Weight;

// The weight arguments every matmul kernel starts with, and the Weight they make.
#define WARGS                                                                                   \
  __global const uchar *p0, ulong o0, __global const uchar *p1, ulong o1, __global const uchar *p2, \
      ulong o2, uint rows, uint cols, uint kp, uint gs
#define WMAKE(w)   \
  Weight w;        \
  w.p0 = p0 + o0;  \
  w.p1 = p1 + o1;  \
  w.p2 = p2 + o2;  \
  w.rows = rows;   \
  w.cols = cols;   \
  w.kp = kp;       \
  w.gs = gs

// The 4-bit layouts keep 16 bytes per 32 elements, per row: byte j holds element j in its low
// nibble and element j + 16 in its high one (GGUF's Q4_0 order; Q4_K is reordered to it).
// Group g (8 elements) of that block is bytes (g & 1) * 8 .. + 8, low nibbles for g < 2.
inline uint2 q4_codes8(const Weight w, size_t blk, uint part) {
  uint2 c = *(__global const uint2*)(w.p0 + blk * 16 + (part & 1) * 8);
  if (part >= 2) c >>= 4;
  return c & 0x0F0F0F0Fu;
}

inline float8 q4_values8(const Weight w, uint2 c) {
  return convert_float8(as_uchar8(c));
}

// The 8 elements 8g .. 8g + 7 of row r, dequantized. L is a literal at every call, so each
// kernel keeps only its own branch.
inline float8 deq8(const int L, const Weight w, uint r, uint g) {
  if (L == L_F32) {
    return vload8(0, (__global const float*)w.p0 + (size_t)r * w.kp + (size_t)g * 8);
  }
  if (L == L_F16) {
    return vload_half8(0, (__global const half*)w.p0 + (size_t)r * w.kp + (size_t)g * 8);
  }
  if (L == L_BF16) {
    const ushort8 h = vload8(0, (__global const ushort*)w.p0 + (size_t)r * w.kp + (size_t)g * 8);
    return as_float8(convert_uint8(h) << 16);  // bf16 is the top half of an f32
  }
  const uint nb = w.cols >> 5;  // 32-element blocks per row
  const size_t blk = (size_t)r * nb + (g >> 2);
  if (L == L_Q4_0) {
    const float d = vload_half(blk, (__global const half*)w.p1);
    const int8 q = convert_int8(as_uchar8(q4_codes8(w, blk, g & 3)));
    return convert_float8(q - 8) * d;
  }
  if (L == L_Q4_1) {
    const float2 dm = vload_half2(blk, (__global const half*)w.p1);
    return q4_values8(w, q4_codes8(w, blk, g & 3)) * dm.x + dm.y;
  }
  if (L == L_Q4_K) {
    const uchar2 sm = vload2(blk, w.p1);
    const float2 dd = vload_half2(blk >> 3, (__global const half*)w.p2);
    const float d1 = dd.x * (float)sm.x, m1 = dd.y * (float)sm.y;
    return d1 * q4_values8(w, q4_codes8(w, blk, g & 3)) - m1;
  }
  // L_I8 / L_I8M: int8 codes in element order, an f32 scale (and min) per 2^gs elements.
  const size_t e = (size_t)r * w.cols + (size_t)g * 8;
  const float8 q = convert_float8(vload8(0, (__global const char*)w.p0 + e));
  const float s = ((__global const float*)w.p1)[e >> w.gs];
  if (L == L_I8M) return q * s + ((__global const float*)w.p2)[e >> w.gs];
  return q * s;
}

// out[i][c] = w[ids[i]][c]: one work-item per 8 elements of a row.
#define GET_ROWS(name, L)                                                                      \
  __kernel void get_rows_##name(WARGS, __global const int* ids, ulong ids_off, uint n,        \
                                __global float* out, ulong out_off) {                         \
    WMAKE(w);                                                                                  \
    const uint groups = w.kp >> 3;                                                             \
    const size_t id = get_global_id(0);                                                        \
    if (id >= (size_t)n * groups) return;                                                      \
    const uint i = (uint)(id / groups), g = (uint)(id % groups);                               \
    const uint r = CVIEW(int, ids, ids_off)[i];                                                \
    const float8 v = deq8(L, w, r, g);                                                         \
    __global float* o = VIEW(float, out, out_off) + (size_t)i * w.cols + (size_t)g * 8;        \
    if (g * 8 + 8 <= w.cols) {                                                                 \
      vstore8(v, 0, o);                                                                        \
    } else {                                                                                   \
      const float a[8] = {v.s0, v.s1, v.s2, v.s3, v.s4, v.s5, v.s6, v.s7};                     \
      for (uint k = 0; g * 8 + k < w.cols; ++k) o[k] = a[k];                                   \
    }                                                                                          \
  }

GET_ROWS(f32, L_F32)
GET_ROWS(f16, L_F16)
GET_ROWS(bf16, L_BF16)
GET_ROWS(q4_0, L_Q4_0)
GET_ROWS(q4_1, L_Q4_1)
GET_ROWS(q4_k, L_Q4_K)
GET_ROWS(i8, L_I8)
GET_ROWS(i8m, L_I8M)

// Eight activations x[c .. c + 8) of one row of `cols`, zero past its end (the float layouts'
// padding).
inline float8 x_load8(__global const float* row, uint c, uint cols) {
  if (c + 8 <= cols) return vload8(0, row + c);
  float a[8];
  for (uint k = 0; k < 8; ++k) a[k] = c + k < cols ? row[c + k] : 0.0f;
  return vload8(0, a);
}

inline float dot8(float8 a, float8 b) {
  return dot(a.lo, b.lo) + dot(a.hi, b.hi);
}
