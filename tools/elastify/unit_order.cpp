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

namespace {

// mean_abs[j] times the L2 norm of w's column j, the columns read row by row from the file's bytes.
std::vector<double> column_scores(const hal::WeightRef& w, const std::vector<double>& mean_abs) {
  const size_t cols = static_cast<size_t>(w.cols);
  std::vector<float> row(cols);
  std::vector<double> sq(cols, 0.0);
  for (int64_t r = 0; r < w.rows; ++r) {
    hal::dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + size_t(r) * w.row_bytes, row.data(), w.cols);
    for (size_t j = 0; j < cols; ++j) sq[j] += double(row[j]) * row[j];
  }
  std::vector<double> s(cols);
  for (size_t j = 0; j < cols; ++j) s[j] = mean_abs[j] * std::sqrt(sq[j]);
  return s;
}

}  // namespace

std::vector<std::vector<double>> activation_scores(const Model& model, const std::vector<std::vector<double>>& mean_abs) {
  std::vector<std::vector<double>> scores;
  for (int il = 0; il < model.config().n_layer; ++il) scores.push_back(column_scores(model.layers()[il].w_down->ref(), mean_abs[il]));
  return scores;
}

std::vector<std::vector<double>> head_scores(const Model& model, const std::vector<std::vector<double>>& mean_abs) {
  const ModelConfig& c = model.config();
  std::vector<std::vector<double>> scores;
  for (int il = 0; il < c.n_layer; ++il) {
    const std::vector<double> col = column_scores(model.layers()[il].wo->ref(), mean_abs[il]);
    std::vector<double>& h = scores.emplace_back(c.n_head, 0.0);
    for (size_t j = 0; j < col.size(); ++j) h[j / c.head_dim] += col[j];
  }
  return scores;
}

std::vector<std::vector<int>> order_heads(const std::vector<std::vector<double>>& scores, int n_head_kv) {
  std::vector<std::vector<int>> orders;
  for (const auto& layer : scores) {
    const int n_head = static_cast<int>(layer.size()), group = n_head / n_head_kv;
    std::vector<int> order(n_head);
    std::iota(order.begin(), order.end(), 0);
    for (int g = 0; g < n_head_kv; ++g)
      std::stable_sort(order.begin() + g * group, order.begin() + (g + 1) * group,
                       [&](int a, int b) { return layer[a] > layer[b]; });
    orders.push_back(std::move(order));
  }
  return orders;
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

std::vector<std::vector<int>> random_order(int n_layer, int n_units, uint64_t seed, int groups) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int>> orders(n_layer, std::vector<int>(n_units));
  const int per_group = n_units / groups;
  for (auto& order : orders) {
    std::iota(order.begin(), order.end(), 0);
    for (int g = 0; g < groups; ++g) std::shuffle(order.begin() + g * per_group, order.begin() + (g + 1) * per_group, rng);
  }
  return orders;
}

}  // namespace llmsvc::elastify
