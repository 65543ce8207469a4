// SPDX-License-Identifier: Apache-2.0
// Activation planning and placement on the real model graphs: tensors live at the same time
// never share bytes, memory is shared where lifetimes allow, and placement's copies appear
// exactly where a tensor crosses between memory spaces.
#include <gtest/gtest.h>

#include <algorithm>

#include "hal/devices/device_registry.h"
#include "hal/graph_planner.h"
#include "hal/placement.h"
#include "runtime/core/graph/model_graph.h"
#include "tests/golden/golden_file.h"

namespace llmsvc {
namespace {

struct Interval {
  int first = -1, last = -1;
};

std::vector<Interval> lifetimes(const hal::Graph& g) {
  std::vector<Interval> life(g.tensors.size());
  for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
    auto touch = [&](int32_t t) {
      if (t < 0) return;
      if (life[t].first < 0) life[t].first = i;
      life[t].last = i;
    };
    for (int32_t t : g.ops[i].in) touch(t);
    for (int32_t t : g.ops[i].out) touch(t);
  }
  return life;
}

TEST(GraphPlan, TensorsLiveTogetherNeverShareBytesAndTheRestReuseThem) {
  for (const char* name : {"SmolLM2-135M-Instruct.Q4_1", "qwen2-Q4_K", "gemma3-Q8_0"}) {
    auto m = test::load_model(test::load_golden(name));
    ASSERT_TRUE(m.model) << name;
    const hal::Graph g = build_model_graph(m.model->config());
    const hal::Shape max{256, 256};
    const hal::ActivationPlan plan = hal::plan_activations(g, max, 1);
    const auto life = lifetimes(g);
    for (size_t a = 0; a < g.tensors.size(); ++a) {
      if (plan.offset[a] < 0) continue;
      const int64_t a_end = plan.offset[a] + g.tensors[a].bytes_at(max);
      EXPECT_LE(static_cast<uint64_t>(a_end), plan.arena_bytes[0]);
      for (size_t b = a + 1; b < g.tensors.size(); ++b) {
        if (plan.offset[b] < 0) continue;
        const bool live_together = life[a].first <= life[b].last && life[b].first <= life[a].last;
        const int64_t b_end = plan.offset[b] + g.tensors[b].bytes_at(max);
        const bool overlap = plan.offset[a] < b_end && plan.offset[b] < a_end;
        EXPECT_FALSE(live_together && overlap) << name << ": " << g.tensors[a].name << " and " << g.tensors[b].name;
      }
    }
    // A layer's tensors are dead by the next layer: the arena is about one layer's worth.
    EXPECT_LT(plan.arena_bytes[0] * 4, plan.naive_bytes) << name;
  }
}

TEST(GraphPlacement, ALayerSplitCopiesTheResidualStreamOnceAndAnOpSplitAtEachCrossing) {
  auto m = test::load_model(test::load_golden("SmolLM2-135M-Instruct.Q4_1"));
  ASSERT_TRUE(m.model);
  auto a = hal::open_device("cpu", hal::DeviceOptions{1});
  auto b = hal::open_device("cpu:1", hal::DeviceOptions{1});
  ASSERT_TRUE(a.ok() && b.ok());
  hal::Device* devices[] = {a->get(), b->get()};
  const ModelConfig& c = m.model->config();
  const hal::Graph g = build_model_graph(c);

  auto by_layer = hal::parse_placement("layers:10", c.n_layer, 2);
  ASSERT_TRUE(by_layer.ok());
  auto placed = hal::place(g, devices, *by_layer);
  ASSERT_TRUE(placed.ok()) << placed.status().message();
  EXPECT_EQ(placed->n_spaces, 2);
  EXPECT_EQ(placed->copies, 1);  // x into cpu:1 before layer 10; the rest follows it there
  for (const hal::Op& op : placed->graph.ops)
    if (op.layer >= 0) {
      EXPECT_EQ(op.device, op.layer < 10 ? 0 : 1) << hal::op_name(op.kind) << " of layer " << op.layer;
    }

  // Attention (and the K/V it stores) on the second device: q and k, v go over, attn comes back.
  auto by_op = hal::parse_placement("ops:attention+store_kv", c.n_layer, 2);
  ASSERT_TRUE(by_op.ok());
  auto placed_ops = hal::place(g, devices, *by_op);
  ASSERT_TRUE(placed_ops.ok());
  EXPECT_EQ(placed_ops->copies, 4 * c.n_layer);
  for (const hal::Op& op : placed_ops->graph.ops) {
    if (op.kind == hal::OpKind::copy) {
      // Every copy runs on the device that reads it and moves a tensor from the other space.
      EXPECT_NE(op.i[0], placed_ops->device_space[op.device]);
      EXPECT_EQ(placed_ops->graph.tensors[op.out[0]].space, placed_ops->device_space[op.device]);
    }
  }
}

TEST(GraphPlacement, ASpecThatNamesNothingIsAClearError) {
  for (const char* spec : {"layers:99", "layers:x", "ops:nothing", "ops:", "sideways"}) {
    auto r = hal::parse_placement(spec, 30, 2);
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_EQ(r.status().code(), Code::invalid_argument);
  }
  EXPECT_FALSE(hal::parse_placement("layers:3", 30, 1).ok());
  EXPECT_TRUE(hal::parse_placement("", 30, 1).ok());
}

}  // namespace
}  // namespace llmsvc
