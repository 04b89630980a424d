#!/usr/bin/env bash
# Issues 36, 38 and 39 on the H200 in one call, the most wanted first (a call is at most
# 600 s): TraceML's training-loop recording (scripts/torch-device/record-traceml.sh,
# $OUT/traceml.tgz), then the compiled megakernel monitors with the task-end program
# deferred and the workload's per-run clock fit
# (scripts/measure/h200_deferred_hooks_and_run_clock.sh, $OUT/mk.tgz and $OUT/byo.tgz).
#
# Build here: cargo build --release -p causalbench; strip --strip-all a copy, xz -9e it to
# .gpu/gpu3839/causalbench.xz, git rev-parse HEAD > .gpu/gpu3839/commit.txt; the wheels
# record-traceml.sh names in .whl; run from the repository root on the device machine with
# .gpu/gpu3839 and .whl carried.
set -u
T0=$(date +%s)
mkdir -p /tmp/cb && xz -dc .gpu/gpu3839/causalbench.xz > /tmp/cb/causalbench && chmod +x /tmp/cb/causalbench
# Only the archive comes back: $OUT holds at most 8 files.
OUT=/tmp/tmout CAUSALBENCH=/tmp/cb/causalbench RECORD_TIMEOUT=${RECORD_TIMEOUT:-200} \
  bash scripts/torch-device/record-traceml.sh
cp /tmp/tmout/traceml.tgz "$OUT/"
echo "traceml done after $(( $(date +%s) - T0 )) s"
BYO_TIMEOUT=${BYO_TIMEOUT:-80} BYO_SAMPLE=${BYO_SAMPLE:-20} bash scripts/measure/h200_deferred_hooks_and_run_clock.sh
echo "all done after $(( $(date +%s) - T0 )) s"
