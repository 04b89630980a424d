#!/usr/bin/env bash
# How this directory was recorded on the H200 (one `run` call, 2026-12-04 21:02 UTC;
# machine.txt: nvidia-smi, the commit, the binary's sha256): release binary built from
# commit a9cfda8 (the synchronizations' records of the truth without CUPTI; strip
# --strip-all, xz -9 into .gpu/gpu3839/), then on the device machine, with .gpu/gpu3839
# carried,
BYO_SAMPLE=30 BYO_TIMEOUT=100 exec bash scripts/measure/h200_deferred_hooks_and_run_clock.sh
# whose $OUT/byo.tgz is unpacked here as it came back, the comparison folders'
# truth-agreement.json and workload.json kept as truth-agreement-SUITE.json and
# workload-SUITE.json. Nothing here was edited. Its $OUT/mk.tgz is
# results/h200-580/megakernel-bpf-deferred/repeat/.
