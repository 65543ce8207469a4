#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks the ABI of a built libllmsvc.so.1 against the committed baseline (abi/libllmsvc.abi).
#
#   abi_check.sh [LIBRARY]            compare (default LIBRARY: build/release/runtime/api/libllmsvc.so.1)
#   abi_check.sh --update [LIBRARY]   rewrite the baseline from LIBRARY
#
# The ABI is read with abidw from the library's DWARF (runtime/api/c_api.cpp, which defines
# every llmsvc_* function, is built with -g in every build type), limited to what the public
# header defines and the exported functions reach. abidiff then compares it with the baseline:
#  - exit 0: no change, or only changes llmsvc.h's rules allow: new functions
#    (abi/compatible.abignore), new enumerators, and fields appended to a struct that starts
#    with struct_size (checked here: every old field keeps its name, type and offset, every new
#    one lies past the old size). The report is printed; --update records them;
#  - exit 1: any other change (abidiff's exit bit 8, ABIDIFF_ABI_INCOMPATIBLE_CHANGE, for a
#    removed function; bit 4 left once the allowed changes are suppressed, for a changed
#    signature or struct layout, a removed, renamed or renumbered enumerator), a non-llmsvc_
#    symbol in the ABI, an exported function without debug info, or an abidw/abidiff error;
#  - exit 77: abidw/abidiff are not installed (CTest's skip code; install_deps.sh installs
#    abigail-tools, so CI always runs the check).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
baseline=$root/abi/libllmsvc.abi
allowed=$root/abi/compatible.abignore

update=0
if [ "${1:-}" = "--update" ]; then
  update=1
  shift
fi
lib=${1:-$root/build/release/runtime/api/libllmsvc.so.1}

for tool in abidw abidiff; do
  if ! command -v "$tool" >/dev/null; then
    echo "abi_check: $tool not found (Debian package abigail-tools; tools/scripts/install_deps.sh installs it): skipped" >&2
    exit 77
  fi
done
if [ ! -f "$lib" ]; then
  echo "abi_check: no library at $lib (build it first: tools/scripts/build.sh release)" >&2
  exit 1
fi

work=$(mktemp -d /tmp/llmsvc-abi-XXXXXX)
trap 'rm -rf "$work"' EXIT

# The dump must not depend on where or how the library was built, so that a baseline made in
# one build directory compares equal in another: no source locations, corpus path,
# compilation directory or DT_NEEDED list (build configuration, not API); hashed type ids, so
# an addition does not renumber every type. The translation unit's path is made relative to
# the repository (it is absolute, or relative to the build directory under ccache).
abidw --headers-dir "$root/include/llmsvc" --drop-private-types --exported-interfaces-only \
  --no-show-locs --no-corpus-path --no-comp-dir-path --no-elf-needed --type-id-style hash \
  --out-file "$work/raw.abi" "$lib"
sed -E "s#(<abi-instr [^>]*path=')[^']*/(runtime/api/[^']*')#\1\2#" "$work/raw.abi" >"$work/new.abi"

# The version script exports llmsvc_* only; anything else in the ABI is a leak.
symbols=$(grep -oE "<elf-symbol name='[^']*'" "$work/new.abi" | sed -E "s/.*name='([^']*)'/\1/" || true)
if [ -z "$symbols" ]; then
  echo "abi_check: abidw found no exported symbols in $lib" >&2
  exit 1
fi
bad=0
for s in $symbols; do
  if [[ $s != llmsvc_* ]]; then
    echo "abi_check: $lib exports '$s', which is not an llmsvc_ symbol (runtime/api/llmsvc.map)" >&2
    bad=1
  elif ! grep -qE "elf-symbol-id='$s[@']" "$work/new.abi"; then
    # Without DWARF abidw knows the symbol but not its signature, which then goes unchecked.
    echo "abi_check: '$s' is exported but has no debug info: define it in runtime/api/c_api.cpp" \
      "or c_api_info.cpp (built with -g), or give its file -g in runtime/api/CMakeLists.txt" >&2
    bad=1
  fi
done
[ "$bad" = 0 ] || exit 1

if [ "$update" = 1 ]; then
  mkdir -p "$(dirname "$baseline")"
  cp "$work/new.abi" "$baseline"
  echo "abi_check: wrote $baseline ($(echo "$symbols" | wc -l) functions) from $lib"
  exit 0
fi
if [ ! -f "$baseline" ]; then
  echo "abi_check: no baseline at $baseline (make one: $0 --update $lib)" >&2
  exit 1
fi

# A struct that starts with struct_size may grow at the end (llmsvc.h's rule; abidiff alone
# cannot tell that from other layout changes): when every field of the baseline's struct is
# still there with the same name, type and offset, and every new field lies past the old size,
# the struct gets a suppression of its own; any other change to it stays for abidiff to report.
python3 - "$baseline" "$work/new.abi" >"$work/appended.abignore" <<'PY'
import sys
import xml.etree.ElementTree as ET

def versioned_structs(path):
    structs = {}
    for c in ET.parse(path).iter("class-decl"):
        name = c.get("name")
        if c.get("is-struct") != "yes" or c.get("is-declaration-only") == "yes" or name in structs:
            continue
        fields = [(m.get("layout-offset-in-bits"), v.get("name"), v.get("type-id"))
                  for m in c.findall("data-member") for v in m.findall("var-decl")]
        if fields and fields[0][:2] == ("0", "struct_size"):
            structs[name] = (int(c.get("size-in-bits", "0")), fields)
    return structs

old_structs, new_structs = versioned_structs(sys.argv[1]), versioned_structs(sys.argv[2])
for name, (size, fields) in sorted(old_structs.items()):
    if name not in new_structs or new_structs[name] == (size, fields):
        continue
    new_fields = new_structs[name][1]
    added = new_fields[len(fields):]
    if new_fields[:len(fields)] != fields or not added:
        continue  # not a pure append: abidiff reports it
    # A new field in the old tail padding lies inside an old caller's struct_size, in bytes
    # that caller never set; only a field named padding* (never read or written) may fill it.
    if all(int(f[0]) >= size or f[1].startswith("padding") for f in added):
        names = ", ".join(f[1] for f in added)
        print(f"# {name}: appended {names}\n[suppress_type]\n  type_kind = struct\n  name = {name}\n")
    else:
        print(f"abi_check: {name}: a new field lies in the old struct's tail padding (before bit {size}), "
              "inside an old caller's struct_size: put an explicit padding field before it", file=sys.stderr)
PY
grep '^# ' "$work/appended.abignore" | sed 's/^# /abi_check: compatible: /' || true

set +e
# Every difference, for the reader (bit 4 alone may be an allowed addition).
abidiff "$baseline" "$work/new.abi" >"$work/report.txt" 2>&1
full=$?
# The verdict: the same comparison with the allowed changes suppressed.
abidiff --suppressions "$allowed" --suppressions "$work/appended.abignore" \
  "$baseline" "$work/new.abi" >"$work/verdict.txt" 2>&1
verdict=$?
set -e
if [ $((full & 3)) != 0 ] || [ $((verdict & 3)) != 0 ]; then
  echo "abi_check: abidiff failed (exit $full / $verdict):" >&2
  cat "$work/report.txt" "$work/verdict.txt" >&2
  exit 1
fi

same_text=0
cmp -s "$baseline" "$work/new.abi" && same_text=1
if [ "$full" != 0 ]; then
  cat "$work/report.txt"
elif [ "$same_text" = 0 ]; then
  # abidiff filters harmless changes (a new enumerator, a renamed parameter) out by default.
  abidiff --harmless "$baseline" "$work/new.abi" || true
fi

if [ "$verdict" != 0 ]; then
  if [ $((verdict & 8)) != 0 ]; then
    why="an incompatible ABI change (abidiff: ABIDIFF_ABI_INCOMPATIBLE_CHANGE)"
  else
    why="an ABI change other than new functions, new enumerators or fields appended to a versioned struct"
  fi
  echo "abi_check: FAIL: $lib has $why against abi/libllmsvc.abi (report above)." >&2
  echo "abi_check: existing apps would break; a deliberate break needs a new major version" \
    "(SOVERSION, LLMSVC_1 in llmsvc.map, LLMSVC_ABI_VERSION_MAJOR) and then: $0 --update" >&2
  exit 1
fi
if [ "$full" != 0 ]; then
  echo "abi_check: ok: only compatible additions (report above); record them with: $0 --update"
elif [ "$same_text" = 0 ]; then
  echo "abi_check: ok: only harmless changes (report above); record them with: $0 --update"
else
  echo "abi_check: ok: $lib matches abi/libllmsvc.abi ($(echo "$symbols" | wc -l) functions)"
fi
