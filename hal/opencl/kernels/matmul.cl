// SPDX-License-Identifier: Apache-2.0
// The weight layouts ClMatmul repacks GGUF tensors into (cl_weight_pack.cpp says which type becomes
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
#define L_E0M4 8

// A repacked weight: up to three parts (codes, scales, scales or mins) and its shape. kp is the
// row stride in elements of every layout: the float layouts' cols rounded up to 8 (zero-padded),
// the others' cols; a view (an elastic level: ClDevice::slice_weight) keeps its weight's kp and
// computes fewer rows and cols. gs is log2 of the group size of the int8 layouts (16 or 32
// elements share a scale).
typedef struct {
  __global const uchar* p0;
  __global const uchar* p1;
  __global const uchar* p2;
  uint rows, cols, kp, gs;
} Weight;

// The 8-element groups a row's computed columns span (a float layout's last one zero-padded,
// or, in a view, holding columns it does not compute: x is zero there).
inline uint w_groups(const Weight w) { return (w.cols + 7) >> 3; }

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
//
// A group is read in two halves: deq8_fetch loads its bytes (codes, scale bits) and nothing
// else, deq8_decode turns them into floats. A kernel that prefetches its next tile issues the
// fetch early and decodes late: work on the loaded values in between would stall it on the load.

// f16 bits to f32 (exact). Core OpenCL C converts halves only through memory (vload_half);
// a program that may use inline PTX defines LLMSVC_PTX_HALF to convert in one instruction.
inline float half_bits(uint h) {
#ifdef LLMSVC_PTX_HALF
  float f;
  asm("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.f32.f16 %0, lo; }" : "=f"(f) : "r"(h));
  return f;
#else
  const ushort b = (ushort)h;
  return vload_half(0, (const __private half*)&b);
#endif
}

// The bytes of one 8-element group: 8 code bytes (or 32 / 16 bytes of floats) in q, scale
// bits in s, second-scale bits in m, as each layout has them.
typedef struct {
  uint4 lo, hi;
  uint s, m;
} WRaw;

inline WRaw deq8_fetch(const int L, const Weight w, uint r, uint g) {
  WRaw v;
  v.lo = v.hi = (uint4)(0u);
  v.s = v.m = 0u;
  if (L == L_F32) {
    __global const uint* p = (__global const uint*)w.p0 + (size_t)r * w.kp + (size_t)g * 8;
    v.lo = vload4(0, p);
    v.hi = vload4(1, p);
    return v;
  }
  if (L == L_F16 || L == L_BF16) {
    v.lo = vload4(0, (__global const uint*)((__global const ushort*)w.p0 + (size_t)r * w.kp + (size_t)g * 8));
    return v;
  }
  const size_t blk = (size_t)r * (w.kp >> 5) + (g >> 2);  // 32-element blocks
  if (L == L_Q4_0 || L == L_Q4_1 || L == L_Q4_K || L == L_E0M4) {
    v.lo.xy = *(__global const uint2*)(w.p0 + blk * 16 + (g & 1) * 8);
    if (L == L_Q4_0) v.s = ((__global const ushort*)w.p1)[blk];
    if (L == L_Q4_1) v.s = ((__global const uint*)w.p1)[blk];       // d | m << 16
    if (L == L_E0M4) v.s = ((__global const uint*)w.p1)[blk >> 2];  // d | m << 16 per 128
    if (L == L_Q4_K) {
      v.s = ((__global const ushort*)w.p1)[blk];      // sc | mn << 8
      v.m = ((__global const uint*)w.p2)[blk >> 3];   // d | dmin << 16
    }
    return v;
  }
  // L_I8 / L_I8M: int8 codes in element order, an f32 scale (and min) per 2^gs elements.
  const size_t e = (size_t)r * w.kp + (size_t)g * 8;
  v.lo.xy = vload2(0, (__global const uint*)(w.p0 + e));
  v.s = ((__global const uint*)w.p1)[e >> w.gs];
  if (L == L_I8M) v.m = ((__global const uint*)w.p2)[e >> w.gs];
  return v;
}

// The nibbles of group g from its block's 8 bytes.
inline float8 q4_values8(uint2 c, uint g) {
  if ((g & 3) >= 2) c >>= 4;
  return convert_float8(as_uchar8(c & 0x0F0F0F0Fu));
}

inline float8 deq8_decode(const int L, const WRaw v, uint g) {
  if (L == L_F32) return as_float8((uint8)(v.lo, v.hi));
  if (L == L_F16) {
    const ushort8 h = as_ushort8(v.lo);
    return (float8)(half_bits(h.s0), half_bits(h.s1), half_bits(h.s2), half_bits(h.s3), half_bits(h.s4),
                    half_bits(h.s5), half_bits(h.s6), half_bits(h.s7));
  }
  if (L == L_BF16) return as_float8(convert_uint8(as_ushort8(v.lo)) << 16);  // bf16 is the top half of an f32
  if (L == L_Q4_0) return (q4_values8(v.lo.xy, g) - 8.0f) * half_bits(v.s);
  if (L == L_Q4_1 || L == L_E0M4) return q4_values8(v.lo.xy, g) * half_bits(v.s & 0xFFFFu) + half_bits(v.s >> 16);
  if (L == L_Q4_K) {
    const float d1 = half_bits(v.m & 0xFFFFu) * (float)(v.s & 0xFFu), m1 = half_bits(v.m >> 16) * (float)(v.s >> 8);
    return d1 * q4_values8(v.lo.xy, g) - m1;
  }
  const float8 q = convert_float8(as_char8(v.lo.xy));
  if (L == L_I8M) return q * as_float(v.s) + as_float(v.m);
  return q * as_float(v.s);
}

// The 8 elements 8g .. 8g + 7 of row r, dequantized. L is a literal at every call, so each
// kernel keeps only its own branch.
inline float8 deq8(const int L, const Weight w, uint r, uint g) {
  return deq8_decode(L, deq8_fetch(L, w, r, g), g);
}

// out[i][c] = w[ids[i]][c]: one work-item per 8 elements of a row.
#define GET_ROWS(name, L)                                                                      \
  __kernel void get_rows_##name(WARGS, __global const int* ids, ulong ids_off, uint n,        \
                                __global float* out, ulong out_off) {                         \
    WMAKE(w);                                                                                  \
    const uint groups = w_groups(w);                                                           \
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
GET_ROWS(e0m4, L_E0M4)

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

// A warp's 64 rows x 32 tokens of y (n tokens of `rows`) from its 4 x 4 tiles of 16 x 8 mma
// accumulators, in the C layout of mma.sync m16n8 (lane 4 g + t: row g, tokens 2t and 2t + 1,
// then row g + 8): the tensor-core GEMMs' output (matmul_mma.cl, matmul_mmq.cl). row0, tok0:
// the warp's first row and token; rows and tokens past the ends are not written.
__attribute__((always_inline)) inline void store_warp_tiles(float acc[4][4][4], uint row0, uint tok0, uint g, uint t,
                                                            uint rows, uint n, __global float* y) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint r = row0 + 16 * i + g;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint tk = tok0 + 8 * j + 2 * t;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (tk + e >= n) continue;
        __global float* yt = y + (size_t)(tk + e) * rows;
        if (r < rows) yt[r] = acc[i][j][e];
        if (r + 8 < rows) yt[r + 8] = acc[i][j][e + 2];
      }
    }
  }
}
