// SPDX-License-Identifier: Apache-2.0
// Two runs' logits compared row by row: the largest absolute difference, the KL divergence of
// the second's softmax from the first's, and how often their argmax agrees.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

namespace llmsvc::test {

struct LogitFigures {
  int rows = 0;
  double max_abs = 0;  // largest |a - b| over every logit
  double scale = 0;    // largest |a|: what max_abs compares with
  double mean_kl = 0, max_kl = 0;  // KL(softmax(a) || softmax(b)) per row, nats
  int top1_agree = 0;
};

inline LogitFigures compare_logits(std::span<const float> a, std::span<const float> b, int n_vocab) {
  LogitFigures f;
  f.rows = static_cast<int>(a.size() / n_vocab);
  for (int r = 0; r < f.rows; ++r) {
    const float* x = a.data() + size_t(r) * n_vocab;
    const float* y = b.data() + size_t(r) * n_vocab;
    double mx = -INFINITY, my = -INFINITY;
    for (int i = 0; i < n_vocab; ++i) {
      mx = std::max<double>(mx, x[i]);
      my = std::max<double>(my, y[i]);
      f.max_abs = std::max<double>(f.max_abs, std::fabs(double(x[i]) - y[i]));
      f.scale = std::max<double>(f.scale, std::fabs(x[i]));
    }
    double sx = 0, sy = 0;
    for (int i = 0; i < n_vocab; ++i) sx += std::exp(x[i] - mx), sy += std::exp(y[i] - my);
    const double lx = mx + std::log(sx), ly = my + std::log(sy);
    double kl = 0;
    for (int i = 0; i < n_vocab; ++i) {
      const double px = std::exp(x[i] - lx);
      kl += px * ((x[i] - lx) - (y[i] - ly));
    }
    f.mean_kl += kl / f.rows;
    f.max_kl = std::max(f.max_kl, kl);
    const auto ax = std::max_element(x, x + n_vocab) - x, ay = std::max_element(y, y + n_vocab) - y;
    f.top1_agree += ax == ay;
  }
  return f;
}

}  // namespace llmsvc::test
