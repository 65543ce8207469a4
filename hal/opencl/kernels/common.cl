// SPDX-License-Identifier: Apache-2.0
// Shared by every llmsvc program: views as (buffer, byte offset) pairs and f16 storage through
// vload_half / vstore_half (core OpenCL C; no cl_khr_fp16 needed).

// The typed pointer of a view: a buffer and a byte offset (a ulong argument after it).
#define VIEW(type, buf, off) ((__global type*)((__global uchar*)(buf) + (off)))
#define CVIEW(type, buf, off) ((__global const type*)((__global const uchar*)(buf) + (off)))

// x rounded to the nearest f16 (ties to even) and back, through f16 storage in a register:
// vstore_half_rte / vload_half are core OpenCL C, no cl_khr_fp16 needed.
inline float round_f16(float x) {
  ushort h;
  vstore_half_rte(x, 0, (__private half*)&h);
  return vload_half(0, (__private const half*)&h);
}
