// SPDX-License-Identifier: Apache-2.0
// Forward: runs the model's op graph (runtime/core/graph/model_graph.h) over a context's
// chunked KV cache, on one device or placed across several.
//
// Tokens are processed in micro-batches; each layer's new K/V rows are written in place into
// the sequence's chunks (never copied), then attention runs over the chunk list. The graph is
// placed and its activations planned once, for the largest micro-batch; each step shape
// (tokens, output rows) is prepared once into a list of resolved steps (pointers, sizes,
// weights) and reused, so a decode step does no planning and allocates nothing.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "hal/device.h"
#include "hal/graph_planner.h"
#include "hal/placement.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/graph/device_threads.h"
#include "runtime/core/model/lora_adapter.h"
#include "runtime/core/model/model.h"

namespace llmsvc {

// What the graph runs did, per device and in all.
struct GraphFigures {
  struct Device {
    std::string name;
    uint64_t ops = 0;             // steps run there (copies included)
    uint64_t bytes = 0;           // activation bytes its steps wrote (copies included)
    uint64_t transfers = 0;       // copies into its memory
    uint64_t transfer_bytes = 0;
    double busy_s = 0;            // time running its steps
  };
  std::vector<Device> devices;
  uint64_t preparations = 0;      // step shapes prepared (a new shape, or one evicted and met again)
  uint64_t runs = 0;              // micro-batches run
  double run_s = 0;               // wall time of those runs (idle of a device = run_s - its busy_s)
  uint64_t arena_bytes = 0;       // activation memory, every space
  uint64_t naive_bytes = 0;       // what one buffer per tensor would have taken
  int copies_per_step = 0;        // transfers the placement put in one step
};

class Forward {
 public:
  // Tokens per micro-batch unless a device asks for more (batch_for).
  static constexpr int kDefaultBatch = 256;
  // One device: every op there. max_batch: tokens per micro-batch (activations are planned for it).
  Forward(const Model& model, hal::Device& device, int max_batch = kDefaultBatch);
  // Several devices (the embedder's order, at most kMaxDevices), placed by `rule`; weights of
  // ops placed off the model's device are prepared on theirs here. Code::unsupported when an
  // op has no device. Each device then runs its steps on a thread of its own, concurrently
  // where the steps do not depend on each other (DeviceThreads); a recompute with a layer hook
  // runs them in order.
  static Result<std::unique_ptr<Forward>> create(const Model& model, std::span<hal::Device* const> devices,
                                                 const hal::PlacementRule& rule, int max_batch = kDefaultBatch);
  // The micro-batch for these devices: kDefaultBatch tokens, or more where a device's matmuls
  // need more to fill it (hal::Capabilities::batch_tokens).
  static int batch_for(std::span<hal::Device* const> devices);
  ~Forward();

  // Evaluates `tokens` at positions [pos0, pos0 + n) of `seq`, which must already hold
  // positions [0, pos0). Logits: of the last token only (n_vocab floats), or of every
  // token (n * n_vocab) when all_logits. Attention mass is tracked (KvSequence::mass) unless
  // set_mass_tracking(false).
  // Code::out_of_memory if the KV budget is exhausted or a device's memory is full.
  Status eval(policy::KvSequence& seq, std::span<const int32_t> tokens, int pos0, bool all_logits,
              std::vector<float>& logits);

  // Recomputes the K/V of tokens at arbitrary increasing `positions` (the chunks of a
  // context that were dropped), attending causally to every position < n_valid that the
  // sequence holds or that this call computes. Their chunks must be resident f16. No
  // logits, no attention mass.
  //
  // before_layer(il), when given, runs before layer il of the first micro-batch: the
  // swap-recompute pipeline waits there for layer il of the chunks it loads (which the
  // attention reads) and starts reading layer il + 1, so I/O overlaps compute. A non-OK
  // status stops the recompute and is returned.
  using LayerHook = std::function<Status(int layer)>;
  Status recompute(policy::KvSequence& seq, std::span<const int32_t> tokens, std::span<const int32_t> positions,
                   int n_valid, const LayerHook& before_layer = {});

  // Prepares the step shape of `tokens` tokens with `outputs` output rows ahead of its first
  // use (what a device that compiles graphs wants before a latency-bound call); eval and
  // recompute prepare what they meet anyway. Code::invalid_argument past max_batch.
  Status prepare(int tokens, int outputs);

  int max_batch() const { return max_batch_; }

  // Elastic execution: later evals and recomputes run the model's elastic level `level` (an
  // index into Model::elastic()->levels; -1 or the last: the full model). Switching costs no
  // copy: each level's steps name prefix views of the same weights, prepared once per shape.
  // Code::unsupported when the model has no levels or the device cannot slice weights
  // (Model::levels_status), or the graph is placed on several devices.
  Status set_level(int level);
  // What set_level(level) would answer, without setting it (no state touched: callable without
  // the lock that serializes evaluations).
  Status check_level(int level) const;
  int level() const { return level_; }

  // LoRA adapters (runtime/core/model/lora_adapter.h): `choices` are the adapters later evals
  // may choose between with set_adapter (each made for this forward's model; they must outlive
  // it or the next set_adapters). Re-places the graph with the union of their matrices (and the
  // recovery adapters of the model's levels, always included) and drops every prepared step
  // list; the chosen adapter goes back to none. Code::unsupported on several devices;
  // Code::invalid_argument for a null adapter or one made for another model.
  Status set_adapters(std::vector<const LoraAdapter*> choices);
  // Later evals and recomputes add adapter `index` of the choices (-1: none). Switching costs
  // no copy (each (level, adapter) has its own prepared steps). Code::invalid_argument for an
  // index out of range; at a level below the full one, the adapter's levels_status.
  Status set_adapter(int index);
  // What set_adapter(index) would answer, without setting it (reads the running level: call
  // with the evaluation lock held).
  Status check_adapter(int index) const;
  // Whether adapter `index` (-1: none) can run at level `level` (-1: the full model), from the
  // adapters set (callable without the evaluation lock, as check_level).
  Status check_level_adapter(int level, int index) const;
  int adapter() const { return adapter_; }
  // Whether the running elastic level adds its recovery adapter (Model::recovery_adapter) when
  // the model has one (on by default; off for benchmarks and comparisons).
  void set_recovery(bool on);
  // Whether LoRA branches run inside their base matmul where the device fuses them (the CPU:
  // one parallel region, the same bits; on by default), or as the graph's separate ops (a
  // test compares the two).
  void set_fuse_lora(bool on);
  // For offline tools (elastify's layer scores, the layer-dropping baseline): the layers whose
  // ops are left out (the residual stream passes them unchanged). Their KV is not written, so
  // a sequence evaluated with a layer skipped must not be continued with it.
  void set_skipped_layers(std::vector<bool> skip);
  // For offline tools: called after each FFN activation (gated, before the down projection)
  // and each attention output on a host-visible device, with the step's rows; forces steps
  // to run in order.
  enum class TapPoint { ffn_act, attention };
  using Tap = std::function<void(int layer, TapPoint point, const float* data, int rows, int64_t cols)>;
  void set_tap(Tap tap) { tap_ = std::move(tap); }
  // Whether eval adds each key's attention mass to the sequence (on by default). Only the
  // policy's compression reads it: where that is off, tracking it is attention work for nothing
  // (on a GPU a kernel per layer and a read-back per step).
  void set_mass_tracking(bool on) { track_mass_ = on; }
  // Where the KV chunks of the sequences this forward runs must live: the memory the device
  // that runs attention keeps them in (hal::Device::kv_memory; a GPU's arena).
  hal::MemoryPool& kv_memory() const;
  const GraphFigures& figures() const { return figures_; }
  // The placed graph (ops with their devices, copies inserted).
  const hal::Graph& graph() const { return placed_.graph; }

 private:
  struct Step;
  struct Prepared;
  struct Run;  // one micro-batch's bindings
  Forward(const Model& model, std::vector<hal::Device*> devices, int max_batch);
  Status place(const hal::PlacementRule& rule);
  // The adapter slot `slot` runs now (0: the chosen one, 1: the level's recovery adapter), or null.
  const LoraAdapter* slot_adapter(int slot) const;
  // The columns of layer `layer`'s query heads at the running level (its kept heads).
  int64_t query_cols(int layer) const;
  // Whether this forward may run adapters (one device, the model's).
  bool on_model_device() const;
  Status ensure_arenas();
  Result<const Prepared*> prepared(const hal::Shape& shape);
  // Drops every prepared step list (what they were made from changed).
  void forget_prepared();
  Status run(const Prepared& p, const Run& r);
  // View-driven devices: the micro-batch bound before its steps, completed after them
  // (whatever `s` is: nothing stays in flight); returns s, or end()'s failure.
  Status bind(const Run& r);
  Status unbind(Status s);
  // For several devices: what each step must wait for on the others (conflicting reads and
  // writes of activation bytes, and the KV cache, which store_kv and attention both touch).
  void add_waits(Prepared& p, const std::vector<std::array<std::vector<std::array<int64_t, 3>>, 2>>& access) const;
  Status run_step(const Step& s, const Run& r);

  const Model& model_;
  std::vector<hal::Device*> devices_;
  const ModelConfig& cfg_;
  int max_batch_;
  Status init_;
  hal::PlacedGraph placed_;
  hal::ActivationPlan plan_;
  std::vector<hal::Buffer> arenas_;  // per space
  // Weights prepared on devices other than the model's: (device, weight id) -> weight.
  std::map<std::pair<int, int32_t>, std::unique_ptr<hal::PreparedWeight>> weights_;
  // View-driven devices (their memory not host-visible), and what they read from their own
  // memory: the embedding table per device, norm scales and biases per (device, param id).
  std::vector<int> view_devices_;
  std::map<int, std::unique_ptr<hal::PreparedWeight>> tables_;
  std::map<std::pair<int, int32_t>, std::unique_ptr<hal::PreparedWeight>> params_;
  std::vector<const hal::Buffer*> chunk_memory_;  // the bound micro-batch's KV chunks
  std::vector<hal::KvFormat> chunk_format_;
  std::vector<float*> chunk_mass_;
  using ShapeKey = std::array<int64_t, 4>;                 // (level, adapter, T, O)
  std::map<ShapeKey, std::unique_ptr<Prepared>> cache_;
  std::list<ShapeKey> cache_order_;                       // oldest first
  std::vector<int32_t> pos_;
  std::vector<std::vector<hal::KvChunkView>> views_;  // per device (attention's chunk list)
  std::unique_ptr<DeviceThreads> threads_;           // with several devices
  std::vector<double> busy_;                          // per device, of the last concurrent run
  std::vector<Status> step_failed_;                   // per device, its first failure in a concurrent run
  GraphFigures figures_;
  bool track_mass_ = true;
  int level_ = -1;             // -1: full
  hal::PlacementRule rule_;    // what the graph was placed by (set_adapters places it again)
  std::vector<const LoraAdapter*> choices_;
  int adapter_ = -1;           // index into choices_, -1: none
  bool recovery_ = true;
  bool fuse_lora_ = true;
  std::vector<bool> skip_;     // per layer (empty: none)
  Tap tap_;
};

}  // namespace llmsvc
