// SPDX-License-Identifier: Apache-2.0
// Layer-by-layer loads of swapped chunks for the swap-recompute pipeline.
#include "policy/swap/layer_loader.h"

#include <algorithm>

#include "policy/swap/kv_swap.h"

namespace llmsvc::policy {

LayerLoader::LayerLoader(KvSequence& seq, SwapStore& store, uint64_t model_hash, std::span<const int32_t> tokens,
                         int n_valid, std::span<const int> chunks)
    : seq_(seq), store_(store) {
  const KvGeometry& geo = seq.geometry();
  n_valid = std::min(n_valid, static_cast<int>(tokens.size()));
  const std::vector<uint64_t> hashes = chunk_token_hashes(tokens.first(static_cast<size_t>(n_valid)), geo.chunk_tokens);
  std::vector<ChunkMeta> metas;
  for (int c : chunks) metas.push_back(chunk_file_meta(geo, model_hash, hashes, c, n_valid, seq.format(c)));
  std::vector<Result<ChunkIndex>> idx = store.read_indices(metas);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const int c = chunks[i];
    Status bad;
    if (!idx[i].ok()) bad = idx[i].status();
    else if (metas[i].n_tokens != geo.chunk_tokens || idx[i]->layer_bytes() != geo.layer_bytes(seq.format(c)) ||
             idx[i]->frames.size() != static_cast<size_t>(geo.n_layer))
      bad = Status(Code::io, "chunk " + std::to_string(c) + ": file layout does not match a full chunk");
    if (!bad.ok()) {
      header_failed_.push_back(c);
      header_status_.push_back(bad);
      continue;
    }
    good_.push_back(c);
    index_.push_back(std::move(*idx[i]));
  }
  failed_.assign(good_.size(), false);
  submit(0);  // in flight while the caller prepares the recompute
}

LayerLoader::~LayerLoader() {
  if (in_flight_ >= 0) (void)read_.wait();
}

void LayerLoader::submit(int layer) {
  if (good_.empty() || layer >= seq_.geometry().n_layer) return;
  std::vector<LayerTarget> targets;
  staged_.resize(good_.size());
  for (size_t i = 0; i < good_.size(); ++i) {
    const int c = good_[i];
    const size_t bytes = seq_.geometry().layer_bytes(seq_.format(c));
    if (uint8_t* mem = seq_.chunk_data(c)) {
      targets.push_back({&index_[i], std::span<uint8_t>(mem + static_cast<size_t>(layer) * bytes, bytes)});
    } else {  // a GPU's chunk: read into host memory, copied in by collect()
      staged_[i].resize(bytes);
      targets.push_back({&index_[i], std::span<uint8_t>(staged_[i])});
    }
  }
  read_ = store_.read_layer_async(layer, targets);
  in_flight_ = layer;
  next_ = layer + 1;
}

void LayerLoader::collect() {
  if (in_flight_ < 0) return;
  std::vector<Status> st = read_.wait();
  const int layer = in_flight_;
  in_flight_ = -1;
  for (size_t i = 0; i < st.size() && i < good_.size(); ++i) {
    if (st[i].ok() && !staged_[i].empty())
      st[i] = seq_.write_chunk(good_[i], static_cast<size_t>(layer) * staged_[i].size(), staged_[i]);
    if (st[i].ok() || failed_[i]) continue;
    failed_[i] = true;
    late_failed_.push_back(good_[i]);
    late_status_.push_back(st[i]);
  }
}

Status LayerLoader::before_layer(int layer) {
  if (good_.empty()) return Status::Ok();
  if (in_flight_ != layer) {
    collect();
    submit(layer);
  }
  collect();
  submit(layer + 1);
  return Status::Ok();
}

void LayerLoader::finish() {
  if (finished_) return;
  finished_ = true;
  collect();
  while (!good_.empty() && next_ < seq_.geometry().n_layer) {
    submit(next_);
    collect();
  }
  for (size_t i = 0; i < good_.size(); ++i)
    if (!failed_[i]) seq_.mark_loaded(good_[i]);
  std::vector<size_t> order(late_failed_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return late_failed_[a] < late_failed_[b]; });
  std::vector<int> f;
  std::vector<Status> s;
  for (size_t i : order) {
    f.push_back(late_failed_[i]);
    s.push_back(late_status_[i]);
  }
  late_failed_ = std::move(f);
  late_status_ = std::move(s);
}

}  // namespace llmsvc::policy
