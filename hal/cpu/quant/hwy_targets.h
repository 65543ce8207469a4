// Include first in every Highway-dispatched kernel file (before any hwy header) so that all
// of them build the same target list, including AVX3_DL (AVX-512 VNNI), which Highway 1.0.3
// leaves out unless asked.
#pragma once

#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
