#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configures and builds one CMake preset (default: release).
set -euo pipefail
cd "$(dirname "$0")/../.."
preset="${1:-release}"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)" >&2
