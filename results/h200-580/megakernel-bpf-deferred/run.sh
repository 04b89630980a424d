#!/usr/bin/env bash
# How this directory was recorded on the H200 (one `run` call, 2026-12-04 20:07 UTC;
# machine.txt: nvidia-smi, driver, CPU, the binary's sha256 and commit):
#   release binary built from commit 4a2df71 (`cargo build --release -p causalbench`,
#   strip --strip-all, xz -9 into .gpu/gpu3839/), then on the device machine, with
#   .gpu/gpu3839 and .whl carried,
exec bash scripts/measure/h200_traceml_deferred_clock.sh
# which runs scripts/measure/h200_deferred_hooks_and_run_clock.sh (MK_BPF_TIMEOUT=50
# MK_RUN_TIMEOUT=50 MK_RUN_BUDGET_S=40); its $OUT/mk.tgz unpacked here as it came back
# (the track's case packs, removed by the script before packing, are not kept).
# Nothing in this directory was edited.
