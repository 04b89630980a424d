#!/usr/bin/env bash
# The PyTorch track's next H200 recording (docs/torch-track.md, "Not done yet"):
# a kineto+host corpus (every torch run recorded by Kineto and, in the same run,
# by the eBPF host recorder attached to the executor started as `python3 -X perf`),
# its fence-lines figure, its replay, and the raw material of the torch.compile case.
#
# Run as root on the H200 from the repository root, with a built `causalbench`
# ($CAUSALBENCH, default target/release/causalbench, else target/debug/causalbench)
# and python3 with torch and CuPy. Writes into $OUT (default ./out-torch-device):
#   machine.txt                     GPU, driver, kernel, Python, its frame-pointer flags
#   python-frames.log               the recorder-ebpf python_frames test (if cargo is here)
#   corpus/                         torch record --host --reps 5 --keep-logs (commit it as
#                                   results/corpus/h200-580-kineto-host)
#   record.log                      its stderr
#   fence-lines.txt, .json          torch fence-lines on that corpus (eBPF and Kineto halves)
#   results/                        causalbench run --corpus corpus/ (commit the leaderboard
#                                   files as results/h200-580-kineto-host, as
#                                   results/h200-580-kineto is)
#   compile/                        compile_probe.py: a torch.compile'd model under
#                                   torch.profiler (Kineto trace, Inductor's kernel->op map)
set -u
OUT=${OUT:-$PWD/out-torch-device}
B=${CAUSALBENCH:-}
if [ -z "$B" ]; then
  for c in target/release/causalbench target/debug/causalbench; do [ -x "$c" ] && B=$c && break; done
fi
[ -x "${B:-}" ] || { echo "no causalbench binary: set CAUSALBENCH" >&2; exit 2; }
PY=${CAUSALBENCH_PYTHON:-python3}
mkdir -p "$OUT"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  uname -r; nproc; id -u
  $PY -c 'import sys, sysconfig; print(sys.version); print("perf trampolines:", hasattr(sys, "activate_stack_trampoline")); print("CFLAGS frame pointers:", "-fno-omit-frame-pointer" in (sysconfig.get_config_var("CFLAGS") or ""))'
  $PY -c 'import torch, cupy; print("torch", torch.__version__, "cuda", torch.version.cuda, "cupy", cupy.__version__)'
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

# 1. The mechanism on this Python: a -X perf process's stack names its Python function.
if [ -z "${SKIP_CARGO:-}" ] && command -v cargo >/dev/null; then
  CAUSALBENCH_REQUIRE_EBPF=1 CAUSALBENCH_PYTHON=$PY timeout 300 \
    cargo test -p ebpf-recorder --test python_frames -- --nocapture > "$OUT/python-frames.log" 2>&1
  tail -5 "$OUT/python-frames.log"
fi

# 2. The kineto+host corpus.
rm -rf "$OUT/corpus"
CAUSALBENCH_PYTHON=$PY timeout "${RECORD_TIMEOUT:-3000}" "$B" torch record --out "$OUT/corpus" --reps 5 --keep-logs --host \
  2> "$OUT/record.log"
echo "torch record: exit $?"; tail -3 "$OUT/record.log"

# 3. The implicit-sync Python line from both stacks.
"$B" torch fence-lines --corpus "$OUT/corpus" --json "$OUT/fence-lines.json" | tee "$OUT/fence-lines.txt"

# 4. Its leaderboard (hta-critical-path where HTA is installed; SKIP_REPLAY=1
# leaves it to a machine without a GPU, which replays the corpus the same way).
rm -rf "$OUT/results"
[ -n "${SKIP_REPLAY:-}" ] || timeout 1200 "$B" run --corpus "$OUT/corpus" --profilers all --quiet --out "$OUT/results" 2>&1 | tail -3

# 5. Raw material of the torch.compile case (not scored yet).
mkdir -p "$OUT/compile"
timeout "${COMPILE_TIMEOUT:-600}" $PY "$(dirname "$0")/compile_probe.py" "$OUT/compile" > "$OUT/compile/probe.log" 2>&1
echo "compile probe: exit $?"; tail -5 "$OUT/compile/probe.log"
