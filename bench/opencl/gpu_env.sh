#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sourced on a GPU machine that has NVIDIA's driver but no ICD file for its OpenCL library:
# writes one (nvidia.icd naming libnvidia-opencl.so.1) and points the ICD loader at it, and
# puts a staged bundle's libraries (bench/opencl/stage.sh) on the library path.
#   . bench/opencl/gpu_env.sh BUNDLE_DIR
bundle="${1:?bundle directory}"
lib=$(ldconfig -p | awk '/libnvidia-opencl.so.1/ {print $NF; exit}')
[ -n "$lib" ] || lib=$(find / -xdev -name libnvidia-opencl.so.1 2>/dev/null | head -1)
[ -n "$lib" ] || { echo "gpu_env: no libnvidia-opencl.so.1 on this machine" >&2; return 1; }
icd_dir=$(mktemp -d)
echo "$lib" >"$icd_dir/nvidia.icd"
export OCL_ICD_VENDORS="$icd_dir"
export LD_LIBRARY_PATH="$(cd "$bundle" && pwd)/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
