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
// block_scale reads one block from local memory and writes its (multiplier, d) pair into st;
// quant_one applies a pair to an element.
inline void block_scale(__local const float* v, int qblock, __local float* st) {
  if (qblock == 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = fmax(amax, fabs(v[j]));
    st[0] = amax != 0.0f ? 127.0f / amax : 0.0f;
    st[1] = round_f16(amax / 127.0f);
    return;
  }
  float mx = -INFINITY, mn = INFINITY;
  for (int j = 0; j < 256; ++j) mx = fmax(mx, v[j]), mn = fmin(mn, v[j]);
  const float amax = fmax(mx, -mn);
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

inline float quant_one(float v, int qblock, __local const float* st) {
  if (qblock == 32) return (float)convert_int_rte(v * st[0]) * st[1];
  return (float)min(convert_int_rte(v * st[0]), 127) * st[1];
}

// A chunk of AQ_WG consecutive elements, element lid in item lid (v; inactive items past the
// end hold nothing), quantized in blocks of qblock, which chunks never straddle (they start at
// multiples of 256): returns item lid's q * d. The whole work-group calls it (barriers); loc
// holds AQ_WG floats, stat 16.
inline float wg_quant(float v, bool active, int qblock, __local float* loc, __local float* stat) {
  const int lid = get_local_id(0);
  loc[lid] = active ? v : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < AQ_WG / qblock) block_scale(loc + lid * qblock, qblock, stat + 2 * lid);
  barrier(CLK_LOCAL_MEM_FENCE);
  const float r = quant_one(v, qblock, stat + 2 * (lid / qblock));
  barrier(CLK_LOCAL_MEM_FENCE);  // loc and stat are the next chunk's
  return r;
}

// The longest row wg_quant_row takes (its local memory: the row, and 2 floats per block of 32).
#define AQ_ROW_MAX 8192

// A row of dim elements (dim <= AQ_ROW_MAX, a multiple of qblock) quantized from x into y by
// the whole work-group, every block at once: a norm's row is one work-group's, and a chunk at
// a time would take dim / AQ_WG rounds of barriers. loc holds AQ_ROW_MAX floats, stat
// AQ_ROW_MAX / 16.
inline void wg_quant_row(__global const float* x, __global float* y, int dim, int qblock, __local float* loc,
                         __local float* stat) {
  const int lid = get_local_id(0);
  for (int i = lid; i < dim; i += AQ_WG) loc[i] = x[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int b = lid; b < dim / qblock; b += AQ_WG) block_scale(loc + b * qblock, qblock, stat + 2 * b);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int i = lid; i < dim; i += AQ_WG) y[i] = quant_one(loc[i], qblock, stat + 2 * (i / qblock));
}

// x quantized into y (n elements, a multiple of block), a chunk of AQ_WG per work-group.
__kernel __attribute__((reqd_work_group_size(AQ_WG, 1, 1))) void act_q8(__global const float* xb, ulong ox,
                                                                       __global float* yb, ulong oy, ulong n,
                                                                       int block) {
  __local float loc[AQ_WG], stat[16];
  const size_t i = get_global_id(0);
  const bool active = i < n;
  const float r = wg_quant(active ? CVIEW(float, xb, ox)[i] : 0.0f, active, block, loc, stat);
  if (active) VIEW(float, yb, oy)[i] = r;
}
