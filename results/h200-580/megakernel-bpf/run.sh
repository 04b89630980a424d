#!/usr/bin/env bash
# Monitor programs as eBPF on the H200 (causalbench megakernel bpf): queries,
# perturbation, hook resources, attach vs rebuild, a live swap. Into $OUT/mkbpf.tgz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib
B=$PWD/.gpubin-mk/causalbench
gunzip -c "$B.gz" > /tmp/causalbench && B=/tmp/causalbench; chmod +x "$B"
R=/tmp/mkbpf; mkdir -p $R
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; uname -r; nproc; sha256sum "$B"; } > $R/machine.txt 2>&1
S=$(date +%s%N)
timeout 200 "$B" megakernel bpf --backend cuda --out $R > $R/log.txt 2>&1
echo "megakernel bpf rc=$? $(( ($(date +%s%N) - S) / 1000000 )) ms" >> $R/machine.txt
cat $R/machine.txt
tail -n 40 $R/log.txt
tar czf $OUT/mkbpf.tgz -C /tmp mkbpf
