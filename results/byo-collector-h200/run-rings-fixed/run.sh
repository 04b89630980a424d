#!/usr/bin/env bash
# How this directory was recorded on the H200 (one `run` call, 2026-12-05 02:47 UTC;
# machine.txt: nvidia-smi, the commit, the binary's sha256): release binary built from
# a fresh clone of commit 54acad15 with its own target directory (it holds 3a86569: the
# plain slots keep their fire-and-forget atomics, a graph node's ring block stamps its end
# after its round trip; strip --strip-all, xz -9e into .gpu/gpu3839/), then on the device
# machine, with .gpu/gpu3839 carried,
SKIP_MK=1 BYO_SAMPLE=30 BYO_TIMEOUT=150 exec bash scripts/measure/h200_deferred_hooks_and_run_clock.sh
# whose $OUT/byo.tgz is unpacked here as it came back, the comparison folders'
# truth-agreement.json and workload.json kept as truth-agreement-SUITE.json and
# workload-SUITE.json. Nothing here was edited.
#
# What it showed (baselines/COLLECTORS.md, "Truth without CUPTI"): raw, 266 of the
# catalog's 267 kernels (99.6 %) and 765 of the dev sample's 771 (99.2 %) lie within 2 us
# of CUPTI's truth (worst 2.16 us, p99 1.6 us); labels kept the same on 26 of 27 catalog
# cases and 30 of 30 dev cases (56 of 57, 98.2 %).
