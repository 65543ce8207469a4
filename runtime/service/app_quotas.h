// SPDX-License-Identifier: Apache-2.0
// AppQuotas: what each app may hold and run in llmsvcd (the [quotas] table of its
// configuration); 0 means no limit. Going past one is LLMSVC_ERR_QUOTA_EXCEEDED, and nothing
// of the app's state changes. QuotaTable: those limits for every app, with the overrides the
// configuration gives particular apps ([quotas.app.NAME], by uid or user name).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>

namespace llmsvc::service {

// The defaults are on, sized for a phone-class device (a few GiB of memory, a model shared by
// a few dozen apps): what one app may hold is bounded unless the configuration says 0.
struct AppQuotas {
  uint32_t contexts = 64;         // contexts the app holds, open or stored
  uint32_t context_tokens = 0;    // tokens one context holds (prompts, answers, chat template); 0: n_ctx
  uint32_t concurrent_calls = 8;  // calls in flight, queued or running, on all its connections
  uint32_t connections = 8;       // connections open at once (a further one: ERROR, closed)
  // Share of the KV budget its contexts hold resident together (the engine's kv_share): past
  // it the app's own chunks leave memory first. 0: none (only the budget).
  double kv_share = 0.5;
  // Bytes its contexts' chunk swap files take on storage together: a chunk past it is not
  // written (dropped, recomputed when next needed); calls never fail for it.
  uint64_t swap_bytes = 256ull << 20;
};

struct QuotaTable {
  AppQuotas defaults;                 // every app not named below
  std::map<uid_t, AppQuotas> by_uid;  // whole sets: keys an override leaves out keep the defaults

  const AppQuotas& of(uid_t uid) const {
    auto it = by_uid.find(uid);
    return it == by_uid.end() ? defaults : it->second;
  }
};

}  // namespace llmsvc::service
