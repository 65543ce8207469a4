#!/usr/bin/env bash
# Creates (or reuses) the Python venv that runs llama.cpp itself, through the
# PyPI package llama-cpp-python PINNED to 0.3.16, built from source.
# The golden files under tests/data/golden/ are produced with exactly this build.
#
#   tools/golden/setup_llamacpp.sh          # idempotent; prints the venv path
#   LLMSVC_LLAMACPP_VENV=/some/dir tools/golden/setup_llamacpp.sh
#
# Needs: python3 (with venv), a C/C++ compiler, cmake is pulled by pip's build
# isolation. Network access to PyPI on the first run only.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.16
GGUF_VERSION=0.17.1
VENV="${LLMSVC_LLAMACPP_VENV:-$HOME/.cache/llmsvc/venv-llamacpp}"
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
# Source distribution only: the wheel is compiled here with GGML_NATIVE=ON.
"$VENV/bin/pip" download --no-deps --no-binary :all: -d "$DL" \
    "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}"
SDIST="$(ls "$DL"/llama_cpp_python-${LLAMA_CPP_PYTHON_VERSION}.tar.gz)"

CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF" \
    "$VENV/bin/pip" install "$SDIST" numpy "gguf==${GGUF_VERSION}" jinja2

have_right_version || { echo "llama-cpp-python ${LLAMA_CPP_PYTHON_VERSION} did not install correctly" >&2; exit 1; }
echo "$VENV"
