#!/usr/bin/env bash
# How this directory was recorded on the H200 (one `run` call, 2026-12-04 21:35 UTC;
# machine.txt: nvidia-smi, the commit, the binary's sha256): release binary built from
# commit a719e19 (graph nodes log every replay into a ring of log entries,
# kernels::LogRing; strip --strip-all, xz -9 into .gpu/gpu3839/), then on the device
# machine, with .gpu/gpu3839 carried,
SKIP_MK=1 BYO_SAMPLE=30 BYO_TIMEOUT=150 exec bash scripts/measure/h200_deferred_hooks_and_run_clock.sh
# whose $OUT/byo.tgz is unpacked here as it came back, the comparison folders'
# truth-agreement.json and workload.json kept as truth-agreement-SUITE.json and
# workload-SUITE.json. Nothing here was edited.
#
# What it showed (README.md here): the graph replays' millisecond outliers are gone
# (catalog max 3.07 ms -> 2.5 us), but every kernel's end moved later against CUPTI's
# (dev sample within 2 us 99.1 % -> 88.5 %): that binary waited for a returned atomic in
# every kernel's last block. Commit 3a86569 keeps the plain path's fire-and-forget
# atomics; it has not run on the GPU yet (no device machine was lent afterwards).
