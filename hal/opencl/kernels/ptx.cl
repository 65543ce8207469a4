// SPDX-License-Identifier: Apache-2.0
// Inline PTX shared by the tensor-core kernels (NVIDIA's OpenCL only: the programs that include
// this are built where the platform is NVIDIA's, and a failed build leaves their portable
// kernels in charge). A work-group's items are warps' lanes in order (lane = lid & 31).

// Two floats as an f16 pair, lo in the low half (cvt.rn.f16x2.f32 d, a, b puts a in the high).
inline uint mma_h2(float lo, float hi) {
  uint r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// c += A B for one 16 x 8 tile (k 16), f16 inputs, f32 accumulation. Fragments (lane = 4 g + t):
// A (row-major 16 x 16) {row g, k 2t..}, {row g + 8, k 2t..}, {row g, k 2t + 8..}, {row g + 8,
// k 2t + 8..}; B (16 x 8, k contiguous per column) {k 2t.., col g}, {k 2t + 8.., col g};
// C {row g, cols 2t, 2t + 1}, {row g + 8, cols 2t, 2t + 1}.
#define MMA_16816(c, a0, a1, a2, a3, b0, b1)                                                       \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, " \
               "{%8,%9}, {%0,%1,%2,%3};"                                                          \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                    \
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))

// v of the lane whose index differs from this one's in the bits of m (every lane of the warp
// must take part).
inline float shfl_xor(float v, int m) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(m));
  return r;
}
