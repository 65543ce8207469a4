// SPDX-License-Identifier: Apache-2.0
// A matmul's input quantized as the CPU quantizes it for its integer dot products
// (hal/cpu/quant/act_quant.h, after ggml), then written back as floats q * d: a float product
// over these equals the CPU's integer one to the rounding of the f32 sums. Without it the
// device's matmuls see finer activations than the CPU's and llama.cpp's, and a model whose
// activations are large (Gemma-3) lands percents of perplexity away from them.
//
// Built with correctly rounded division where the device offers it (ClMatmul), so 127 / amax
// and 1 / iscale round as the CPU's do; no contraction: every step rounds as there.
#pragma OPENCL FP_CONTRACT OFF

// Work-group size of every kernel that quantizes (wg_quant): one chunk of AQ_WG elements each.
#define AQ_WG 256

// The blocks, as the CPU quantizes them:
//   qblock 32 (ggml's Q8_0 / Q8_1, for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): d = amax / 127 kept as
//     f16, q = round-to-even(x * (127 / amax)).
//   qblock 256 (ggml's Q8_K, for Q4_K, Q5_K, Q6_K): the element of largest magnitude (the first
//     one on a tie of signs) maps to -127, q = min(127, round-to-even(x * iscale)), d =
//     1 / iscale as an f32; an all-zero block stays zero.
// A block's scale needs only its largest and smallest elements (amax = max |mx|, |mn|), which the
// items gather 8 elements at a time (extremes8) and combine per block (block_params): one item
// reading a whole block from local memory took a serial chain of 32 or 256 loads, all of a
// warp's items in one bank. block_params writes the block's (multiplier, d) pair into st; v (the
// block) is read only on a tie of signs in a block of 256; quant_one applies a pair to an element.
inline float2 extremes8(float8 v) {
  const float4 hi = fmax(v.lo, v.hi), lo = fmin(v.lo, v.hi);
  return (float2)(fmax(fmax(hi.x, hi.y), fmax(hi.z, hi.w)), fmin(fmin(lo.x, lo.y), fmin(lo.z, lo.w)));
}

inline void block_params(float mx, float mn, __local const float* v, int qblock, __local float* st) {
  const float amax = fmax(fabs(mx), fabs(mn));  // not fmax(mx, -mn): of 0 and -0 it may pick -0
  if (qblock == 32) {
    st[0] = amax != 0.0f ? 127.0f / amax : 0.0f;
    st[1] = round_f16(amax / 127.0f);
    return;
  }
  float vmax = mx > -mn ? mx : mn;
  if (mx == -mn) {  // both signs reach amax: the first one decides
    for (int j = 0; j < 256; ++j) {
      if (fabs(v[j]) == amax) {
        vmax = v[j];
        break;
      }
    }
  }
  const float iscale = amax == 0.0f ? 0.0f : -127.0f / vmax;
  st[0] = iscale;
  st[1] = amax == 0.0f ? 0.0f : 1.0f / iscale;
}

// An element's code q (quant_one returns q * d).
inline int quant_code(float v, int qblock, __local const float* st) {
  const int q = convert_int_rte(v * st[0]);
  return qblock == 32 ? q : min(q, 127);
}

inline float quant_one(float v, int qblock, __local const float* st) { return (float)quant_code(v, qblock, st) * st[1]; }

inline float8 quant8(float8 v, int qblock, __local const float* st) {
  return (float8)(quant_one(v.s0, qblock, st), quant_one(v.s1, qblock, st), quant_one(v.s2, qblock, st),
                  quant_one(v.s3, qblock, st), quant_one(v.s4, qblock, st), quant_one(v.s5, qblock, st),
                  quant_one(v.s6, qblock, st), quant_one(v.s7, qblock, st));
}

// The scales of blocks b = first + k * step (k >= 0, b < n_blocks) of the elements in loc, from
// their groups' extremes in ext (qblock / 8 per block, read from a different group per item so
// that a warp's reads spread over the banks; max and min do not depend on the order).
inline void blocks_params(__local const float* loc, __local const float2* ext, int n_blocks, int qblock, int first,
                          int step, __local float* stat) {
  const int per = qblock / 8;
  for (int b = first; b < n_blocks; b += step) {
    float mx = -INFINITY, mn = INFINITY;
    for (int j = 0; j < per; ++j) {
      const float2 e = ext[b * per + ((j + b) & (per - 1))];
      mx = fmax(mx, e.x);
      mn = fmin(mn, e.y);
    }
    block_params(mx, mn, loc + b * qblock, qblock, stat + 2 * b);
  }
}

// The first steps of quantizing a chunk of AQ_WG consecutive elements, element lid in item lid
// (v; inactive items past the end hold zeros), in blocks of qblock, which chunks never straddle
// (they start at multiples of 256): the chunk into loc, its 8-element extremes into ext (AQ_WG /
// 8 pairs), every block's extremes into stat (2 floats a block) through blocks' (fn). The whole
// work-group calls it (barriers).
#define WG_CHUNK_STATS(v, active, qblock, loc, ext, stat, blocks_fn)                     \
  do {                                                                                 \
    const int lid_ = get_local_id(0);                                                  \
    loc[lid_] = (active) ? (v) : 0.0f;                                                 \
    barrier(CLK_LOCAL_MEM_FENCE);                                                      \
    if (lid_ < AQ_WG / 8) ext[lid_] = extremes8(vload8(lid_, loc));                    \
    barrier(CLK_LOCAL_MEM_FENCE);                                                      \
    if (lid_ < AQ_WG / (qblock)) blocks_fn(loc, ext, AQ_WG / (qblock), qblock, lid_, AQ_WG, stat); \
    barrier(CLK_LOCAL_MEM_FENCE);                                                      \
  } while (0)

// A chunk quantized (WG_CHUNK_STATS): returns item lid's q * d. loc holds AQ_WG floats, ext
// AQ_WG / 8 pairs, stat 16 floats.
inline float wg_quant(float v, bool active, int qblock, __local float* loc, __local float2* ext, __local float* stat) {
  WG_CHUNK_STATS(v, active, qblock, loc, ext, stat, blocks_params);
  const float r = quant_one(v, qblock, stat + 2 * (get_local_id(0) / qblock));
  barrier(CLK_LOCAL_MEM_FENCE);  // loc, ext and stat are the next chunk's
  return r;
}

// The longest row wg_quant_row takes (its local memory: the row, a pair per 8 elements and 2
// floats per block of 32).
#define AQ_ROW_MAX 8192

// A row of dim elements held in loc (dim <= AQ_ROW_MAX, a multiple of qblock), the extremes of
// its 8-element groups in ext, quantized into y by the whole work-group, every block at once (a
// norm's row is one work-group's). stat holds AQ_ROW_MAX / 16 floats.
inline void wg_quant_row(__local const float* loc, __local const float2* ext, int dim, int qblock,
                         __local float* stat, __global float* y) {
  const int lid = get_local_id(0);
  blocks_params(loc, ext, dim / qblock, qblock, lid, AQ_WG, stat);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int g = lid; g < dim / 8; g += AQ_WG) vstore8(quant8(vload8(g, loc), qblock, stat + 2 * (g * 8 / qblock)), g, y);
}

// The int8 form of a quantized input (the dp4a GEMV's, kernels/matmul_dp4a.cl): the codes q as
// chars in element order, and per 32 elements a uint2 of the block's d (f32 bits; a block of 256
// repeats its d in each of its 32s) and the sums of the codes of its two 16-element halves
// (int16 each, low half first: |sum| <= 16 * 127). The codes and d are the ones whose products
// q * d the float form holds. Each half's sum is written by the item that made its codes, so no
// item waits on another: half h's 16-bit field, and d with the first half.
inline void q8_half_params(__global uint2* params, size_t h, float d, int sum) {
  __global ushort* s = (__global ushort*)(params + h / 2) + 2 + (h & 1);
  *s = (ushort)sum;
  if ((h & 1) == 0) ((__global float*)(params + h / 2))[0] = d;
}

// Elements 16 h .. 16 h + 15 of loc (their block's pair at stat) in the int8 form, as the
// input's half block hg: codes at codes + 16 hg, the half's sum (and d with a first half).
inline void quant16_q8(__local const float* loc, int h, size_t hg, int qblock, __local const float* stat,
                       __global char* codes, __global uint2* params) {
  __local const float* st = stat + 2 * (h * 16 / qblock);
  const float16 v = vload16(h, loc);
  const int8 a = (int8)(quant_code(v.s0, qblock, st), quant_code(v.s1, qblock, st), quant_code(v.s2, qblock, st),
                        quant_code(v.s3, qblock, st), quant_code(v.s4, qblock, st), quant_code(v.s5, qblock, st),
                        quant_code(v.s6, qblock, st), quant_code(v.s7, qblock, st));
  const int8 b = (int8)(quant_code(v.s8, qblock, st), quant_code(v.s9, qblock, st), quant_code(v.sa, qblock, st),
                        quant_code(v.sb, qblock, st), quant_code(v.sc, qblock, st), quant_code(v.sd, qblock, st),
                        quant_code(v.se, qblock, st), quant_code(v.sf, qblock, st));
  vstore16((char16)(convert_char8(a), convert_char8(b)), hg, codes);
  const int8 s8 = a + b;
  const int4 s4 = s8.lo + s8.hi;
  q8_half_params(params, hg, st[1], (s4.x + s4.y) + (s4.z + s4.w));
}

// wg_quant_row's row in the int8 form: codes into codes, 16 elements at a time per item.
inline void wg_quant_row_q8(__local const float* loc, __local const float2* ext, int dim, int qblock,
                            __local float* stat, __global char* codes, __global uint2* params) {
  const int lid = get_local_id(0);
  blocks_params(loc, ext, dim / qblock, qblock, lid, AQ_WG, stat);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = lid; h < dim / 16; h += AQ_WG) quant16_q8(loc, h, h, qblock, stat, codes, params);
}

// wg_quant in the int8 form (wg_quant_row_q8's), element i of the input being item lid's: its
// code into codes[i], and for each 16 elements the half's sum and d by one item of them.
inline void wg_quant_q8(float v, bool active, int qblock, size_t i, __local float* loc, __local float2* ext,
                        __local float* stat, __global char* codes, __global uint2* params) {
  WG_CHUNK_STATS(v, active, qblock, loc, ext, stat, blocks_params);
  const int lid = get_local_id(0);
  __local const float* st = stat + 2 * (lid / qblock);
  const int q = quant_code(v, qblock, st);
  if (active) codes[i] = (char)q;
  loc[lid] = (float)q;  // exact: |q| <= 127, and the sums below stay exact in f32
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid % 16 == 0 && active) {
    const float16 c = vload16(0, loc + lid);
    const float8 s8 = c.lo + c.hi;
    const float4 s4 = s8.lo + s8.hi;
    q8_half_params(params, i / 16, st[1], (int)((s4.x + s4.y) + (s4.z + s4.w)));
  }
  barrier(CLK_LOCAL_MEM_FENCE);  // loc, ext and stat are the next chunk's
}

// x quantized into y (n elements, a multiple of block), a chunk of AQ_WG per work-group.
__kernel __attribute__((reqd_work_group_size(AQ_WG, 1, 1))) void act_q8(__global const float* xb, ulong ox,
                                                                       __global float* yb, ulong oy, ulong n,
                                                                       int block) {
  __local float loc[AQ_WG], stat[16];
  __local float2 ext[AQ_WG / 8];
  const size_t i = get_global_id(0);
  const bool active = i < n;
  const float r = wg_quant(active ? CVIEW(float, xb, ox)[i] : 0.0f, active, block, loc, ext, stat);
  if (active) VIEW(float, yb, oy)[i] = r;
}

// act_q8 into the int8 form: codes at cb, the blocks' uint2 (d, half sums) at pb.
__kernel __attribute__((reqd_work_group_size(AQ_WG, 1, 1))) void act_q8p(__global const float* xb, ulong ox,
                                                                        __global char* cb, ulong oc,
                                                                        __global uint2* pb, ulong op, ulong n,
                                                                        int block) {
  __local float loc[AQ_WG], stat[16];
  __local float2 ext[AQ_WG / 8];
  const size_t i = get_global_id(0);
  const bool active = i < n;
  wg_quant_q8(active ? CVIEW(float, xb, ox)[i] : 0.0f, active, block, i, loc, ext, stat, VIEW(char, cb, oc),
              VIEW(uint2, pb, op));
}

// The int8 GEMM's input (matmul_mmq.cl) from an input already quantized (q * d, as act_q8 or a
// producer's quantized output writes it): per element its code q as a char, per 32 elements the
// scale d and s = d * sum(q) (exact for blocks of 32; ggml's Q8_1 rounds it to f16, but the
// GEMV, which multiplies q * d, does not, and prefill and decode agree so). Splitting
// q * d again is exact: the block's largest magnitude is 127 |d|, so d' = amax / 127 = |d| and
// q' = (q * d) / d' = +-q with d' q' = d q (a block of 256 whose scale is negative flips both
// signs). n elements (a multiple of block) in chunks of AQ_WG a work-group.
inline void blocks_amax(__local const float* loc, __local const float2* ext, int n_blocks, int qblock, int first,
                        int step, __local float* stat) {
  const int per = qblock / 8;
  for (int b = first; b < n_blocks; b += step) {
    float amax = 0.0f;
    for (int j = 0; j < per; ++j) {
      const float2 e = ext[b * per + ((j + b) & (per - 1))];
      amax = fmax(amax, fmax(fabs(e.x), fabs(e.y)));
    }
    stat[2 * b] = amax / 127.0f;
  }
}

__kernel __attribute__((reqd_work_group_size(AQ_WG, 1, 1))) void act_q8i(__global const float* xb, ulong ox,
                                                                        __global char* cb, ulong oc,
                                                                        __global float* db, ulong od,
                                                                        __global float* sb, ulong os, ulong n,
                                                                        int block) {
  __local float loc[AQ_WG], stat[16];
  __local float2 ext[AQ_WG / 8];
  __local int sums[AQ_WG / 8];
  const size_t i = get_global_id(0);
  const int lid = get_local_id(0);
  const bool active = i < n;
  const float v = active ? CVIEW(float, xb, ox)[i] : 0.0f;
  WG_CHUNK_STATS(v, active, block, loc, ext, stat, blocks_amax);
  const float d = stat[2 * (lid / block)];
  const int q = d != 0.0f ? convert_int_rte(v / d) : 0;
  if (active) VIEW(char, cb, oc)[i] = (char)q;
  loc[lid] = (float)q;  // exact: |q| <= 127
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < AQ_WG / 8) {
    const float8 g = vload8(lid, loc);
    sums[lid] = (int)(g.s0 + g.s1 + g.s2 + g.s3 + g.s4 + g.s5 + g.s6 + g.s7);  // exact in f32
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid % 32 == 0 && active) {
    const int b = lid / 8;
    const float sum = (float)(sums[b] + sums[b + 1] + sums[b + 2] + sums[b + 3]);
    VIEW(float, db, od)[i / 32] = d;
    VIEW(float, sb, os)[i / 32] = d * sum;
  }
}
