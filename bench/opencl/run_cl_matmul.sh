#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench_cl_matmul on a GPU machine that has NVIDIA's driver but none of the build:
#   bench/opencl/run_cl_matmul.sh stage [BUILD_DIR]   here: the binary and the two libraries it
#                                                    needs beyond the system's into build/h100
#   bench/opencl/run_cl_matmul.sh run                 there (build/h100 carried): an ICD file for
#                                                    libnvidia-opencl, the GEMV geometries swept
#                                                    for Q4_0 decode, the int8 GEMV against the
#                                                    float one and its geometries, then every type
#                                                    and token count
set -euo pipefail
stage=build/h100
case "${1:-}" in
  stage)
    build="${2:-build/release}"
    mkdir -p "$stage"
    cp "$build/bench/opencl/bench_cl_matmul" "$stage/"
    for lib in libOpenCL.so.1 libxxhash.so.0; do
      cp -L "$(ldd "$build/bench/opencl/bench_cl_matmul" | awk -v l="$lib" '$1 == l {print $3}')" "$stage/"
    done
    ls -la "$stage"
    ;;
  run)
    lib=$(ldconfig -p | awk '/libnvidia-opencl.so.1/ {print $NF; exit}')
    [ -n "$lib" ] || lib=$(find / -xdev -name libnvidia-opencl.so.1 2>/dev/null | head -1)
    [ -n "$lib" ] || { echo "no libnvidia-opencl.so.1 on this machine" >&2; exit 1; }
    icd=$(mktemp -d)
    echo "$lib" >"$icd/nvidia.icd"
    export OCL_ICD_VENDORS="$icd" LD_LIBRARY_PATH="$PWD/$stage${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    nvidia-smi --query-gpu=name,clocks.max.memory,memory.total --format=csv,noheader || true
    # LLMSVC_CL_GEMV=lx,ly,nr,magic,s,u: items per row line, lines per work-group, rows per
    # item, nibbles through the mantissa (1) or converted (0), elements of a block per item,
    # steps loaded ahead.
    for g in 64,2,2,1,16,1 64,2,2,1,16,2 64,2,2,0,16,1 32,4,2,1,16,1 64,2,2,1,8,2 64,1,2,1,8,2 \
             128,1,2,1,16,2 32,4,2,1,32,1 32,4,4,1,8,2; do
      echo "gemv $g"
      LLMSVC_CL_GEMV=$g timeout 120 "$stage/bench_cl_matmul" --types=q4_0 --tokens=1
    done
    # The int8-activation GEMV (dp4a) against the float GEMV on the same weights, then its
    # geometry (LLMSVC_CL_GEMV_DP4A_SHAPE=lx,ly,nr: items per row line, lines per work-group,
    # rows per item).
    echo "int8 GEMV vs float GEMV"
    timeout 120 "$stage/bench_cl_matmul" --types=q4_0,q4_k,q8_0 --tokens=1,2,4 --ab
    for g in 64,2,2 32,4,2 64,2,4 128,1,2 32,2,4 64,4,1 128,2,1; do
      echo "dp4a $g"
      LLMSVC_CL_GEMV_DP4A_SHAPE=$g timeout 120 "$stage/bench_cl_matmul" --types=q4_0 --tokens=1
    done
    echo "all (default geometry)"
    timeout 300 "$stage/bench_cl_matmul" --types=q4_0,q4_1,q4_k,q8_0,q6_k --tokens=1,2,4,8,16,512
    ;;
  *)
    echo "usage: $0 stage [BUILD_DIR] | run" >&2
    exit 2
    ;;
esac
