// SPDX-License-Identifier: Apache-2.0
// The worst-case memory formula (memory_bound.h), term by term.
#include "runtime/service/memory_bound.h"

#include <algorithm>

#include "runtime/protocol/frame.h"

namespace llmsvc::service {

namespace {

namespace p = protocol;

// Overheads of the structures that hold each item, rounded up (64-bit glibc, libstdc++).
constexpr uint64_t kQueuedFrame = sizeof(p::Frame) + 16;  // F: a deque slot and its header
constexpr uint64_t kSession = 8u << 10;                   // B: Session, its reader, writer, maps
constexpr uint64_t kPerRequest = 64;                      // q: a stream in flight (hash node)
constexpr uint64_t kPerHandle = 160;                      // h: a map node and its id
constexpr uint64_t kPerCall = 256;                        // k: cancel flag, call maps, the task
constexpr uint64_t kPerListedId = 4 + p::kMaxIdBytes + 32;  // an id kept for a list, with its string
constexpr uint64_t kOpAnswer = p::kMaxMessageBytes + 256;    // A_op: the largest operation answer (an ERROR)
constexpr uint64_t kLargestFrame = p::kHeaderBytes + 5 + p::kMaxListIds * (4 + p::kMaxIdBytes);  // A_max
// S: a piece's text, and (version 4) its token ids and log-probabilities.
constexpr uint64_t kPieceFrame = p::kHeaderBytes + 8 + kPieceSplitBytes + 8 + 8 * p::kMaxPieceIds;
// c: a loaded context's own state beside its system prompt and tokens (history log, swap
// store, chunk tables of up to n_ctx / 16 chunks).
constexpr uint64_t kContextState = 64u << 10;
// m: a message's own bytes beside its text (the engine's and the history's record of it).
constexpr uint64_t kPerMessage = 48;

}  // namespace

MemoryBound memory_bound(const ServerOptions& o, uint32_t n_ctx, uint32_t max_piece_bytes) {
  const AppQuotas& q = o.quotas.defaults;
  const uint64_t U = o.max_unsent_bytes, P = o.max_frame_payload, R = kReadChunkBytes;
  const uint64_t O = o.max_ops_in_flight, K = o.max_calls, Q = o.max_requests_in_flight, H = o.max_handles;
  // A closed context stays loaded: without a contexts quota nothing bounds an app's contexts,
  // and the figure counts only those its handles can hold open at once.
  const uint64_t conns_per_app = q.connections > 0 ? q.connections : std::max<uint64_t>(1, o.max_connections);
  const uint64_t C = q.contexts > 0 ? q.contexts : conns_per_app * H;

  const uint64_t reader = P + R + (R / 16) * kQueuedFrame;
  const uint64_t writer = 2 * (U + kLargestFrame);
  // A queued operation holds its request's text (a system prompt, a text to count: at most M).
  const uint64_t answers = O * (kOpAnswer + o.max_prompt_bytes) + K * kPieceFrame;
  const uint64_t lists = U + O * C * kPerListedId;
  const uint64_t bookkeeping = kSession + Q * kPerRequest + H * kPerHandle + K * kPerCall;
  MemoryBound b;
  b.per_connection = reader + writer + answers + lists + bookkeeping;
  b.per_app_contexts = C * (o.max_prompt_bytes + (4ull + max_piece_bytes + kPerMessage) * n_ctx + kContextState);
  b.per_app = conns_per_app * b.per_connection + b.per_app_contexts;
  b.contexts_bounded = q.contexts > 0;
  return b;
}

}  // namespace llmsvc::service
