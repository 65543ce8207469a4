// SPDX-License-Identifier: Apache-2.0
// The op graph: a model's forward pass as HAL ops over named tensors with symbolic dimensions.
//
// A tensor is [rows][cols] (row-major, f32 unless said): cols fixed, rows symbolic in the step's
// token count T or its output-row count O (Transformer-Lite's symbolic shapes), so one graph
// serves every step and shapes resolve with two multiplications. Ops name their weights and
// small parameters (norm scales, biases) by integer ids the graph's owner resolves when the
// graph is prepared; context length is the KV binding's business, resolved at run time.
// Placement (hal/placement.h) gives each op a device and each tensor a memory space and adds
// the transfers; the planner (hal/graph_planner.h) lays activations out by liveness.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "hal/op_kind.h"

namespace llmsvc::hal {

// What a step's symbolic dimensions are.
struct Shape {
  int64_t tokens = 0;   // T: tokens this step
  int64_t outputs = 0;  // O: rows that go on to the output (0 <= O <= T)
  bool operator==(const Shape&) const = default;
};

enum class Sym : uint8_t { one, tokens, outputs };

// n * (1, T or O).
struct Dim {
  Sym sym = Sym::one;
  int64_t n = 0;
  int64_t at(const Shape& s) const { return n * (sym == Sym::tokens ? s.tokens : sym == Sym::outputs ? s.outputs : 1); }
};
inline Dim T(int64_t n = 1) { return {Sym::tokens, n}; }
inline Dim O(int64_t n = 1) { return {Sym::outputs, n}; }

// Tensors the caller binds (host memory it owns); the rest are activations the planner places.
enum class TensorRole : uint8_t { activation, token_ids, positions, logits };

struct Tensor {
  std::string name;
  Dim rows;
  int64_t cols = 0;
  TensorRole role = TensorRole::activation;
  int space = 0;       // index of its memory space (placement); bound tensors live in the host's
  int logical = -1;    // for a copy made by placement: the tensor it mirrors in another space
  int64_t bytes_at(const Shape& s) const { return rows.at(s) * cols * 4; }  // ids and positions are 4 bytes too
};

inline constexpr int kNoTensor = -1;

struct Op {
  OpKind kind = OpKind::copy;
  int layer = -1;  // -1: before or after the layers
  Dim rows;        // rows it processes
  std::array<int32_t, 2> in{kNoTensor, kNoTensor};               // read (an in-place op's tensor is here and in out)
  std::array<int32_t, 3> out{kNoTensor, kNoTensor, kNoTensor};   // written
  std::array<int32_t, 3> weight{-1, -1, -1};                     // matmul / get_rows: weight ids
  int32_t param = -1;                                            // norm scale / bias id (-1: none)
  std::array<int32_t, 5> i{};                                    // op integers (see the builder)
  std::array<float, 2> f{};                                      // op floats
  double work = 0;  // flops per row (the builder's estimate, for placement)
  int device = 0;   // index into the placed devices
};

struct Graph {
  std::vector<Tensor> tensors;
  std::vector<Op> ops;

  int32_t add_tensor(std::string name, Dim rows, int64_t cols, TensorRole role = TensorRole::activation) {
    tensors.push_back(Tensor{std::move(name), rows, cols, role, 0, -1});
    return static_cast<int32_t>(tensors.size() - 1);
  }
  Op& add_op(OpKind kind, int layer, Dim rows) {
    ops.push_back(Op{});
    ops.back().kind = kind;
    ops.back().layer = layer;
    ops.back().rows = rows;
    return ops.back();
  }
};

}  // namespace llmsvc::hal
