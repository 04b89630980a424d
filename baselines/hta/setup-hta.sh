#!/usr/bin/env bash
# Install Holistic Trace Analysis (HTA) and the Perfetto protos from PyPI into a private
# directory, for the `hta-critical-path` profiler (baselines/src/hta.rs) and the Perfetto
# export test (exporters/tests/perfetto_decode.py).
#
# Idempotent. Prints ONE line on stdout: the directory to put on PYTHONPATH (the adapter
# and the tests also look there by themselves, and causalbench does too). Progress and
# errors go to stderr.
#
#   hta_dir="$(bash baselines/hta/setup-hta.sh)"
#
# Environment:
#   CAUSALBENCH_HTA_DIR      install directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/causalbench/hta)
#   CAUSALBENCH_HTA_VERSION  HolisticTraceAnalysis version (default 0.5.0; works on Python 3.11)
#   PYTHON                   python interpreter with pip (default python3)
#
# Pins: HTA 0.5.0 calls pandas APIs that pandas 3 removed (DataFrame.drop with both
# axis and columns), so pandas stays below 3. perfetto 0.59.1 ships the compiled
# perfetto_trace.proto (perfetto/protos/perfetto/trace/perfetto_trace_pb2.py), which
# needs protobuf >= 6.31.
set -euo pipefail

version="${CAUSALBENCH_HTA_VERSION:-0.5.0}"
perfetto_version="0.59.1"
prefix="${CAUSALBENCH_HTA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/causalbench/hta}"
python="${PYTHON:-python3}"
stamp="$prefix/.installed-hta-$version-perfetto-$perfetto_version"

probe() {
    PYTHONPATH="$prefix${PYTHONPATH:+:$PYTHONPATH}" "$python" -c \
        'import hta.analyzers.critical_path_analysis, perfetto.protos.perfetto.trace.perfetto_trace_pb2' \
        >/dev/null 2>&1
}

if [[ -f "$stamp" ]] && probe; then
    echo "setup-hta: HTA $version and perfetto $perfetto_version already installed in $prefix" >&2
else
    if ! "$python" -m pip --version >/dev/null 2>&1; then
        if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
            echo "setup-hta: installing python3-pip with apt-get" >&2
            apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip >&2
            python=python3
        fi
    fi
    if ! "$python" -m pip --version >/dev/null 2>&1; then
        echo "setup-hta: '$python -m pip' is not available; install pip (apt-get install python3-pip) or set PYTHON" >&2
        exit 1
    fi
    echo "setup-hta: installing HolisticTraceAnalysis==$version, perfetto==$perfetto_version into $prefix" >&2
    rm -rf "$prefix"
    mkdir -p "$prefix"
    # --break-system-packages is harmless with --target and needed by Debian's pip (PEP 668).
    extra=()
    if "$python" -m pip install --help 2>/dev/null | grep -q -- --break-system-packages; then
        extra+=(--break-system-packages)
    fi
    "$python" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
        "${extra[@]}" --target "$prefix" \
        "HolisticTraceAnalysis==$version" "pandas>=2.2,<3" \
        "perfetto==$perfetto_version" "protobuf>=6.31" >&2
    if ! probe; then
        echo "setup-hta: installed, but '$python' cannot import hta and the perfetto protos from $prefix" >&2
        exit 1
    fi
    touch "$stamp"
fi

echo "$prefix"
