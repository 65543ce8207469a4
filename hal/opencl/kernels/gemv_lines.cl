// SPDX-License-Identifier: Apache-2.0
// The GEMVs' common frame (matmul_gemv.cl's float GEMV, matmul_dp4a.cl's int8 one): a
// work-group of LX x LY items covers LY * NR rows, the LX items of one line walking the blocks
// of NR rows side by side, their partial sums meeting in local memory at the end (no sub-groups
// on the target drivers); and the arguments of a launch over up to three weights sharing x.

#define GEMV_MAXT 4  // tokens a GEMV launch takes at most

// The item's rows (past the last: read, never written), its partial sums zeroed; returns its
// place in its line. `grp` is the work-group's index within w's groups (a multi-weight launch
// numbers each weight's groups from 0).
inline uint gemv_start(const int LX, const int NR, const Weight w, uint grp, uint* rr, float* acc) {
  const uint ly = get_local_id(0) / LX;
  const uint row0 = (grp * (get_local_size(0) / LX) + ly) * NR;
  for (int i = 0; i < NR; ++i) rr[i] = min(row0 + i, w.rows - 1);
  for (int o = 0; o < NR * GEMV_MAXT; ++o) acc[o] = 0.0f;
  return get_local_id(0) % LX;
}

// Sums each (row, token) partial over the line's items; item 0 of the line writes y (add: y +=
// alpha * the sum, the product rounded, then scaled, then added: the matmul, scale and add ops'
// bits). Eight partials at a time per level, so a 32-item line takes two barriers past the
// first, not five.
inline void gemv_finish(const int LX, const int NR, const int T, const float* acc, const Weight w, uint grp,
                        uint n, __global float* y, __local float* red, float alpha, int add) {
  const uint lx = get_local_id(0) % LX, ly = get_local_id(0) / LX;
  const uint row0 = (grp * (get_local_size(0) / LX) + ly) * NR;
  __local float* mine = red + ly * NR * T * LX;
  for (int o = 0; o < NR * T; ++o) mine[o * LX + lx] = acc[o];
  barrier(CLK_LOCAL_MEM_FENCE);
  // Each level sums f partials into the first s / f places; an item reads only places >= s / f
  // besides its own, so no place is read after another item wrote it in the same level.
  for (uint s = LX; s > 1;) {
    const uint f = s >= 8 ? 8 : s, m = s / f;
    if (lx < m) {
      for (int o = 0; o < NR * T; ++o) {
        float v = mine[o * LX + lx];
        for (uint j = 1; j < f; ++j) v += mine[o * LX + lx + j * m];
        mine[o * LX + lx] = v;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    s = m;
  }
  if (lx == 0) {
    for (int i = 0; i < NR; ++i) {
      const uint r = row0 + i;
      if (r >= w.rows) break;
      for (int t = 0; t < T; ++t) {
        if (t >= (int)n) continue;
        const size_t at = (size_t)t * w.rows + r;
        if (add) {
          volatile float p = alpha * mine[(i * T + t) * LX];  // no mad: rounded as the scale op rounds
          y[at] = y[at] + p;
        } else {
          y[at] = mine[(i * T + t) * LX];
        }
      }
    }
  }
}

// Up to three weights of one layout and width in one launch (gemvm_* kernels): weight i's
// parts, rows and output; WPICK_M(i) makes it the work-group's Weight w and output y.
#define WARGS_M(i)                                                                                    \
  __global const uchar *p0_##i, ulong o0_##i, __global const uchar *p1_##i, ulong o1_##i,             \
      __global const uchar *p2_##i, ulong o2_##i, uint rows_##i, __global float *y_##i, ulong yo_##i
#define WPICK_M(i)              \
  w.p0 = p0_##i + o0_##i;       \
  w.p1 = p1_##i + o1_##i;       \
  w.p2 = p2_##i + o2_##i;       \
  w.rows = rows_##i;            \
  y = VIEW(float, y_##i, yo_##i)
// The weight of a multi-weight launch's work-group `grp` (groups [0, g1) the first weight's,
// [g1, g2) the second's, the rest the third's) into w and y, and grp made that weight's own.
#define WPICK_GROUP(grp, g1, g2, ncols, nkp, ngs) \
  if (grp >= g2) {                             \
    WPICK_M(2);                                \
    grp -= g2;                                 \
  } else if (grp >= g1) {                      \
    WPICK_M(1);                                \
    grp -= g1;                                 \
  } else {                                     \
    WPICK_M(0);                                \
  }                                            \
  w.cols = ncols;                              \
  w.kp = nkp;                                  \
  w.gs = ngs
