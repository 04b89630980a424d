#!/usr/bin/env bash
# How this directory was recorded on the H200 (one `run` call, 2026-12-04 20:07 UTC;
# machine.txt: nvidia-smi, the commit, the binary's sha256): release binary built from
# commit 4a2df71 (strip --strip-all, xz -9 into .gpu/gpu3839/), then on the device
# machine, with .gpu/gpu3839 and .whl carried,
exec bash scripts/measure/h200_traceml_deferred_clock.sh
# which runs scripts/measure/h200_deferred_hooks_and_run_clock.sh with BYO_TIMEOUT=80
# BYO_SAMPLE=20: `causalbench workload --suite catalog --out cmp-catalog --compare-cupti`
# and `--suite dev --sample 20`; its $OUT/byo.tgz unpacked as it came back, the
# comparison folders' truth-agreement.json and workload.json kept here as
# truth-agreement-SUITE.json and workload-SUITE.json. Nothing here was edited.
