#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Stages built programs for a machine that has none of the build (the lent GPU machine): each
# named program into OUT/, and the shared libraries they need beyond glibc and libstdc++
# (the ICD loader, Highway, xxHash, ...) into OUT/lib/.
#   bench/opencl/stage.sh BUILD_DIR OUT PROGRAM...   (PROGRAM relative to BUILD_DIR)
set -euo pipefail
build="$1" out="$2"
shift 2
mkdir -p "$out/lib"
for p in "$@"; do
  cp "$build/$p" "$out/"
  ldd "$build/$p" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
      *) cp -L -n "$lib" "$out/lib/" ;;
    esac
  done
done
du -sh "$out"
