// SPDX-License-Identifier: Apache-2.0
// Neuron scores and unit orders.
#include "tools/elastify/unit_order.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "hal/host/dequantize.h"

namespace llmsvc::elastify {

std::vector<std::vector<double>> activation_scores(const Model& model, const std::vector<std::vector<double>>& mean_abs) {
  const ModelConfig& c = model.config();
  std::vector<std::vector<double>> scores(c.n_layer);
  std::vector<float> row(c.n_ff);
  for (int il = 0; il < c.n_layer; ++il) {
    // Column norms of ffn_down, read row by row from the file's bytes.
    const hal::WeightRef& down = model.layers()[il].w_down->ref();
    std::vector<double> sq(c.n_ff, 0.0);
    for (int64_t r = 0; r < down.rows; ++r) {
      hal::dequantize_row(down.type, static_cast<const uint8_t*>(down.data) + size_t(r) * down.row_bytes, row.data(), c.n_ff);
      for (int j = 0; j < c.n_ff; ++j) sq[j] += double(row[j]) * row[j];
    }
    scores[il].resize(c.n_ff);
    for (int j = 0; j < c.n_ff; ++j) scores[il][j] = mean_abs[il][j] * std::sqrt(sq[j]);
  }
  return scores;
}

Result<std::vector<std::vector<double>>> read_neuron_scores(const std::string& path, const ModelConfig& c) {
  std::ifstream in(path);
  if (!in) return Status(Code::not_found, "scores: cannot open " + path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ffn") || !j["ffn"].is_array())
    return Status(Code::invalid_argument, "scores: " + path + " is not a JSON object with an \"ffn\" array");
  const auto& ffn = j["ffn"];
  if (ffn.size() != static_cast<size_t>(c.n_layer))
    return Status(Code::invalid_argument, "scores: \"ffn\" has " + std::to_string(ffn.size()) + " layers, the model " +
                                              std::to_string(c.n_layer));
  std::vector<std::vector<double>> out(c.n_layer);
  for (int il = 0; il < c.n_layer; ++il) {
    const auto& layer = ffn[il];
    if (!layer.is_array() || layer.size() != static_cast<size_t>(c.n_ff))
      return Status(Code::invalid_argument, "scores: layer " + std::to_string(il) + " is not " + std::to_string(c.n_ff) + " numbers");
    for (const auto& v : layer) {
      if (!v.is_number() || !std::isfinite(v.get<double>()))
        return Status(Code::invalid_argument, "scores: layer " + std::to_string(il) + " holds a value that is not a finite number");
      out[il].push_back(v.get<double>());
    }
  }
  return out;
}

std::vector<std::vector<int>> order_units(const std::vector<std::vector<double>>& scores, int unit) {
  std::vector<std::vector<int>> orders;
  for (const auto& layer : scores) {
    const int n_units = static_cast<int>(layer.size()) / unit;
    std::vector<double> s(n_units, 0.0);
    for (int u = 0; u < n_units; ++u)
      for (int j = 0; j < unit; ++j) s[u] += layer[size_t(u) * unit + j];
    std::vector<int> order(n_units);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] > s[b]; });
    orders.push_back(std::move(order));
  }
  return orders;
}

std::vector<std::vector<int>> random_order(int n_layer, int n_units, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int>> orders(n_layer, std::vector<int>(n_units));
  for (auto& order : orders) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
  }
  return orders;
}

}  // namespace llmsvc::elastify
