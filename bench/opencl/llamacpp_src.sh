#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The peer's source for a machine that cannot reach PyPI: llama.cpp as vendored in the sdist of
# the PyPI package llama-cpp-python, less what a CUDA build of llama-bench never reads (the
# bundled vocabularies, docs, the other GPU backends), as one tarball (about 4 MB).
#   bench/opencl/llamacpp_src.sh OUT.tgz [VERSION]
set -euo pipefail
out="$(realpath -m "$1")" version="${2:-0.3.16}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --no-binary :all: -d "$tmp" "llama-cpp-python==$version"
tar xzf "$tmp"/llama_cpp_python-"$version".tar.gz -C "$tmp"
src="$tmp/llama_cpp_python-$version/vendor/llama.cpp"
rm -rf "$src"/{models,docs,media,poetry.lock,convert_hf_to_gguf.py} "$src"/tools/{server,mtmd,tts} \
       "$src"/ggml/src/ggml-{cann,metal,sycl,vulkan,opencl,musa,kompute,webgpu,zdnn,hip}
tar czf "$out" -C "$(dirname "$src")" llama.cpp
ls -la "$out"
