#!/usr/bin/env bash
# Issues 38 and 39 on the H200, one call. Needs .gpu/gpu3839/causalbench.xz
# (release, strip --strip-all, xz -9e) and commit.txt. Writes $OUT/mk.tgz (issue 38: the
# compiled-monitor study by scripts/measure/h200_megakernel_compiled.sh) and
# $OUT/byo.tgz (issue 39: `causalbench workload --compare-cupti` on the catalog
# and a 30-scenario dev sample).
#
# What it measures: the compiled diagnosis program deferred to thread 32 against
# inline on the scheduling thread, interleaved (megakernel/README.md, "Compiled
# monitors"), and truth without CUPTI against CUPTI's with the clock offset
# measured before and after every run and the stream waits' stamp records
# (baselines/COLLECTORS.md, "Truth without CUPTI").
#
# Build here: cargo build --release -p causalbench; strip --strip-all a copy,
# xz -9e it to .gpu/gpu3839/causalbench.xz, git rev-parse HEAD > .gpu/gpu3839/commit.txt;
# run on the device machine from the repository root with .gpu/gpu3839 carried:
#   bash scripts/measure/h200_deferred_hooks_and_run_clock.sh
# Unpack $OUT/mk.tgz into results/h200-580/megakernel-bpf-compiled/ and
# $OUT/byo.tgz beside results/byo-collector-h200/.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib
G=$PWD/.gpu/gpu3839
COMMIT=$(cat $G/commit.txt)
T0=$(date +%s)
# 38 (SKIP_MK=1 leaves it out): the committed script reads the binary from .gpu/mk38
# (on this machine only).
if [ -z "${SKIP_MK:-}" ]; then
  mkdir -p .gpu/mk38 && xz -dc $G/causalbench.xz | gzip -1 > .gpu/mk38/causalbench.gz
  MK_COMMIT=$COMMIT MK_BPF_TIMEOUT=50 MK_RUN_TIMEOUT=50 MK_RUN_BUDGET_S=40 OUT=/tmp/mkout \
    bash -c 'mkdir -p $OUT && bash scripts/measure/h200_megakernel_compiled.sh' > /tmp/mk.log 2>&1
  cp /tmp/mkout/mkcompiled.tgz $OUT/mk.tgz 2>/dev/null
  tail -n 25 /tmp/mk.log
  echo "38 done after $(( $(date +%s) - T0 )) s"
fi
# 39
B=/tmp/causalbench
[ -x $B ] || { xz -dc $G/causalbench.xz > $B; chmod +x $B; }
R=/tmp/byo; mkdir -p $R
{ date -u; nvidia-smi; echo "commit $COMMIT"; sha256sum $B; } > $R/machine.txt 2>&1
for S in catalog dev; do
  if [ $S = catalog ]; then SEL="--suite catalog"; else SEL="--suite dev --sample ${BYO_SAMPLE:-30}"; fi
  echo "causalbench workload $SEL --out cmp-$S --compare-cupti" > $R/compare-$S.command
  s=$(date +%s)
  (cd $R && timeout ${BYO_TIMEOUT:-110} $B workload $SEL --out cmp-$S --compare-cupti > cmp-$S.stdout 2> compare-$S.log)
  echo "rc $? seconds $(( $(date +%s) - s ))" >> $R/compare-$S.log
  tail -n 2 $R/compare-$S.log
  cp $R/cmp-$S/truth-agreement.json $R/truth-agreement-$S.json 2>/dev/null
  cp $R/cmp-$S/workload.json $R/workload-$S.json 2>/dev/null
done
du -sh $R/cmp-* 2>/dev/null
tar czf $OUT/byo.tgz -C /tmp --exclude='byo/cmp-*/*.bundle.json' --exclude='byo/cmp-*/cupti' byo
ls -la $OUT
echo "all done after $(( $(date +%s) - T0 )) s"
