// SPDX-License-Identifier: Apache-2.0
// `llmsvc elastify`: turns a GGUF model into an elastic one (ElastiLM). FFN neurons and query
// heads are scored on a calibration text and reordered by importance within each layer
// (neurons in whole quantization blocks, heads within their KV group), layers are scored by the loss increase when each is removed and the most important
// are locked at full size (anchor layers), and the levels are written into the file's metadata
// (runtime/core/model/elastic_spec.h). The result is checked: the full model's logits equal the
// input's up to the float rounding of down's reordered block sums.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace llmsvc::elastify {

struct Options {
  std::string input, output;
  std::string calib_path;          // calibration text ("": the built-in one, a public-domain text)
  int calib_tokens = 2048;         // for the neuron scores
  int layer_tokens = 1024;         // for the layer scores (one loss per layer)
  int window = 256;                // tokens per calibration sequence
  std::string score = "activation";  // neuron order: activation | taylor (scores_path) | random
  std::string scores_path;         // taylor: JSON of per-neuron scores (taylor_scores.py)
  uint64_t seed = 1;               // random order
  double anchor_share = 0.2;       // share of layers locked at full size
  std::vector<int> levels{20, 30, 40, 50, 60, 70, 80, 90, 100};
  // Levels cut query heads too (where the model's shape allows). Off by default: without
  // recovery adapters (what elastify alone writes) cutting heads lost to cutting only FFN
  // neurons at equal weight bytes on SmolLM2 and Gemma-3; with them it won, and reaches lower
  // costs (docs/measurements/2026-12-02-head-levels.md). Set it when adapters will be trained.
  bool heads = false;
  int threads = 0;                 // 0: every core
};

struct Report {
  int n_layer = 0, n_ff = 0, ffn_unit = 0;
  std::vector<int> anchors;
  bool heads_cut = false;                // the levels cut query heads
  std::string heads_note;                // why not, when they do not
  std::vector<double> layer_importance;  // loss increase with the layer removed
  double base_loss = 0;                  // mean NLL of the calibration text, full model
  // The written file against the input on the calibration text's first window.
  double max_abs_logit_diff = 0;
  int argmax_agree = 0, argmax_positions = 0;
  double loss_in = 0, loss_out = 0;
  double seconds = 0;
};

using Progress = std::function<void(const std::string& line)>;

Result<Report> run(const Options& options, const Progress& progress = {});

}  // namespace llmsvc::elastify
