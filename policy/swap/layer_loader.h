// SPDX-License-Identifier: Apache-2.0
// LayerLoader: the I/O half of the swap-recompute pipeline. Full chunks named by the
// planner are read from their swap files one layer at a time, the read of layer l + 1 in
// flight while the recompute runs layer l (Forward::recompute's layer hook calls
// before_layer(l), which waits for layer l and submits layer l + 1).
//
// The files' headers are read and checked first (one batch): a chunk whose file is missing,
// damaged or stale is reported at once (header_failed) so the caller recomputes it in the
// same pass. A layer frame that fails its checksum later (late_failed) leaves that chunk's
// K/V wrong from that layer on, and with it what the pass recomputed after it: the caller
// recomputes those in a second pass.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "policy/kv_chunk_store.h"
#include "policy/swap/swap_store.h"

namespace llmsvc::policy {

class LayerLoader {
 public:
  // `chunks`: full chunks of `seq`, resident (just claimed) in the format their files hold.
  LayerLoader(KvSequence& seq, SwapStore& store, uint64_t model_hash, std::span<const int32_t> tokens, int n_valid,
              std::span<const int> chunks);
  LayerLoader(const LayerLoader&) = delete;
  LayerLoader& operator=(const LayerLoader&) = delete;
  ~LayerLoader();  // waits for a read still in flight

  // Chunks whose header was bad, with the reason (first per chunk); they are not read.
  const std::vector<int>& header_failed() const { return header_failed_; }
  const std::vector<Status>& header_status() const { return header_status_; }

  // Waits for layer `layer` (submitting it first if needed) and submits layer + 1. Layers
  // must come in order from 0. Never fails: a bad frame marks its chunk late_failed.
  Status before_layer(int layer);
  // Reads what is left, marks every chunk that loaded whole as current (mark_loaded).
  void finish();
  // Chunks whose frame failed in some layer (ascending), with the first reason.
  const std::vector<int>& late_failed() const { return late_failed_; }
  const std::vector<Status>& late_status() const { return late_status_; }
  int loaded() const { return static_cast<int>(good_.size()) - static_cast<int>(late_failed_.size()); }

 private:
  void submit(int layer);
  void collect();

  KvSequence& seq_;
  SwapStore& store_;
  std::vector<int> good_;  // chunks with a valid header, in order
  std::vector<ChunkIndex> index_;  // theirs
  std::vector<bool> failed_;       // per good_ entry
  // Per good_ entry: the layer in flight, where the chunk has no host memory (else empty).
  std::vector<std::vector<uint8_t>> staged_;
  std::vector<int> header_failed_, late_failed_;
  std::vector<Status> header_status_, late_status_;
  LayerRead read_;
  int in_flight_ = -1;  // layer submitted and not yet waited for
  int next_ = 0;        // next layer to submit
  bool finished_ = false;
};

}  // namespace llmsvc::policy
