// ContextState: one context inside the engine — its token history (the source of truth)
// and the KV sequence computed from it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "policy/kv_chunk_store.h"

namespace llmsvc {

struct ContextState {
  ContextState(std::string id_, policy::KvChunkStore& store) : id(std::move(id_)), kv(store) {}

  std::string id;
  std::string system_prompt;
  bool raw = false;
  bool busy = false;                // inside a call
  std::vector<int32_t> tokens;      // every token of the context, in order
  int n_evaluated = 0;              // tokens[0, n_evaluated) have K/V in `kv`
  int turns = 0;                    // completed user turns
  policy::KvSequence kv;
};

}  // namespace llmsvc
