// SPDX-License-Identifier: Apache-2.0
// PieceJoiner: the app's token pieces (CallParams::on_tokens) from a call's PIECE frames. The
// daemon sends a piece's ids beyond one frame's room, and the ids whose text never streamed,
// in PIECEs without text; they join the next piece with text, or end the call as one piece.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/core/engine/call_types.h"
#include "runtime/protocol/messages.h"

namespace llmsvc::client {

class PieceJoiner {
 public:
  explicit PieceJoiner(const TokenPieceFn& sink) : sink_(sink) {}

  // A PIECE arrived; false when the sink asked to cancel.
  bool add(const protocol::Piece& piece) {
    ids_.insert(ids_.end(), piece.ids.begin(), piece.ids.end());
    lps_.insert(lps_.end(), piece.logprobs.begin(), piece.logprobs.end());
    if (piece.text.empty()) return true;  // its ids go with the next piece
    return deliver(piece.text, piece.token);
  }
  // The call ended: the ids still held as the last piece (no text).
  bool finish() { return ids_.empty() || deliver("", -1); }

 private:
  bool deliver(std::string_view text, int32_t token) {
    // Log-probabilities come for every id or for none (the decoder checks each PIECE).
    if (lps_.size() != ids_.size()) lps_.clear();
    const bool go = sink_(TokenPiece{text, token, ids_, lps_});
    ids_.clear();
    lps_.clear();
    return go;
  }

  const TokenPieceFn& sink_;
  std::vector<int32_t> ids_;
  std::vector<float> lps_;
};

}  // namespace llmsvc::client
