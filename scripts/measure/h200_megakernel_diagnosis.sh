#!/usr/bin/env bash
# Records on the H200 the eBPF monitors' diagnosis row of the megakernel
# track (megakernel/README.md, "The diagnosis as a program"): the diagnosis
# programs (`ebpf`, `ebpf-sampled`) scored by the track's profilers beside the
# fixed configuration, the task log and PC sampling, with the program-only
# queries, perturbation, hook resources, attach vs rebuild and a live swap.
#
# Needs a RELEASE binary (host-side load / verify / attach times of a debug
# build are those of unoptimised code), carried gzip-compressed:
#   cargo build --release -p causalbench
#   mkdir -p .gpubin-mk && gzip -c target/release/causalbench > .gpubin-mk/causalbench.gz
# then run this script on the device machine with `.gpubin-mk` carried; it
# writes $OUT/mkdiag.tgz (MK_BPF_TIMEOUT, MK_RUN_TIMEOUT and MK_RUN_BUDGET_S
# bound its two steps, in seconds). Unpack it into results/h200-580/megakernel-bpf/
# (bpf-*.json[l]/md, diagnosis/ with the track's packs and leaderboard,
# log.txt, machine.txt) and copy the figures into the README's table.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib
B=$PWD/.gpubin-mk/causalbench
gunzip -c "$B.gz" > /tmp/causalbench && B=/tmp/causalbench; chmod +x "$B"
R=/tmp/mkdiag; mkdir -p $R
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; uname -r; nproc; sha256sum "$B"; } > $R/machine.txt 2>&1
S=$(date +%s%N)
# The queries, perturbation, resources, attach and swap, and the diagnosis
# rows from every track family x 3 on the GPU.
timeout "${MK_BPF_TIMEOUT:-400}" "$B" megakernel bpf --backend cuda --diagnosis-reps 3 --out $R > $R/log.txt 2>&1
echo "megakernel bpf rc=$? $(( ($(date +%s%N) - S) / 1000000 )) ms" >> $R/machine.txt
grep -q '"build": "release"' $R/bpf-summary.json || echo "WARNING: not a release binary (bpf-summary.json build)" >> $R/machine.txt
# The track itself (its packs now hold the ebpf captures), for the leaderboard section.
S=$(date +%s%N)
timeout "${MK_RUN_TIMEOUT:-180}" "$B" megakernel run --backend cuda --reps 3 --budget-s "${MK_RUN_BUDGET_S:-150}" --out $R/diagnosis >> $R/log.txt 2>&1
echo "megakernel run rc=$? $(( ($(date +%s%N) - S) / 1000000 )) ms" >> $R/machine.txt
cat $R/machine.txt
tail -n 40 $R/log.txt
tar czf $OUT/mkdiag.tgz -C /tmp mkdiag
