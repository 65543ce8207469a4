#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages llmsvc builds and tests with (only those missing).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config python3 python3-pip python3-venv
      libhwy-dev libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
      libzstd-dev liblz4-dev libxxhash-dev liburing-dev libsystemd-dev libtomlplusplus-dev libseccomp-dev
      libsodium-dev   # base64 of systemd's memory-pressure trigger (llmsvcd)
      clang-14 libclang-rt-14-dev bible-kjv-text default-jdk-headless junit5 abigail-tools
      python3-matplotlib   # the trace benchmark's plots (bench/policy/run_trace_bench.py)
      python3-pytest python3-setuptools python3-wheel  # the Python binding's tests and wheel
      ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd clinfo)  # OpenCL: the loader, headers, PoCL (CPU) for CI
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install_deps: installing ${missing[*]}" >&2
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
