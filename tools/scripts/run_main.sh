#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: install what is missing, fetch the default model, build, and ask the
# default model (embedded) for a short chat answer.
set -euo pipefail
cd "$(dirname "$0")/../.."
tools/scripts/install_deps.sh
tools/scripts/fetch_model.sh >/dev/null
tools/scripts/build.sh release
exec build/release/tools/cli/llmsvc run --max-tokens 64 "${@:-Write a haiku about the sea.}"
