// SPDX-License-Identifier: Apache-2.0
// ClOps' elementwise and row kernels (RMSNorm, RoPE, gated activations, adds, scale, K/V rows
// into f16 chunks) and the float helpers attention.cl shares (it is built after this file).
//
// Results follow the CPU backend (hal/cpu) to float rounding, most of them bit for bit, so:
// no contraction of a * b + c into FMAs behind our back (the CPU rounds each step unless it
// says fma), and the program is built with correctly rounded division and sqrt where offered.
#pragma OPENCL FP_CONTRACT OFF

// A KV table entry (cl_ops.h): byte offset of the chunk in the low 56 bits, format bits above.
#define KV_OFFSET_MASK ((1UL << 56) - 1)

// Work-group size of the row kernels (rms_norm): a power of two.
#ifndef ROW_WG
#define ROW_WG 256
#endif
#if ROW_WG != AQ_WG
#error "the row kernels' work-group quantizes with act_quant.cl's wg_quant: their sizes must agree"
#endif

// ggml's vector expf (hal/cpu/ggml_expf-inl.h), step for step: n = round(x / ln 2), b the
// reduced argument, a degree-5 polynomial j(b), then j * 2^n as two exact power-of-two
// products; |n| > 192 gives 0 or inf. The CPU's softmax and SiLU use it instead of libm.
inline float exp_ggml(float x) {
  const float r = 0x1.8p23f;
  const float z = fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = fma(-n, 0x1.7f7d1cp-20f, fma(-n, 0x1.62e4p-1f, x));
  const float u = b * b;
  const float j = fma(fma(fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                      fma(0x1.ffffecp-1f, b, 1.0f));
  if (fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
  const int ni = (int)n;
  const int e1 = ni >> 1;
  const int e2 = ni - e1;
  return (j * as_float((e1 + 127) << 23)) * as_float((e2 + 127) << 23);
}

// The sum of squares' accumulator: f64 where the device has it (the CPU sums f32 squares in f64;
// in f64 no addition of a row's squares rounds in practice, so the tree's order gives the CPU's
// sum), else f32.
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double norm_acc;
#else
typedef float norm_acc;
#endif

// Elements an item of norm_row loads before it uses any: a decode step's row is one
// work-group's, so the loads of one item's strided elements would otherwise wait on each other
// (a store between them may alias the next load) and the norm took ~15 us on an H100.
#define NORM_BATCH 8

// Item lid's batch of a row's elements i0, i0 + ROW_WG, ... into v (0 past dim or for no p).
inline void norm_load(__global const float* p, int i0, int dim, float* v) {
#pragma unroll
  for (int k = 0; k < NORM_BATCH; ++k) {
    const int i = i0 + k * ROW_WG;
    v[k] = p && i < dim ? p[i] : 0.0f;
  }
}

// The work-group's sum of its items' s (a tree in part): 1 / sqrt(sum / dim + eps), as the CPU.
inline float norm_scale(norm_acc s, int dim, float eps, __local norm_acc* part) {
  const int lid = get_local_id(0);
  part[lid] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int wd = ROW_WG / 2; wd > 0; wd >>= 1) {
    if (lid < wd) part[lid] += part[lid + wd];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float mean = (float)(part[0] / (norm_acc)dim);
  return 1.0f / sqrt(mean + eps);
}

// Item lid's share of a row's sum of squares: elements lid + k ROW_WG in that order (the sums'
// order), NORM_BATCH loaded at a time. With `add`, x + add is the row (the residual add): kept
// in loc where given, else written back to x.
inline norm_acc norm_sum(__global float* x, __global const float* add, int dim, __local float* loc) {
  const int lid = get_local_id(0);
  norm_acc s = 0;
  for (int i0 = lid; i0 < dim; i0 += NORM_BATCH * ROW_WG) {
    float v[NORM_BATCH], a[NORM_BATCH];
    norm_load(x, i0, dim, v);
    norm_load(add, i0, dim, a);
#pragma unroll
    for (int k = 0; k < NORM_BATCH; ++k) {
      const int i = i0 + k * ROW_WG;
      if (i >= dim) break;
      if (add) v[k] += a[k];
      if (loc) {
        loc[i] = v[k];
      } else if (add) {
        x[i] = v[k];
      }
      const float sq = v[k] * v[k];  // rounded to f32, as ggml does, then summed wider
      s += (norm_acc)sq;
    }
  }
  return s;
}

// out = x / sqrt(mean(x^2) + eps) * weight over one row, by a work-group: the sum of squares in
// per-item strided sums (norm_sum), then a tree in local memory. With `add`, x += add first
// (written back): the residual add and the next norm in one launch, the bits of the two ops.
inline void norm_row(__global float* x, __global const float* add, __global const float* w, int dim, float eps,
                     __global float* out, __local norm_acc* part) {
  const int lid = get_local_id(0);
  const float scale = norm_scale(norm_sum(x, add, dim, 0), dim, eps, part);
  for (int i0 = lid; i0 < dim; i0 += NORM_BATCH * ROW_WG) {
    float v[NORM_BATCH], ws[NORM_BATCH];
    norm_load(x, i0, dim, v);
    norm_load(w, i0, dim, ws);
#pragma unroll
    for (int k = 0; k < NORM_BATCH; ++k) {
      const int i = i0 + k * ROW_WG;
      if (i >= dim) break;
      out[i] = w ? v[k] * scale * ws[k] : v[k] * scale;
    }
  }
}

// norm_row with the quantized second output q (qblock 32 or 256; dim <= AQ_ROW_MAX, a multiple
// of qblock), the row held in local memory: x (and add) are read from global memory once, with
// every load of an item issued before any use, and the weight's loads are in flight during the
// sum's tree. (norm_row then a quantization reading its output back made about ten round trips
// to memory in one work-group: 14 us a norm on an H100.) The sums keep norm_row's order; the
// output is made 8 consecutive elements per item, whose extremes feed the block scales.
#define NORM_Q_GROUPS (AQ_ROW_MAX / 8 / ROW_WG)  // 8-element groups per item at most
// With params (q8), q takes the int8 form instead (act_quant.cl's wg_quant_row_q8: codes at q,
// the blocks' d and half sums at params).
inline void norm_row_q(__global float* x, __global const float* add, __global const float* w, int dim, float eps,
                       __global float* out, __global float* q, int qblock, __global uint2* params, int q8,
                       __local float* loc, __local float2* ext, __local float* stat, __local norm_acc* part) {
  const int lid = get_local_id(0);
  const norm_acc s = norm_sum(x, add, dim, loc);
  float8 ws[NORM_Q_GROUPS];
#pragma unroll
  for (int k = 0; k < NORM_Q_GROUPS; ++k) {
    const int g = lid + k * ROW_WG;
    ws[k] = w && g < dim / 8 ? vload8(g, w) : (float8)(1.0f);
  }
  const float scale = norm_scale(s, dim, eps, part);
#pragma unroll
  for (int k = 0; k < NORM_Q_GROUPS; ++k) {
    const int g = lid + k * ROW_WG;
    if (g >= dim / 8) break;
    const float8 v = vload8(g, loc);
    if (add) vstore8(v, g, x);
    const float8 o = w ? v * scale * ws[k] : v * scale;
    vstore8(o, g, out);
    vstore8(o, g, loc);
    ext[g] = extremes8(o);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (q8)
    wg_quant_row_q8(loc, ext, dim, qblock, stat, (__global char*)q, params);
  else
    wg_quant_row(loc, ext, dim, qblock, stat, q);
}

__kernel __attribute__((reqd_work_group_size(ROW_WG, 1, 1))) void rms_norm(
    __global const float* xb, ulong xo, __global const float* wb, ulong wo, int has_weight, int dim, float eps,
    __global float* ob, ulong oo) {
  __local norm_acc part[ROW_WG];
  const size_t row = get_group_id(0);
  norm_row((__global float*)CVIEW(float, xb, xo) + row * dim, 0, has_weight ? CVIEW(float, wb, wo) : 0, dim, eps,
           VIEW(float, ob, oo) + row * dim, part);
}

// y += a, then out = rms_norm(y) * weight, one work-group per row.
__kernel __attribute__((reqd_work_group_size(ROW_WG, 1, 1))) void add_rms_norm(
    __global float* yb, ulong yo, __global const float* ab, ulong ao, __global const float* wb, ulong wo,
    int has_weight, int dim, float eps, __global float* ob, ulong oo) {
  __local norm_acc part[ROW_WG];
  const size_t row = get_group_id(0);
  norm_row(VIEW(float, yb, yo) + row * dim, CVIEW(float, ab, ao) + row * dim, has_weight ? CVIEW(float, wb, wo) : 0,
           dim, eps, VIEW(float, ob, oo) + row * dim, part);
}

// The norms with a quantized second output q (qblock 32 or 256, dim <= AQ_ROW_MAX): the matmul
// after the norm reads it instead of quantizing the norm's output itself (ClMatmul::
// matmul_multi's x_quantized); q8: in the int8 form, params at pb (one row: dim / 32 uint2s).
#define NORM_Q_LOCALS                                                 \
  __local norm_acc part[ROW_WG];                                      \
  __local float loc[AQ_ROW_MAX], stat[AQ_ROW_MAX / 16];               \
  __local float2 ext[AQ_ROW_MAX / 8];                                 \
  const size_t row = get_group_id(0)
// Row `row`'s quantized output: floats (dim a row) or the int8 form (dim codes, dim / 32 params).
#define NORM_Q_OUT                                                                                        \
  q8 ? (__global float*)(VIEW(char, qb, qo) + row * dim) : VIEW(float, qb, qo) + row * dim, qblock,         \
      VIEW(uint2, pb, po) + (q8 ? row * (dim / 32) : 0), q8

__kernel __attribute__((reqd_work_group_size(ROW_WG, 1, 1))) void rms_norm_q(
    __global const float* xb, ulong xo, __global const float* wb, ulong wo, int has_weight, int dim, float eps,
    __global float* ob, ulong oo, __global float* qb, ulong qo, int qblock, __global uint2* pb, ulong po, int q8) {
  NORM_Q_LOCALS;
  norm_row_q((__global float*)CVIEW(float, xb, xo) + row * dim, 0, has_weight ? CVIEW(float, wb, wo) : 0, dim, eps,
             VIEW(float, ob, oo) + row * dim, NORM_Q_OUT, loc, ext, stat, part);
}

__kernel __attribute__((reqd_work_group_size(ROW_WG, 1, 1))) void add_rms_norm_q(
    __global float* yb, ulong yo, __global const float* ab, ulong ao, __global const float* wb, ulong wo,
    int has_weight, int dim, float eps, __global float* ob, ulong oo, __global float* qb, ulong qo, int qblock,
    __global uint2* pb, ulong po, int q8) {
  NORM_Q_LOCALS;
  norm_row_q(VIEW(float, yb, yo) + row * dim, CVIEW(float, ab, ao) + row * dim, has_weight ? CVIEW(float, wb, wo) : 0,
             dim, eps, VIEW(float, ob, oo) + row * dim, NORM_Q_OUT, loc, ext, stat, part);
}

// RoPE in place: one item per (pair, head, token), rotating by the host's table of angles
// (hal/host/rope_table.h: cos[t][i] for every token, then sin[t][i]), which every backend
// shares, as (fma(x0, c, -(x1 s)), fma(x0, s, x1 c)); pairs are adjacent (normal) or split
// halves (neox). rope_pair rotates pair i of one head v of token t; returns its two places.
inline int2 rope_pair(__global float* v, __global const float* angles, int n_tokens, int t, int i, int half_rot,
                      int neox) {
  const size_t at = (size_t)t * half_rot + i;
  const float c = angles[at], s = angles[(size_t)n_tokens * half_rot + at];
  const int i0 = neox ? i : 2 * i;
  const int i1 = neox ? i + half_rot : 2 * i + 1;
  const float x0 = v[i0], x1 = v[i1];
  v[i0] = fma(x0, c, -(x1 * s));
  v[i1] = fma(x0, s, x1 * c);
  return (int2)(i0, i1);
}

__kernel void rope(__global float* xb, ulong xo, __global const float* ab, ulong ao, int n_tokens, int n_heads,
                   int head_dim, int half_rot, int neox) {
  const int i = get_global_id(0);
  const int h = get_global_id(1);
  const int t = get_global_id(2);
  if (i >= half_rot) return;
  rope_pair(VIEW(float, xb, xo) + ((size_t)t * n_heads + h) * head_dim, CVIEW(float, ab, ao), n_tokens, t, i,
            half_rot, neox);
}

// RoPE of q (nq heads) and k (nk heads) by the same angles in one launch: heads [0, nq) of
// dimension 1 are q's, the rest k's, each pair rotated as rope() rotates it. With `store`, the
// store_kv after them too: token t's rotated K row and its V row as f16 into their chunk, as
// store_kv writes them (the f16 of the same f32 values). Dimension 0 then spans head_dim: item j
// rotates pair j (j < half_rot) and stores the two rotated values, stores K's element j where
// it is past the rotated dims, and V's element j. With scale_q (only with `store`: dimension 0
// spans head_dim), q is then multiplied by qs as scale() multiplies it (Gemma-3's q scale,
// between the RoPE and the store in its graph), item j taking the elements it rotated and
// element j past the rotated dims.
__kernel void rope_qk(__global float* qb, ulong qo, __global float* kb, ulong ko, __global const float* ab, ulong ao,
                      int n_tokens, int nq, int nk, int head_dim, int half_rot, int neox, int store,
                      __global const float* vb, ulong vo, __global const int* pb, ulong po, __global uchar* arena,
                      __global const ulong* tb, ulong to, int chunk_tokens, int layer, int scale_q, float qs) {
  const int j = get_global_id(0);
  const int h = get_global_id(1);
  const int t = get_global_id(2);
  __global const float* angles = CVIEW(float, ab, ao);
  if (h < nq) {
    __global float* qh = VIEW(float, qb, qo) + ((size_t)t * nq + h) * head_dim;
    int2 rotated = (int2)(-1, -1);
    if (j < half_rot) rotated = rope_pair(qh, angles, n_tokens, t, j, half_rot, neox);
    if (!scale_q || j >= head_dim) return;
    if (rotated.x >= 0) {
      qh[rotated.x] *= qs;
      qh[rotated.y] *= qs;
    }
    if (j >= 2 * half_rot) qh[j] *= qs;
    return;
  }
  const int hk = h - nq;
  __global float* kv = VIEW(float, kb, ko) + ((size_t)t * nk + hk) * head_dim;
  int2 rotated = (int2)(-1, -1);
  if (j < half_rot) rotated = rope_pair(kv, angles, n_tokens, t, j, half_rot, neox);
  if (!store || j >= head_dim) return;
  const int kv_dim = nk * head_dim;
  const int pos = CVIEW(int, pb, po)[t];
  const ulong entry = CVIEW(ulong, tb, to)[pos / chunk_tokens];
  const size_t block = (size_t)chunk_tokens * kv_dim;  // halves
  __global half* kc = (__global half*)(arena + (entry & KV_OFFSET_MASK)) + (size_t)layer * 2 * block;
  const size_t row = (size_t)(pos % chunk_tokens) * kv_dim + (size_t)hk * head_dim;
  if (rotated.x >= 0) {
    vstore_half_rte(kv[rotated.x], row + rotated.x, kc);
    vstore_half_rte(kv[rotated.y], row + rotated.y, kc);
  }
  if (j >= 2 * half_rot) vstore_half_rte(kv[j], row + j, kc);
  vstore_half_rte(CVIEW(float, vb, vo)[((size_t)t * nk + hk) * head_dim + j], row + j + block, kc);
}

// gate = silu(gate) * up, silu(x) = x / (1 + exp(-x)) with ggml's expf.
inline float swiglu_one(float x, float u) { return x / (1.0f + exp_ggml(0.0f - x)) * u; }

// gate = gelu(gate) * up through ggml's f16 GELU table (built on the host as the CPU builds it):
// 0 for x <= -10, x for x >= 10, else table[f16(x)].
inline float geglu_one(float x, float u, __global const half* table) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x * u;
  ushort h;
  vstore_half_rte(x, 0, (__private half*)&h);
  return vload_half(h, table) * u;
}

// gate = act(gate) * up (geglu: GELU, else SiLU), one item per element.
__kernel void swiglu(__global float* gb, ulong go, __global const float* ub, ulong uo, ulong n) {
  const size_t i = get_global_id(0);
  if (i < n) VIEW(float, gb, go)[i] = swiglu_one(VIEW(float, gb, go)[i], CVIEW(float, ub, uo)[i]);
}

__kernel void geglu(__global float* gb, ulong go, __global const float* ub, ulong uo, ulong n,
                    __global const half* table) {
  const size_t i = get_global_id(0);
  if (i < n) VIEW(float, gb, go)[i] = geglu_one(VIEW(float, gb, go)[i], CVIEW(float, ub, uo)[i], table);
}

// The same with a quantized second output q (qblock 32 or 256, n a multiple), for the matmul
// after them: work-groups of ROW_WG items quantize their chunk together (wg_quant; q8: in the
// int8 form, codes at q and the blocks' params at params, wg_quant_q8).
inline void gated_q(int geglu, __global float* g, __global const float* up, ulong n, __global float* q, int qblock,
                    __global uint2* params, int q8, __global const half* table, __local float* loc,
                    __local float2* ext, __local float* stat) {
  const size_t i = get_global_id(0);
  const bool active = i < n;
  float v = 0.0f;
  if (active) {
    v = geglu ? geglu_one(g[i], up[i], table) : swiglu_one(g[i], up[i]);
    g[i] = v;
  }
  if (q8) {
    wg_quant_q8(v, active, qblock, i, loc, ext, stat, (__global char*)q, params);
    return;
  }
  const float r = wg_quant(v, active, qblock, loc, ext, stat);
  if (active) q[i] = r;
}

__kernel __attribute__((reqd_work_group_size(ROW_WG, 1, 1))) void swiglu_q(
    __global float* gb, ulong go, __global const float* ub, ulong uo, ulong n, __global float* qb, ulong qo, int qblock,
    __global uint2* pb, ulong po, int q8) {
  __local float loc[ROW_WG], stat[16];
  __local float2 ext[ROW_WG / 8];
  gated_q(0, VIEW(float, gb, go), CVIEW(float, ub, uo), n, VIEW(float, qb, qo), qblock, VIEW(uint2, pb, po), q8, 0, loc,
          ext, stat);
}

__kernel __attribute__((reqd_work_group_size(ROW_WG, 1, 1))) void geglu_q(
    __global float* gb, ulong go, __global const float* ub, ulong uo, ulong n, __global float* qb, ulong qo, int qblock,
    __global uint2* pb, ulong po, int q8, __global const half* table) {
  __local float loc[ROW_WG], stat[16];
  __local float2 ext[ROW_WG / 8];
  gated_q(1, VIEW(float, gb, go), CVIEW(float, ub, uo), n, VIEW(float, qb, qo), qblock, VIEW(uint2, pb, po), q8, table,
          loc, ext, stat);
}

// y += x
__kernel void add(__global float* yb, ulong yo, __global const float* xb, ulong xo, ulong n) {
  const size_t i = get_global_id(0);
  if (i < n) VIEW(float, yb, yo)[i] += CVIEW(float, xb, xo)[i];
}

// y[r][c] += bias[c] over n = rows * dim elements.
__kernel void add_bias(__global float* yb, ulong yo, __global const float* bb, ulong bo, int dim, ulong n) {
  const size_t i = get_global_id(0);
  if (i < n) VIEW(float, yb, yo)[i] += CVIEW(float, bb, bo)[i % dim];
}

// x *= s
__kernel void scale(__global float* xb, ulong xo, ulong n, float s) {
  const size_t i = get_global_id(0);
  if (i < n) VIEW(float, xb, xo)[i] *= s;
}

// K and V rows of token t (kv_dim f32 each) as f16 into the f16 chunk holding positions[t]:
// row positions[t] % C of `layer`'s K and V blocks (a layer is 2 blocks of C * kv_dim halves).
// One item per (channel, token).
__kernel void store_kv(__global const float* kb, ulong ko, __global const float* vb, ulong vo, __global const int* pb,
                       ulong po, __global uchar* arena, __global const ulong* tb, ulong to, int chunk_tokens,
                       int kv_dim, int layer) {
  const int i = get_global_id(0);
  const int t = get_global_id(1);
  if (i >= kv_dim) return;
  const int pos = CVIEW(int, pb, po)[t];
  const ulong entry = CVIEW(ulong, tb, to)[pos / chunk_tokens];
  const size_t block = (size_t)chunk_tokens * kv_dim;  // halves
  __global half* k = (__global half*)(arena + (entry & KV_OFFSET_MASK)) + (size_t)layer * 2 * block;
  const size_t at = (size_t)(pos % chunk_tokens) * kv_dim + i;
  const size_t src = (size_t)t * kv_dim + i;
  vstore_half_rte(CVIEW(float, kb, ko)[src], at, k);
  vstore_half_rte(CVIEW(float, vb, vo)[src], at + block, k);
}
