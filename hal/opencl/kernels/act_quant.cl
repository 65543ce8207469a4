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

// Blocks of 32 (ggml's Q8_0 / Q8_1, for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): d = amax / 127 kept as
// f16, q = round-to-even(x * (127 / amax)); y = q * d (y may be x).
inline void q8_block32(__global const float* x, __global float* y) {
  float4 v[8];
  float amax = 0.0f;
  for (int i = 0; i < 8; ++i) {
    v[i] = vload4(i, x);
    const float4 a = fabs(v[i]);
    amax = fmax(amax, fmax(fmax(a.x, a.y), fmax(a.z, a.w)));
  }
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  const float d = round_f16(amax / 127.0f);
  for (int i = 0; i < 8; ++i) vstore4(convert_float4(convert_int4_rte(v[i] * id)) * d, i, y);
}

// Superblocks of 256 (ggml's Q8_K, for Q4_K, Q5_K, Q6_K): the element of largest magnitude (the
// first one on a tie of signs) maps to -127, q = min(127, round-to-even(x * iscale)), d =
// 1 / iscale as an f32; y = q * d (y may be x).
inline void q8_block256(__global const float* x, __global float* y) {
  float mx = -INFINITY, mn = INFINITY;
  for (int i = 0; i < 64; ++i) {
    const float4 v = vload4(i, x);
    mx = fmax(mx, fmax(fmax(v.x, v.y), fmax(v.z, v.w)));
    mn = fmin(mn, fmin(fmin(v.x, v.y), fmin(v.z, v.w)));
  }
  const float amax = fmax(mx, -mn);
  if (amax == 0.0f) {
    for (int i = 0; i < 64; ++i) vstore4((float4)(0.0f), i, y);
    return;
  }
  float vmax = mx > -mn ? mx : mn;
  if (mx == -mn) {  // both signs reach amax: the first one decides
    for (int i = 0; i < 256; ++i) {
      if (fabs(x[i]) == amax) {
        vmax = x[i];
        break;
      }
    }
  }
  const float iscale = -127.0f / vmax, d = 1.0f / iscale;
  for (int i = 0; i < 64; ++i) {
    const int4 q = min(convert_int4_rte(vload4(i, x) * iscale), (int4)(127));
    vstore4(convert_float4(q) * d, i, y);
  }
}

// Block b of `block` (32 or 256) floats of x into the same place of y.
inline void q8_block(int block, __global const float* x, __global float* y, size_t b) {
  if (block == 32) {
    q8_block32(x + b * 32, y + b * 32);
  } else {
    q8_block256(x + b * 256, y + b * 256);
  }
}

// One work-item per block; n_blocks = rows * cols / block.
__kernel void act_q8(__global const float* x, ulong ox, __global float* y, ulong oy, uint n_blocks, int block) {
  const uint b = get_global_id(0);
  if (b < n_blocks) q8_block(block, CVIEW(float, x, ox), VIEW(float, y, oy), b);
}
