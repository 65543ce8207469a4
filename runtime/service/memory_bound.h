// SPDX-License-Identifier: Apache-2.0
// MemoryBound: llmsvcd's worst-case memory as a formula of its configuration (the formula is
// written out in docs/memory-bound.md; this is its one implementation, which
// the daemon logs at start-up and the adversarial tests check RSS against).
//
//   per connection = reader + writer + worker answers + lists + bookkeeping
//     reader      = P + R + (R / 16) * F      the frame in progress (its buffer grows as bytes
//                                             come, never past its length P) and one read of R
//                                             bytes of complete frames, each F of overhead
//     writer      = 2 * (U + A_max)           unsent answers stop new requests at U; one frame
//                                             (at most A_max) may cross it; the buffer doubles
//     worker answ = O * (A_op + M) + K * S    operations' answers and request texts, calls' pieces
//     lists       = U + O * L_app             CONTEXT_LIST ids waiting to be encoded
//     bookkeeping = B + Q * q + H * h + K * k  session, requests in flight, handles, calls
//   per app        = C * (M + (4 + L + m) * T + c)  contexts it holds (system prompt, tokens,
//                                             messages: each at least one token, whose text is at
//                                             most L bytes a token, m bytes of bookkeeping; state)
//   daemon         = base + KV budget + N * per connection + apps * per app
//
// U = max_unsent_bytes, P = max_frame_payload, O = max_ops_in_flight, K = max_calls,
// Q = max_requests_in_flight, H = max_handles, C = quotas.contexts, M = max_prompt_bytes,
// T = n_ctx, L = the vocabulary's longest token text, N = connections at once (max_connections,
// and per app quotas.connections).
#pragma once

#include <cstdint>

#include "runtime/service/server.h"

namespace llmsvc::service {

struct MemoryBound {
  uint64_t per_connection = 0;
  uint64_t per_app_contexts = 0;  // one app's loaded contexts (outside the KV budget)
  bool contexts_bounded = true;   // false without a contexts quota: per_app_contexts is then
                                  // only what its handles hold open, and nothing bounds the rest
  uint64_t per_app = 0;           // its connections (quotas.connections of them) and contexts

  // What `connections` connections and `apps` apps can make the daemon hold beyond its base
  // and the KV budget.
  uint64_t clients(uint64_t connections, uint64_t apps) const {
    return connections * per_connection + apps * per_app_contexts;
  }
};

// The bound for `options` (quotas: its defaults), contexts of at most `n_ctx` tokens of a
// vocabulary whose longest token text is `max_piece_bytes` (Tokenizer::max_piece_bytes).
MemoryBound memory_bound(const ServerOptions& options, uint32_t n_ctx, uint32_t max_piece_bytes);

}  // namespace llmsvc::service
