#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Elastic levels on a model large enough for a GPU's decode step to be bandwidth-bound: makes a
# random-weight Q4_0 model of a real shape where it runs (tools/bench/make_random_gguf.py; a 7B
# file is too large to carry to the lent GPU machine), elastifies it in a random unit order
# (its weights mean nothing, only its shape and bytes count; 16 calibration tokens are enough
# to score layers), and runs bench_levels on it. Perplexities of such a model mean nothing;
# the TTFT, TPOT and switch figures are what a trained model of the shape would show.
#   bench/opencl/levels_at_scale.sh BUNDLE SHAPE WORKDIR [bench_levels options...]
# BUNDLE: a staged bundle (bench/opencl/stage.sh) with llmsvc and bench_levels.
# Needs python3 (or $PYTHON) with numpy, and the PyPI package gguf (or tools/elastify/torch/vendor_gguf.sh's
# copy). Prints bench_levels' report; its JSON line goes to WORKDIR/levels-SHAPE.json.
set -euo pipefail
bundle="$1" shape="$2" work="$3"
shift 3
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
raw="$work/$shape-random.gguf" el="$work/$shape-random-elastic.gguf"
vendor="$root/tools/elastify/torch/_vendor"
if [ ! -s "$raw" ]; then
  PYTHONPATH="$vendor${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python3}" "$root/tools/bench/make_random_gguf.py" --shape "$shape" --out "$raw"
fi
if [ ! -s "$el" ]; then
  "$bundle/llmsvc" elastify "$raw" -o "$el" --score random --calib-tokens 16 --layer-tokens 16 --window 16 -q
fi
"$bundle/bench_levels" "$el" "$@" >"$work/levels-$shape.json"
