// SPDX-License-Identifier: Apache-2.0
// Shared by every llmsvc program: views as (buffer, byte offset) pairs and f16 storage through
// vload_half / vstore_half (core OpenCL C; no cl_khr_fp16 needed).

// The typed pointer of a view: a buffer and a byte offset (a ulong argument after it).
#define VIEW(type, buf, off) ((__global type*)((__global uchar*)(buf) + (off)))
#define CVIEW(type, buf, off) ((__global const type*)((__global const uchar*)(buf) + (off)))
