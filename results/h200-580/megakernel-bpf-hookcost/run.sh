#!/usr/bin/env bash
# Issue 38 on the H200, one call: where the compiled monitors' fixed per-hook
# cost goes (megakernel/README.md, "Where a hook's fixed cost went").
#
# For each binary named in MK_BINS ("label:dir label:dir ...", each dir holding
# causalbench.xz, release, strip --strip-all, xz -9e, and commit.txt), one
# `causalbench megakernel bpf` run measures, interleaved in its own rounds,
# every arm's perturbation against the plain kernel: the fixed configuration,
# the full task log, the kernel with hooks and nothing attached (`hooks:empty`,
# binaries that have that arm), the query programs, the diagnosis programs
# deferred and inline, and the 12-instruction probe, each compiled and
# interpreted; then, with MK_RUN=1, `causalbench megakernel run` records the
# track with the last binary. Compare arms within one binary's run (the ratio
# to the fixed configuration), not across runs.
#
# Build here: cargo build --release -p causalbench; strip --strip-all a copy,
# xz -9e it to .gpu/<dir>/causalbench.xz, git rev-parse HEAD > .gpu/<dir>/commit.txt;
# run on the device machine from the repository root with the dirs carried:
#   MK_BINS="before:.gpu/gpu3839 after:.gpu/mk-epoch" bash scripts/measure/h200_megakernel_hook_cost.sh
# Writes $OUT/hookcost.tgz: <label>/{bpf-summary.json,bpf-queries.jsonl,bpf-report.md,log.txt,
# machine.txt,run.txt}, and <last label>/diagnosis/ with MK_RUN=1.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib
R=/tmp/hookcost; mkdir -p $R
T0=$(date +%s)
LAST=
for pair in ${MK_BINS:?MK_BINS names label:dir pairs}; do
  L=${pair%%:*}; G=${pair#*:}; LAST=$L
  B=/tmp/causalbench-$L
  xz -dc $G/causalbench.xz > $B && chmod +x $B
  mkdir -p $R/$L
  { date -u; nvidia-smi; nvidia-smi --query-gpu=driver_version --format=csv,noheader; uname -r; nproc;
    sha256sum $B; echo "commit $(cat $G/commit.txt)"; } > $R/$L/machine.txt 2>&1
  CMD="megakernel bpf --backend cuda --diagnosis-reps 3 --perturbation-rounds ${MK_ROUNDS:-9} --out $R/$L"
  echo "causalbench $CMD" > $R/$L/run.txt
  s=$(date +%s%N)
  timeout "${MK_BPF_TIMEOUT:-120}" $B $CMD > $R/$L/log.txt 2>&1
  echo "rc $? $(( ($(date +%s%N) - s) / 1000000 )) ms" >> $R/$L/run.txt
  tail -n 1 $R/$L/run.txt
done
if [ -n "${MK_RUN:-}" ]; then
  B=/tmp/causalbench-$LAST
  CMD="megakernel run --backend cuda --reps 3 --budget-s ${MK_RUN_BUDGET_S:-60} --out $R/$LAST/diagnosis"
  echo "causalbench $CMD" >> $R/$LAST/run.txt
  s=$(date +%s%N)
  timeout "${MK_RUN_TIMEOUT:-90}" $B $CMD >> $R/$LAST/log.txt 2>&1
  echo "rc $? $(( ($(date +%s%N) - s) / 1000000 )) ms" >> $R/$LAST/run.txt
  rm -f $R/$LAST/diagnosis/*.cases.jsonl.gz
fi
tar czf $OUT/hookcost.tgz -C /tmp hookcost
echo "done after $(( $(date +%s) - T0 )) s"
