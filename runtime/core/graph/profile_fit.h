// SPDX-License-Identifier: Apache-2.0
// What the profilers (switch costs, elastic levels) share: a timed sample, its median over
// repetitions, the non-negative least-squares fit of samples to a linear cost model, and a
// deterministic token stream to time forward passes with.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace llmsvc {

struct ProfileSample {
  std::string what;  // "recompute", "load" or "prefill"
  // recompute: tokens, context; load: chunks, bytes (per layer); prefill: tokens
  double x1 = 0, x2 = 0;
  double seconds = 0;     // median of the repetitions (recompute and load: per layer)
  double fitted = 0;      // what the fitted model predicts
};

namespace profile {

double seconds_since(std::chrono::steady_clock::time_point t0);
// The median of a non-empty list.
double median(std::vector<double> v);
// Least squares seconds ~ c0 + c1 x1 + c2 x2; coefficients that come out negative are fixed
// at 0 and the rest refitted (a term a sample set does not vary comes out 0).
std::array<double, 3> fit(const std::vector<ProfileSample>& samples);
// n ids spread over the vocabulary (never id 0); the cost of a forward pass does not depend
// on which ids go in.
std::vector<int32_t> tokens(int n, int n_vocab);

}  // namespace profile
}  // namespace llmsvc
