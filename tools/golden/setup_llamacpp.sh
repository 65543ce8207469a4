#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Creates (or reuses) the Python venv that runs llama.cpp itself, through the PyPI package
# llama-cpp-python built from source: PINNED to 0.3.16 by default (the golden files under
# tests/data/golden/ are produced with exactly this build), or the newest release on PyPI
# for comparisons against today's llama.cpp (a venv of its own).
#
#   tools/golden/setup_llamacpp.sh                 # pinned; idempotent; prints the venv path
#   tools/golden/setup_llamacpp.sh --newest        # the newest llama-cpp-python
#   LLMSVC_LLAMACPP_VENV=/some/dir tools/golden/setup_llamacpp.sh
#
# Built for the machine it runs on (GGML_NATIVE) but without AMX: on Intel Xeon VMs whose
# CPUs report AMX, llama.cpp's AMX kernels die with SIGILL (the tiles are not usable there),
# so -mno-amx-* takes them out whatever -march=native enables (GCC honours explicit ISA
# flags over -march's, in any order). Without AMX the numerics are those of the AVX-512 or
# AVX2 paths, the same on every machine of that kind.
#
# Needs: python3 (with venv), a C/C++ compiler, cmake is pulled by pip's build
# isolation. Network access to PyPI on the first run only.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.16
GGUF_VERSION=0.17.1
DEFAULT_VENV="$HOME/.cache/llmsvc/venv-llamacpp"
if [ "${1:-}" = "--newest" ]; then
    # The newest release's number, from PyPI's index (pip index is experimental but stable enough).
    LLAMA_CPP_PYTHON_VERSION="$(python3 -m pip index versions llama-cpp-python 2>/dev/null |
        sed -n 's/^llama-cpp-python (\([^)]*\)).*/\1/p')"
    [ -n "$LLAMA_CPP_PYTHON_VERSION" ] || { echo "cannot read the newest llama-cpp-python from PyPI" >&2; exit 1; }
    DEFAULT_VENV="$HOME/.cache/llmsvc/venv-llamacpp-newest"
elif [ -n "${1:-}" ]; then
    echo "usage: setup_llamacpp.sh [--newest]" >&2
    exit 2
fi
VENV="${LLMSVC_LLAMACPP_VENV:-$DEFAULT_VENV}"
PY="$VENV/bin/python"

have_right_version() {
    [ -x "$PY" ] || return 1
    "$PY" - "$LLAMA_CPP_PYTHON_VERSION" "$GGUF_VERSION" <<'PYEOF' >/dev/null 2>&1
import sys, importlib.metadata as md
import llama_cpp, gguf, numpy, jinja2  # noqa: F401  (must all import)
assert llama_cpp.__version__ == sys.argv[1], llama_cpp.__version__
assert md.version("gguf") == sys.argv[2]
PYEOF
}

if have_right_version; then
    echo "llama-cpp-python ${LLAMA_CPP_PYTHON_VERSION} already present in $VENV"
    echo "$VENV"
    exit 0
fi

if [ ! -x "$PY" ]; then
    echo "creating venv $VENV"
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV"
fi

DL="$(mktemp -d)"
trap 'rm -rf "$DL"' EXIT
# Source distribution only: the wheel is compiled here (GGML_NATIVE=ON, AMX off: see above).
"$VENV/bin/pip" download --no-deps --no-binary :all: -d "$DL" \
    "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}"
SDIST="$(ls "$DL"/llama_cpp_python-${LLAMA_CPP_PYTHON_VERSION}.tar.gz)"

NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DCMAKE_C_FLAGS='$NO_AMX' -DCMAKE_CXX_FLAGS='$NO_AMX'" \
    "$VENV/bin/pip" install "$SDIST" numpy "gguf==${GGUF_VERSION}" jinja2

have_right_version || { echo "llama-cpp-python ${LLAMA_CPP_PYTHON_VERSION} did not install correctly" >&2; exit 1; }
echo "$VENV"
