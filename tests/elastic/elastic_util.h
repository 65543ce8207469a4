// SPDX-License-Identifier: Apache-2.0
// What the elastic tests share: elastify's options for a quick run on a committed random model.
#pragma once

#include <string>

#include "tools/elastify/elastify.h"

namespace llmsvc::test {

// elastify from `in` to `out` on a short calibration (a few seconds on the committed models).
inline elastify::Options small_options(const std::string& in, const std::string& out) {
  elastify::Options o;
  o.input = in;
  o.output = out;
  o.calib_tokens = 256;
  o.layer_tokens = 128;
  o.window = 64;
  o.threads = 2;
  o.heads = true;  // the FFN-only path: Elastic.AnchorsStayWholeAndLevelsSwitchWithoutResidue
  return o;
}

}  // namespace llmsvc::test
