#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the binding's wheel offline (the system's setuptools, no index), installs it into a
# fresh venv and uses it from there, the way bindings/python/README.md tells a user to:
#
#   wheel_check.sh PYTHON BINDING_DIR LIBLLMSVC
set -eu
if [ $# -ne 3 ]; then
  sed -n '2,7p' "$0" >&2
  exit 2
fi
python=$1 src=$2 lib=$3
dir=$(mktemp -d /tmp/llmsvc-py-wheel-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cp -r "$src" "$dir/src"  # setuptools writes build files beside the sources
"$python" -m pip wheel --quiet --no-deps --no-build-isolation --no-index -w "$dir/dist" "$dir/src"
wheel=$(ls "$dir"/dist/llmsvc-*.whl)
echo "# built $(basename "$wheel")"
"$python" -m venv "$dir/venv"
"$dir/venv/bin/python" -m pip install --quiet --no-deps --no-index "$wheel"
cd "$dir"  # not the source tree: the installed package is the one imported
LLMSVC_LIBRARY=$lib LLMSVC_STATE_DIR="$dir/state" "$dir/venv/bin/python" - <<'PY'
import llmsvc
assert "/venv/" in llmsvc.__file__, llmsvc.__file__  # the installed wheel, not the sources
with llmsvc.Service(n_threads=2) as svc, svc.new_context(system_prompt="Be brief.") as ctx:
    info = svc.model_info()
    reply = ctx.call("Say hi.", max_tokens=4)
    assert info.ready and reply.generated_tokens == len(reply.tokens) > 0
    print(f"# {info.architecture} {info.name!r}: {reply.text!r} ({reply.generated_tokens} tokens)")
    cid = ctx.id
svc = llmsvc.Service(n_threads=2)
svc.delete_context(cid)
svc.close()
import importlib.resources
assert importlib.resources.files("llmsvc").joinpath("py.typed").is_file()
print("# ok")
PY
