#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copies the pure-Python `gguf` package (llama.cpp's gguf-py, MIT) from a Python environment into
# tools/elastify/torch/_vendor/gguf (git-ignored), for a machine without it and without network:
# gpu_job.sh puts _vendor on PYTHONPATH. Carry the folder to that machine.
#   vendor_gguf.sh [PYTHON]   (default /work/venv-torch/bin/python)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${1:-/work/venv-torch/bin/python}
src=$("$py" -c 'import gguf, os; print(os.path.dirname(gguf.__file__))')
rm -rf "$here/_vendor/gguf"
mkdir -p "$here/_vendor"
cp -r "$src" "$here/_vendor/gguf"
rm -rf "$here/_vendor/gguf/__pycache__" "$here/_vendor/gguf/scripts"
# yaml is only for model-card metadata: let the package import without it.
sed -i 's/^import yaml$/try:\n    import yaml\nexcept ImportError:\n    yaml = None/' "$here/_vendor/gguf/metadata.py"
# Import check: numpy only (no sentencepiece, transformers, requests); from an empty folder.
(cd /tmp && PYTHONPATH="$here/_vendor" "$py" -c 'import sys, gguf, numpy; sys.exit(0 if gguf.__file__.startswith(sys.argv[1]) else 1)' "$here/_vendor") \
  && echo "vendored $src -> $here/_vendor/gguf ($(du -sh "$here/_vendor/gguf" | cut -f1))"
