// SPDX-License-Identifier: Apache-2.0
// Reading and checking an elastic model's levels from its GGUF metadata.
#include "runtime/core/model/elastic_spec.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/core/gguf/gguf_file.h"

namespace llmsvc {
namespace {

std::string key(const char* field) { return std::string(kElasticPrefix) + field; }

Status bad(const char* field, const std::string& what) {
  return Status(Code::model_invalid, "model: " + key(field) + ": " + what);
}

// A levels x n_layer count of kept units: `what` in whole `unit_word` of `unit`, at most
// `whole`; `whole` at the full level and in anchor layers; never fewer than the level below.
struct Counts {
  const char* field;
  const char* what;
  const char* unit_word;
  int unit, whole;
};

Result<std::vector<std::vector<int>>> read_counts(const gguf::GgufFile& f, const ElasticSpec& s, int n_layer, const Counts& c) {
  const std::vector<int64_t>* v = f.get_int_array(key(c.field));
  const size_t n_levels = s.levels.size();
  if (!v || v->size() != n_levels * n_layer)
    return bad(c.field, "not levels x n_layer (" + std::to_string(n_levels * n_layer) + ") integers");
  std::vector<std::vector<int>> out(n_levels, std::vector<int>(n_layer));
  for (size_t lv = 0; lv < n_levels; ++lv) {
    for (int il = 0; il < n_layer; ++il) {
      const int64_t k = (*v)[lv * n_layer + il];
      const std::string where = "level " + std::to_string(s.levels[lv]) + " %, layer " + std::to_string(il) + ": ";
      if (k < c.unit || k > c.whole || k % c.unit != 0)
        return bad(c.field, where + std::to_string(k) + " " + c.what + " (whole " + c.unit_word + " of " +
                                std::to_string(c.unit) + ", at most " + std::to_string(c.whole) + ")");
      if ((s.anchor[il] || lv + 1 == n_levels) && k != c.whole)
        return bad(c.field, where + (s.anchor[il] ? "an anchor layer" : "the full level") + " keeps " + std::to_string(k) +
                                " of " + std::to_string(c.whole) + " " + c.what);
      if (lv > 0 && k < out[lv - 1][il]) return bad(c.field, where + "fewer " + c.what + " than the level below");
      out[lv][il] = static_cast<int>(k);
    }
  }
  return out;
}

}  // namespace

int ElasticSpec::level_index(int percent) const {
  const auto it = std::find(levels.begin(), levels.end(), percent);
  return it == levels.end() ? -1 : static_cast<int>(it - levels.begin());
}

std::string recovery_prefix(int percent) { return "rcv." + std::to_string(percent) + "."; }

int elastic_ffn_keep(int n_ff, int unit, int percent) {
  const int units = n_ff / unit;
  const int kept = static_cast<int>(std::lround(static_cast<double>(units) * percent / 100.0));
  return std::clamp(kept, 1, units) * unit;
}

int elastic_head_keep(int n_head, int n_head_kv, int percent) {
  return elastic_ffn_keep(n_head, n_head_kv, percent);  // ranks are units of n_head_kv heads
}

std::vector<int> rank_major_heads(int n_head, int n_head_kv) {
  const int group = n_head / n_head_kv;
  std::vector<int> order(static_cast<size_t>(n_head));
  for (int k = 0; k < n_head; ++k) order[k] = (k % n_head_kv) * group + k / n_head_kv;
  return order;
}

Result<std::optional<ElasticSpec>> read_elastic_spec(const gguf::GgufFile& f, const ModelConfig& c) {
  if (!f.find(key("version"))) return std::optional<ElasticSpec>{};
  const auto version = f.get_uint(key("version"));
  if (!version) return bad("version", "not an unsigned integer");
  if (*version != kElasticVersion)
    return Status(Code::unsupported, "model: elastic format version " + std::to_string(*version) +
                                         " (this build reads version " + std::to_string(kElasticVersion) + ")");
  ElasticSpec s;
  const std::vector<int64_t>* levels = f.get_int_array(key("levels"));
  if (!levels || levels->empty()) return bad("levels", "missing or empty");
  if (levels->size() > kMaxElasticLevels) return bad("levels", "more than " + std::to_string(kMaxElasticLevels) + " levels");
  for (size_t i = 0; i < levels->size(); ++i) {
    const int64_t p = (*levels)[i];
    if (p < 1 || p > 100 || (i > 0 && p <= (*levels)[i - 1]))
      return bad("levels", "level " + std::to_string(i) + " is " + std::to_string(p) + " (per cent, 1..100, strictly increasing)");
    s.levels.push_back(static_cast<int>(p));
  }
  if (s.levels.back() != 100) return bad("levels", "the last level is not 100 (the full model)");

  const auto unit = f.get_uint(key("ffn_unit"));
  if (!unit || *unit == 0 || *unit > static_cast<uint64_t>(c.n_ff) || c.n_ff % *unit != 0)
    return bad("ffn_unit", "missing, or does not divide n_ff " + std::to_string(c.n_ff));
  s.ffn_unit = static_cast<int>(*unit);

  s.anchor.assign(c.n_layer, false);
  if (f.find(key("anchor_layers"))) {
    const std::vector<int64_t>* anchors = f.get_int_array(key("anchor_layers"));
    if (!anchors) return bad("anchor_layers", "not an array of integers");
    for (int64_t l : *anchors) {
      if (l < 0 || l >= c.n_layer) return bad("anchor_layers", "layer " + std::to_string(l) + " out of range");
      if (s.anchor[l]) return bad("anchor_layers", "layer " + std::to_string(l) + " named twice");
      s.anchor[l] = true;
    }
  }

  if (!f.find(key("ffn_keep"))) return bad("ffn_keep", "missing");
  auto ffn = read_counts(f, s, c.n_layer, {"ffn_keep", "neurons", "units", s.ffn_unit, c.n_ff});
  if (!ffn.ok()) return ffn.status();
  s.ffn_keep = std::move(ffn).value();
  if (f.find(key("head_keep"))) {
    auto heads = read_counts(f, s, c.n_layer, {"head_keep", "query heads", "ranks", c.n_head_kv, c.n_head});
    if (!heads.ok()) return heads.status();
    s.head_keep = std::move(heads).value();
  }
  if (f.find(key("score"))) {
    const auto score = f.get_string(key("score"));
    if (!score) return bad("score", "not a string");
    s.score = std::string(*score);
  }
  if (f.find(key("layer_importance"))) {
    const std::vector<double>* imp = f.get_float_array(key("layer_importance"));
    if (!imp || imp->size() != static_cast<size_t>(c.n_layer)) return bad("layer_importance", "not n_layer floats");
    for (double v : *imp) {
      if (!std::isfinite(v)) return bad("layer_importance", "not finite");
      s.layer_importance.push_back(static_cast<float>(v));
    }
  }
  if (f.find(key("recovery")) || f.find(key("recovery_alpha"))) {
    const std::vector<int64_t>* rec = f.get_int_array(key("recovery"));
    if (!rec) return bad("recovery", "missing or not an array of integers");
    const std::vector<double>* alpha = f.get_float_array(key("recovery_alpha"));
    if (!alpha || alpha->size() != rec->size()) return bad("recovery_alpha", "missing, or not one float per recovery level");
    for (size_t i = 0; i < rec->size(); ++i) {
      const int64_t p = (*rec)[i];
      if (p < 1 || p > 100 || s.level_index(static_cast<int>(p)) < 0)
        return bad("recovery", std::to_string(p) + " is not one of the levels");
      if (std::find(s.recovery.begin(), s.recovery.end(), p) != s.recovery.end())
        return bad("recovery", "level " + std::to_string(p) + " named twice");
      if (!std::isfinite((*alpha)[i]) || std::fabs((*alpha)[i]) > 3.0e38)
        return bad("recovery_alpha", "not finite");
      s.recovery.push_back(static_cast<int>(p));
      s.recovery_alpha.push_back(static_cast<float>((*alpha)[i]));
    }
  }
  return std::optional<ElasticSpec>(std::move(s));
}

}  // namespace llmsvc
