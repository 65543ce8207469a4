// SPDX-License-Identifier: Apache-2.0
// CPU attention's dispatch: a set's passes compiled for every Highway target, and the public entry.
// The passes are attention_qk-inl.h, attention_softmax-inl.h and attention_pv-inl.h; the entry
// plans a call (attention_plan.h), sizes its scratch and runs the team on it.
#include "hal/cpu/attention.h"

#include <algorithm>
#include <cassert>

#include "hal/cpu/attention_plan.h"
#include "hal/host/hwy_targets.h"  // same target list as the kernels; before any hwy header

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hal/cpu/attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hal/cpu/attention_pv-inl.h"
#include "hal/cpu/attention_qk-inl.h"
#include "hal/cpu/attention_softmax-inl.h"

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {
namespace {  // see attention_simd-inl.h

// Prefill: the member takes sets first come, first served (tiles of unequal cost) and runs
// each alone.
template <class DF>
void RunSetsD(DF df, const Plan& p, float* ws, int32_t* wi, const uint16_t** wv, int64_t* macc) {
  SetView sv = carve(p, p.tile_tokens * p.group, ws, wi, wv);
  for (;;) {
    const int64_t i = p.next->fetch_add(1, std::memory_order_relaxed);
    if (i >= p.n_sets) return;
    const RowSet rs = prefill_set(p, i);
    build_set(p, rs, sv, kRowBlock);
    LoadQueries(df, p, rs, sv, 0, rs.count);
    ScoreSegs(df, p, rs, sv, 0, sv.n_seg);
    SoftmaxRows(df, p, sv, 0, rs.count);
    if (macc) AccumulateMass(p, sv, 0, rs.count, macc);
    PvUnits(df, p, rs, sv, 0, PvUnitCount(p, rs, static_cast<int>(hn::Lanes(df))));
  }
}

// The set of all rows, before the team starts on it (calling thread).
template <class DF>
void PrepareSharedD(DF df, const Plan& p, SetView& sv) {
  const RowSet rs(p, 0, p.n_tokens, 0, p.n_head_kv);
  build_set(p, rs, sv, kRowBlock);
  LoadQueries(df, p, rs, sv, 0, rs.count);
}

// Member ith of nth on the shared set: scores of its share of the chunks, then the softmax
// of its rows, then its output columns. Each phase reads what all members wrote before.
template <class DF>
void RunSharedD(DF df, const Plan& p, const SetView& sv, int ith, int nth, ThreadPool* pool) {
  const RowSet rs(p, 0, p.n_tokens, 0, p.n_head_kv);
  const auto [s0, s1] = ThreadPool::split(sv.n_seg, ith, nth);
  ScoreSegs(df, p, rs, sv, static_cast<int>(s0), static_cast<int>(s1));
  if (pool) pool->barrier();
  const auto [r0, r1] = ThreadPool::split(rs.count, ith, nth);
  SoftmaxRows(df, p, sv, static_cast<int>(r0), static_cast<int>(r1));
  if (p.mass_acc) AccumulateMass(p, sv, static_cast<int>(r0), static_cast<int>(r1), p.mass_acc[ith]);
  if (pool) pool->barrier();
  const auto [u0, u1] = ThreadPool::split(PvUnitCount(p, rs, static_cast<int>(hn::Lanes(df))), ith, nth);
  PvUnits(df, p, rs, sv, u0, u1);
}

void RunSets(const Plan& p, float* ws, int32_t* wi, const uint16_t** wv, int64_t* macc) {
  WithTagDividing(p.head_dim, [&](auto df) { RunSetsD(df, p, ws, wi, wv, macc); });
}
void PrepareShared(const Plan& p, SetView& sv) {
  WithTagDividing(p.head_dim, [&](auto df) { PrepareSharedD(df, p, sv); });
}
void RunShared(const Plan& p, const SetView& sv, int ith, int nth, ThreadPool* pool) {
  WithTagDividing(p.head_dim, [&](auto df) { RunSharedD(df, p, sv, ith, nth, pool); });
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace llmsvc::hal::cpu {
HWY_EXPORT(RunSets);
HWY_EXPORT(PrepareShared);
HWY_EXPORT(RunShared);

// The scratch's buffers, for the entry below (AttentionScratch keeps them private).
struct AttentionAccess {
  static std::vector<std::vector<float>>& per_thread(AttentionScratch& s) { return s.per_thread_; }
  static std::vector<std::vector<int32_t>>& per_thread_i(AttentionScratch& s) { return s.per_thread_i_; }
  static std::vector<float>& shared(AttentionScratch& s) { return s.shared_; }
  static std::vector<int32_t>& shared_i(AttentionScratch& s) { return s.shared_i_; }
  static std::vector<std::vector<const uint16_t*>>& per_thread_v(AttentionScratch& s) { return s.per_thread_v_; }
  static std::vector<const uint16_t*>& shared_v(AttentionScratch& s) { return s.shared_v_; }
  static std::atomic<int64_t>& next_set(AttentionScratch& s) { return s.next_set_; }
  static std::vector<std::vector<int64_t>>& mass(AttentionScratch& s) { return s.mass_; }
  static std::vector<int64_t*>& mass_ptrs(AttentionScratch& s) { return s.mass_ptrs_; }
  static std::vector<int32_t>& gkoff(AttentionScratch& s) { return s.gkoff_; }
};

namespace {

// Scratch indexed by key grows in steps of kKeyStep keys: a context one token longer each
// decode step would otherwise reallocate it at every step.
constexpr size_t kKeyStep = 4096;
template <class V>
void reserve_keys(V& v, int64_t n_keys) {
  const size_t n = static_cast<size_t>(n_keys);
  if (v.capacity() < n) v.reserve((n + kKeyStep - 1) / kKeyStep * kKeyStep);
}

}  // namespace

void attention(const float* q, int n_tokens, const int32_t* q_pos, const KvChunkView* chunks, int n_chunks,
               const AttentionParams& params, float* out, ThreadPool& pool, AttentionScratch& scratch) {
  assert(params.n_head_kv > 0 && params.n_head % params.n_head_kv == 0 && params.head_dim > 0);
  if (n_tokens <= 0) return;
  attn::Plan p = attn::plan_call(q, n_tokens, q_pos, chunks, n_chunks, params, out);
  const int nth = attn::team_size(p, pool.size());
  p.next = &AttentionAccess::next_set(scratch);
  p.next->store(0, std::memory_order_relaxed);

  // Key mass: every member sums into its own row, zeroed here, reduced below.
  bool want_mass = false;
  for (int c = 0; c < n_chunks; ++c) want_mass |= chunks[c].mass != nullptr && chunks[c].n_tokens > 0;
  if (want_mass) {
    auto& gk = AttentionAccess::gkoff(scratch);
    gk.resize(static_cast<size_t>(n_chunks) + 1);
    gk[0] = 0;
    for (int c = 0; c < n_chunks; ++c) gk[c + 1] = gk[c] + std::max(0, chunks[c].n_tokens);
    auto& rows = AttentionAccess::mass(scratch);
    auto& ptrs = AttentionAccess::mass_ptrs(scratch);
    if (rows.size() < static_cast<size_t>(nth)) rows.resize(nth);
    ptrs.resize(nth);
    for (int t = 0; t < nth; ++t) {
      reserve_keys(rows[t], p.n_keys);
      rows[t].assign(static_cast<size_t>(p.n_keys), 0);
      ptrs[t] = rows[t].data();
    }
    p.gkoff = gk.data();
    p.mass_acc = ptrs.data();
  }

  if (attn::shares_one_set(p, nth)) {  // decode: the team shares one set of all rows
    const int all_rows = n_tokens * p.n_head;
    auto& f = AttentionAccess::shared(scratch);
    auto& i = AttentionAccess::shared_i(scratch);
    auto& v = AttentionAccess::shared_v(scratch);
    if (f.size() < attn::set_floats(p, all_rows)) f.resize(attn::set_floats(p, all_rows));
    if (i.size() < attn::set_ints(p, all_rows)) i.resize(attn::set_ints(p, all_rows));
    reserve_keys(v, p.n_keys);
    if (v.size() < static_cast<size_t>(p.n_keys)) v.resize(p.n_keys);
    attn::SetView sv = attn::carve(p, all_rows, f.data(), i.data(), v.data());
    HWY_DYNAMIC_DISPATCH(PrepareShared)(p, sv);
    const auto run_shared = HWY_DYNAMIC_DISPATCH(RunShared);
    if (nth == 1) {
      run_shared(p, sv, 0, 1, nullptr);
    } else {
      pool.run([&](int ith, int n) { run_shared(p, sv, ith, n, &pool); });
    }
  } else {
    const int set_rows = p.tile_tokens * p.group;
    auto& per_thread = AttentionAccess::per_thread(scratch);
    auto& per_thread_i = AttentionAccess::per_thread_i(scratch);
    auto& per_thread_v = AttentionAccess::per_thread_v(scratch);
    if (per_thread.size() < static_cast<size_t>(nth)) per_thread.resize(nth);
    if (per_thread_i.size() < static_cast<size_t>(nth)) per_thread_i.resize(nth);
    if (per_thread_v.size() < static_cast<size_t>(nth)) per_thread_v.resize(nth);
    for (int t = 0; t < nth; ++t) {
      if (per_thread[t].size() < attn::set_floats(p, set_rows)) per_thread[t].resize(attn::set_floats(p, set_rows));
      if (per_thread_i[t].size() < attn::set_ints(p, set_rows)) per_thread_i[t].resize(attn::set_ints(p, set_rows));
      reserve_keys(per_thread_v[t], p.n_keys);
      if (per_thread_v[t].size() < static_cast<size_t>(p.n_keys)) per_thread_v[t].resize(p.n_keys);
    }
    const auto run_sets = HWY_DYNAMIC_DISPATCH(RunSets);
    auto macc = [&](int t) { return p.mass_acc ? p.mass_acc[t] : nullptr; };
    auto run = [&](int t) { run_sets(p, per_thread[t].data(), per_thread_i[t].data(), per_thread_v[t].data(), macc(t)); };
    if (nth == 1) {
      run(0);
    } else {
      pool.run([&](int ith, int) { run(ith); });
    }
  }

  if (!want_mass) return;
  for (int c = 0; c < n_chunks; ++c) {
    float* mass = chunks[c].mass;
    if (!mass) continue;
    for (int j = 0; j < chunks[c].n_tokens; ++j) {
      int64_t sum = 0;  // exact: integer units of 2^-24
      for (int t = 0; t < nth; ++t) sum += p.mass_acc[t][p.gkoff[c] + j];
      mass[j] = static_cast<float>(static_cast<double>(mass[j]) + static_cast<double>(sum) * 0x1p-24);
    }
  }
}

}  // namespace llmsvc::hal::cpu
#endif  // HWY_ONCE
