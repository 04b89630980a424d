#!/usr/bin/env bash
# Installs what building and testing causalbench needs beyond a Rust toolchain:
# clang, libelf and zlib headers and pkg-config for the eBPF recorder's BPF
# programs, bpftool (vmlinux.h), python3 with pip, Chromium (the headless browser
# the HTML leaderboard's test loads pages in, cli/tests/html.rs) and NVRTC (CUDA 13.0,
# from PyPI) so kernels compile to PTX without a CUDA toolkit, and Meta's Holistic
# Trace Analysis (pinned, from PyPI: baselines/hta/setup-hta.sh) so that the default
# `causalbench run` scores the third-party `hta-critical-path` beside the built-ins.
# Idempotent (a second run checks, installs nothing, and takes about a second);
# installs system packages only when run as root and something is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v python3 >/dev/null || need_apt+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
command -v cc >/dev/null || need_apt+=(build-essential)
command -v clang >/dev/null || need_apt+=(clang)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
command -v bpftool >/dev/null || need_apt+=(bpftool)
dpkg -s libelf-dev >/dev/null 2>&1 || need_apt+=(libelf-dev)
dpkg -s zlib1g-dev >/dev/null 2>&1 || need_apt+=(zlib1g-dev)
command -v chromium >/dev/null || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${need_apt[*]}" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >&2
  else
    echo "setup: missing system packages: ${need_apt[*]} (run as root, or: sudo apt-get install ${need_apt[*]})" >&2
    exit 1
  fi
fi

# NVRTC into a per-user cache that the kernels crate searches by itself.
bash kernels/setup-nvrtc.sh >/dev/null
# HTA and its pinned pandas/perfetto into a per-user cache that causalbench and the
# adapter search by themselves (baselines/hta/setup-hta.sh says where and why pinned).
bash baselines/hta/setup-hta.sh >/dev/null
echo "setup: ready" >&2
