// SPDX-License-Identifier: Apache-2.0
// Timing helpers the profilers share: medians, non-negative least squares, a token stream.
#include "runtime/core/graph/profile_fit.h"

#include <algorithm>
#include <cmath>

namespace llmsvc::profile {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Normal equations, 3x3, Gaussian elimination.
std::array<double, 3> fit(const std::vector<ProfileSample>& s) {
  std::array<bool, 3> used{true, true, true};
  std::array<double, 3> c{};
  for (int round = 0; round < 3; ++round) {
    double a[3][4] = {};
    for (const ProfileSample& p : s) {
      const double f[3] = {1.0, p.x1, p.x2};
      for (int i = 0; i < 3; ++i) {
        if (!used[i]) continue;
        for (int j = 0; j < 3; ++j)
          if (used[j]) a[i][j] += f[i] * f[j];
        a[i][3] += f[i] * p.seconds;
      }
    }
    for (int i = 0; i < 3; ++i)
      if (!used[i]) a[i][i] = 1.0;  // c_i = 0
    for (int col = 0; col < 3; ++col) {
      int piv = col;
      for (int r = col + 1; r < 3; ++r)
        if (std::abs(a[r][col]) > std::abs(a[piv][col])) piv = r;
      std::swap(a[col], a[piv]);
      if (std::abs(a[col][col]) < 1e-300) continue;
      for (int r = 0; r < 3; ++r) {
        if (r == col) continue;
        const double k = a[r][col] / a[col][col];
        for (int j = col; j < 4; ++j) a[r][j] -= k * a[col][j];
      }
    }
    bool ok = true;
    for (int i = 0; i < 3; ++i) {
      c[i] = used[i] && std::abs(a[i][i]) > 1e-300 ? a[i][3] / a[i][i] : 0.0;
      if (c[i] < 0) {
        used[i] = false;
        ok = false;
      }
    }
    if (ok) break;
  }
  for (double& x : c) x = std::max(x, 0.0);
  return c;
}

std::vector<int32_t> tokens(int n, int n_vocab) {
  std::vector<int32_t> t(n);
  uint32_t x = 12345;
  for (int i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    t[i] = static_cast<int32_t>(x % static_cast<uint32_t>(std::max(n_vocab - 1, 1))) + 1;
  }
  return t;
}

}  // namespace llmsvc::profile
