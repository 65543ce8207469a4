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

// A chunk of AQ_WG consecutive elements, element lid in item lid (v; inactive items past the
// end hold nothing), quantized in blocks of qblock, which chunks never straddle (they start at
// multiples of 256): returns item lid's q * d. The whole work-group calls it (barriers); loc
// holds AQ_WG floats, stat 16.
//   qblock 32 (ggml's Q8_0 / Q8_1, for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): d = amax / 127 kept as
//     f16, q = round-to-even(x * (127 / amax)).
//   qblock 256 (ggml's Q8_K, for Q4_K, Q5_K, Q6_K): the element of largest magnitude (the first
//     one on a tie of signs) maps to -127, q = min(127, round-to-even(x * iscale)), d =
//     1 / iscale as an f32; an all-zero block stays zero.
inline float wg_quant(float v, bool active, int qblock, __local float* loc, __local float* stat) {
  const int lid = get_local_id(0);
  loc[lid] = active ? v : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (qblock == 32) {
    if (lid < AQ_WG / 32) {
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = fmax(amax, fabs(loc[lid * 32 + j]));
      stat[2 * lid] = amax != 0.0f ? 127.0f / amax : 0.0f;
      stat[2 * lid + 1] = round_f16(amax / 127.0f);
    }
  } else if (lid == 0) {
    float mx = -INFINITY, mn = INFINITY;
    for (int j = 0; j < 256; ++j) mx = fmax(mx, loc[j]), mn = fmin(mn, loc[j]);
    const float amax = fmax(mx, -mn);
    float vmax = mx > -mn ? mx : mn;
    if (mx == -mn) {  // both signs reach amax: the first one decides
      for (int j = 0; j < 256; ++j) {
        if (fabs(loc[j]) == amax) {
          vmax = loc[j];
          break;
        }
      }
    }
    const float iscale = amax == 0.0f ? 0.0f : -127.0f / vmax;
    stat[0] = iscale;
    stat[1] = amax == 0.0f ? 0.0f : 1.0f / iscale;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float r;
  if (qblock == 32) {
    const int b = lid / 32;
    r = (float)convert_int_rte(v * stat[2 * b]) * stat[2 * b + 1];
  } else {
    r = (float)min(convert_int_rte(v * stat[0]), 127) * stat[1];
  }
  barrier(CLK_LOCAL_MEM_FENCE);  // loc and stat are the next chunk's
  return r;
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
