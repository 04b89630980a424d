#!/usr/bin/env bash
# TraceML on the PyTorch track's training steps (docs/third-party-tools.md, "TraceML"):
# the dev split's training-step shapes recorded as real training loops traced by
# TraceML (`causalbench torch record --train-loop`), one batched call on the H200.
#
# Run from the repository root on the GPU machine, with a built `causalbench`
# ($CAUSALBENCH, default target/release/causalbench) and, in $WHEELS (default
# .whl), the wheels the device's python3 lacks: traceml_ai-0.5.0 and msgspec
# (`python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12
# --implementation cp --platform manylinux_2_17_x86_64 -d .whl traceml-ai==0.5.0 msgspec`;
# its other needs, rich, psutil, nvidia-ml-py, numpy and PyYAML, are in the image).
# Writes $OUT/traceml/: machine.txt (the manifest: command, binary, nvidia-smi, pip
# versions), recording.log, corpus/ (commit it as results/corpus/h200-580-kineto-traceml
# and replay it here with
#   causalbench run --corpus results/corpus/h200-580-kineto-traceml \
#     --profilers builtin,kineto-flows,traceml-step --quiet --out results/h200-580-kineto-traceml
# which cli/tests/traceml_corpus.rs then checks), and traceml.tgz of it all.
#
# Time: one executor start (torch, CuPy, the clock calibration) and one TraceML run
# (its aggregator, init, final summary) per bundle, about 10-15 s each: ONLY selects
# how many of the 12 dev instances (2 variants each; the loader-preempted one is not
# runnable on this track) are recorded. Default: the first ten.
set -u
OUT=${OUT:-$PWD/out-traceml}
B=${CAUSALBENCH:-target/release/causalbench}
WHEELS=${WHEELS:-.whl}
ONLY=${ONLY:-training-step.dev000}
[ -x "$B" ] || { echo "no causalbench binary: set CAUSALBENCH" >&2; exit 2; }
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/traceml-site "$WHEELS"/*.whl || exit 3
export PYTHONPATH=/tmp/traceml-site
R=$OUT/traceml
rm -rf "$R" && mkdir -p "$R"
CMD="causalbench torch record --suite dev --only $ONLY --reps 1 --keep-logs --train-loop --out corpus"
{
  date -u
  echo "command: $CMD"
  echo "binary: $(sha256sum "$B" | cut -c1-64) $("$B" --version 2>/dev/null)"
  nvidia-smi
  uname -r; nproc; python3 --version
  python3 -m pip list 2>/dev/null |
    grep -i -E "^(torch|cupy-cuda13x|traceml-ai|msgspec|numpy|psutil|rich|nvidia-ml-py|pyyaml) "
} > "$R/machine.txt" 2>&1
B=$(realpath "$B")
(cd "$R" && PYTHONUNBUFFERED=1 timeout "${RECORD_TIMEOUT:-400}" "$B" torch record --suite dev \
  --only "$ONLY" --reps 1 --keep-logs --train-loop --out corpus 2> recording.log)
echo "torch record: exit $?" | tee -a "$R/recording.log"
date -u >> "$R/machine.txt"
tail -5 "$R/recording.log"
tar czf "$OUT/traceml.tgz" -C "$OUT" traceml
