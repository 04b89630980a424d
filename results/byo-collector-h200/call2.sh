#!/bin/bash
# Issue 39, second H200 call: the corpus. The catalog and a dev-split sample,
# each (1) recorded by the normal backend with truth from CUPTI and from the
# stamps (same runs), (2) under CUPTI's trace-injection sample, (3) with the
# eBPF host recorder attached by PID. Results in $OUT/call2.tar.gz.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/r; mkdir -p $R
B=/tmp/byo; mkdir -p $B
xz -dc .gpu/byo/causalbench.xz > $B/causalbench && chmod +x $B/causalbench
CB=$B/causalbench
cat .gpu/byo/commit.txt > $R/commit.txt
nvidia-smi > $R/nvidia-smi.txt 2>&1
cp -r /usr/local/cuda/extras/CUPTI /tmp/CUPTI
(cd /tmp/CUPTI/samples/cupti_trace_injection && make CUDA_INSTALL_PATH=/usr/local/cuda > $R/make.txt 2>&1; echo "make rc $?" >> $R/make.txt)
LIB=/tmp/CUPTI/samples/cupti_trace_injection/libcupti_trace_injection.so
sha256sum $LIB /usr/local/cuda/extras/CUPTI/samples/cupti_trace_injection/* >> $R/make.txt
DEV="--suite dev --sample 30"
for S in catalog dev; do
  if [ $S = catalog ]; then SEL="--suite catalog"; CSEL="--scenarios catalog"; else SEL="$DEV"; CSEL="--scenarios dev --sample 30"; fi
  start=$(date +%s.%N)
  timeout 150 $CB workload $SEL --out $R/cmp-$S --compare-cupti > $R/cmp-$S.stdout 2> $R/cmp-$S.log; echo "rc $? seconds $(echo "$(date +%s.%N) - $start" | bc)" >> $R/cmp-$S.log
  echo "$CB workload $SEL --out cmp-$S --compare-cupti" > $R/cmp-$S.command
  timeout 120 $CB collector run --name cupti-trace-injection \
    --collector "env CUDA_INJECTION64_PATH=$LIB {workload}" \
    --converter "python3 $PWD/baselines/collectors/cupti_trace_injection.py {native}/stdout.txt {out}" \
    $CSEL --out $R/cti-$S --no-score --allow-unisolated > $R/cti-$S.log 2>&1; echo "rc $?" >> $R/cti-$S.log
  timeout 120 $CB collector run --name ebpf-host \
    --collector "$CB collector ebpf --pid {pid} --go {go} --out {native}" \
    --converter "cp {native}/records.json {out}/records.json" \
    $CSEL --out $R/ebpf-$S --no-score --allow-unisolated > $R/ebpf-$S.log 2>&1; echo "rc $?" >> $R/ebpf-$S.log
done
for d in $R/cti-* $R/ebpf-*; do [ -f $d/native/stdout.txt ] && gzip -f $d/native/stdout.txt; [ -f $d/native/records.json ] && gzip -f $d/native/records.json; done
cd $OUT && tar czf call2.tar.gz r && rm -rf r
