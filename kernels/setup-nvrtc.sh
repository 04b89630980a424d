#!/usr/bin/env bash
# Install NVRTC (CUDA 13.0) from PyPI's `nvidia-cuda-nvrtc` wheel so the
# kernels can be compiled to PTX on a machine without the CUDA toolkit.
#
# Idempotent. Prints ONE line on stdout: the directory holding libnvrtc.so.13,
# to add to LD_LIBRARY_PATH (or to put in CAUSALBENCH_NVRTC_DIR). Progress and
# errors go to stderr.
#
#   export LD_LIBRARY_PATH="$(bash kernels/setup-nvrtc.sh)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
#
# Environment:
#   CAUSALBENCH_NVRTC_PREFIX  install prefix (default ${XDG_CACHE_HOME:-$HOME/.cache}/causalbench/nvrtc;
#                             the kernels crate also searches that default itself)
#   CAUSALBENCH_NVRTC_VERSION wheel version (default 13.0.88: NVRTC 13.0 emits PTX that the
#                             CUDA 13.0 driver (580) on the GPU host accepts; a newer NVRTC
#                             emits a newer PTX ISA that driver rejects)
#   PYTHON                    python interpreter with pip (default python3)
set -euo pipefail

version="${CAUSALBENCH_NVRTC_VERSION:-13.0.88}"
prefix="${CAUSALBENCH_NVRTC_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/causalbench/nvrtc}"
python="${PYTHON:-python3}"
libdir="$prefix/nvidia/cu13/lib"
stamp="$prefix/.installed-$version"

if [[ -f "$stamp" && -e "$libdir/libnvrtc.so.13" ]]; then
    echo "setup-nvrtc: NVRTC $version already installed in $libdir" >&2
else
    if ! "$python" -m pip --version >/dev/null 2>&1; then
        if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
            echo "setup-nvrtc: installing python3-pip with apt-get" >&2
            apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip >&2
            python=python3
        fi
    fi
    if ! "$python" -m pip --version >/dev/null 2>&1; then
        echo "setup-nvrtc: '$python -m pip' is not available; install pip (apt-get install python3-pip) or set PYTHON" >&2
        exit 1
    fi
    echo "setup-nvrtc: installing nvidia-cuda-nvrtc==$version into $prefix" >&2
    rm -rf "$prefix"
    mkdir -p "$prefix"
    "$python" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
        --target "$prefix" "nvidia-cuda-nvrtc==$version" >&2
    if [[ ! -e "$libdir/libnvrtc.so.13" ]]; then
        echo "setup-nvrtc: the wheel did not contain $libdir/libnvrtc.so.13:" >&2
        find "$prefix" -name 'libnvrtc*' >&2 || true
        exit 1
    fi
    touch "$stamp"
fi

# cudarc (dynamic-loading, CUDA 13) tries libnvrtc.so, ..., libnvrtc.so.13 among
# others; the wheel's libnvrtc.so.13 already matches. The unversioned name is
# added for other tools that look for it.
ln -sfn libnvrtc.so.13 "$libdir/libnvrtc.so"

echo "$libdir"
