// SPDX-License-Identifier: Apache-2.0
// Include first in every Highway-dispatched kernel file (before any hwy header) so that all
// of them build the same target list, including AVX3_DL (AVX-512 VNNI), which Highway 1.0.3
// leaves out unless asked.
#pragma once

#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif

// True (in #if, inside per-target code) on targets whose f32 <-> f16 instructions round to
// nearest even and handle inf/NaN (F16C, NEON); Highway 1.0 emulates them elsewhere, with
// truncation. Evaluated where it is used, so it follows HWY_TARGET through foreach_target.
#define LLMSVC_HWY_NATIVE_F16 \
  (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_NEON)
