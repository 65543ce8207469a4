#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds llama.cpp's llama-bench with its CUDA backend for the card here (Hopper: sm_90), from
# the tarball bench/opencl/llamacpp_src.sh makes. Prints the program's path.
#   bench/opencl/build_llamacpp_cuda.sh SRC.tgz WORK_DIR [CUDA_ARCH]
set -euo pipefail
tgz="$(realpath "$1")" work="$2" arch="${3:-90}"
mkdir -p "$work" && cd "$work"
[ -d llama.cpp ] || tar xzf "$tgz"
cd llama.cpp
sed -i '/add_subdirectory(\(server\|mtmd\|tts\))/d' tools/CMakeLists.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >&2
cmake --build build --target llama-bench -j "$(nproc)" >&2
echo "$PWD/build/bin/llama-bench"
