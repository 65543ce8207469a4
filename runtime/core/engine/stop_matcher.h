// SPDX-License-Identifier: Apache-2.0
// StopMatcher: finds stop strings in streamed text, holding back any tail that could still
// become one, so a stop string never reaches the caller.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace llmsvc {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Feeds text; returns what can be released now. Sets matched() once a stop string is
  // seen (the stop string and anything after it are dropped).
  std::string push(std::string_view text);
  // End of generation: releases whatever was held back.
  std::string flush();
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool matched_ = false;
};

}  // namespace llmsvc
