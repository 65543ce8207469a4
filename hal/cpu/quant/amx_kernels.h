// Intel AMX (tile matrix multiply) int8 GEMM over panel-packed weights: the prefill path
// for groups of 16 tokens on CPUs with AMX-INT8 (Sapphire Rapids and later).
//
// The tile unit computes ggml's per-block lane sums (2 rows x 8 lanes x 16 tokens per
// TDPBUSD), AVX-512 ggml's FMAs on them: the same bits as the VNNI kernels and llama.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hal/cpu/quant/panel_kernels.h"

namespace llmsvc::hal::cpu {

// True when the CPU has AMX-INT8 + AVX-512, the OS granted this process the tile state
// (asked once, arch_prctl), and $LLMSVC_NO_AMX is unset. Cheap after the first call.
bool amx_available();
// Whether matmul uses AMX now (available and not disabled by set_amx_enabled(false)).
bool amx_enabled();
// Turns the AMX path off or back on (on only takes effect when available). For tests and
// A/B benchmarks; not synchronized with running matmuls.
void set_amx_enabled(bool enabled);

// Per-thread scratch bytes amx_panel_gemm needs for weights of `cols` columns.
size_t amx_scratch_bytes(int64_t cols);

// Computes tokens [g.t_begin, g.t_end) of a panel GEMM; both must be multiples of
// kTokenGroup (full token groups), and g.x must have its tile planes (ActQ8 `tiles`).
// scratch: amx_scratch_bytes(g.cols), 64-aligned.
void amx_panel_gemm(const PanelGemmArgs& g, uint8_t* scratch);

}  // namespace llmsvc::hal::cpu
