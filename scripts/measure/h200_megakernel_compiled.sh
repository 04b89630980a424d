#!/usr/bin/env bash
# Records on the H200 the compiled monitor programs of the megakernel track
# (megakernel/README.md, "Compiled monitors", issue 38): one
# `causalbench megakernel bpf` run measures, interleaved, the perturbation of
# every query program and of the diagnosis programs compiled and interpreted
# beside the fixed configuration and the full task log (with each arm's hook
# runs, instructions and device time per run), the compiled attach latency
# stage by stage against the rebuild, the linked kernels' registers and local
# memory, and the 90 query answers under both executions; then
# `causalbench megakernel run` records the track (its `ebpf` captures now
# compiled) for the leaderboard section.
#
# Needs a RELEASE binary carried gzip-compressed:
#   cargo build --release -p causalbench
#   mkdir -p .gpu/mk38 && cp target/release/causalbench .gpu/mk38/ \
#     && strip --strip-debug .gpu/mk38/causalbench && gzip -f .gpu/mk38/causalbench
# then run this script on the device machine with `.gpu/mk38` carried; it
# writes $OUT/mkcompiled.tgz (MK_BPF_TIMEOUT, MK_RUN_TIMEOUT, MK_RUN_BUDGET_S
# bound its steps, in seconds). Unpack it into results/h200-580/megakernel-bpf-compiled/.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib
B=$PWD/.gpu/mk38/causalbench
gunzip -c "$B.gz" > /tmp/causalbench && B=/tmp/causalbench; chmod +x "$B"
R=/tmp/mkcompiled; mkdir -p $R
{ date -u; nvidia-smi; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; uname -r; nproc; lscpu | grep 'Model name'; sha256sum "$B"; echo "commit ${MK_COMMIT:-unknown}"; } > $R/machine.txt 2>&1
S=$(date +%s%N)
timeout "${MK_BPF_TIMEOUT:-200}" "$B" megakernel bpf --backend cuda --diagnosis-reps 3 --perturbation-rounds 9 --out $R > $R/log.txt 2>&1
echo "megakernel bpf rc=$? $(( ($(date +%s%N) - S) / 1000000 )) ms" >> $R/machine.txt
grep -q '"build": "release"' $R/bpf-summary.json || echo "WARNING: not a release binary (bpf-summary.json build)" >> $R/machine.txt
S=$(date +%s%N)
timeout "${MK_RUN_TIMEOUT:-120}" "$B" megakernel run --backend cuda --reps 3 --budget-s "${MK_RUN_BUDGET_S:-90}" --out $R/diagnosis >> $R/log.txt 2>&1
echo "megakernel run rc=$? $(( ($(date +%s%N) - S) / 1000000 )) ms" >> $R/machine.txt
rm -f $R/diagnosis/*.cases.jsonl.gz
tail -n 3 $R/machine.txt
grep -v '^|' $R/log.txt | tail -n 20
tar czf $OUT/mkcompiled.tgz -C /tmp mkcompiled
