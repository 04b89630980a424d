#!/usr/bin/env bash
# The input limits under attack (README "Limits"): hostile inputs of at most
# 100 MB (huge, deeply nested, gzip bombs, wrong types, huge numbers, the
# scenario-size limit itself) for every subcommand that reads a file. Each case
# must finish within 60 s and 2 GB of peak RSS, and either succeed (a valid
# input) or refuse with exit 2 naming the file and the limit or place (`run`
# may instead count the bad bundle as a failed case, exit 1). Prints one row per
# case: exit code, seconds, peak RSS, verdict and the first line of stderr.
#
# usage: scripts/abuse-limits.sh [CAUSALBENCH] [WORKDIR]
#   CAUSALBENCH  the binary to attack (default: target/release/causalbench)
#   WORKDIR      where the inputs are generated (default: a new temp directory;
#                it needs about 1.5 GB)
# Exit status: the number of failed cases (0: every case held).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-target/release/causalbench}")
WORK=${2:-$(mktemp -d -t causalbench-abuse.XXXXXX)}
mkdir -p "$WORK"
WORK=$(realpath "$WORK")
LIMIT_S=60
LIMIT_KB=$((2 * 1024 * 1024))
CATALOG=$(realpath catalog)
SCENARIO=$CATALOG/late-launch-vs-device-queueing.occupancy-hog.yaml
[ -x "$BIN" ] || { echo "abuse-limits: no binary at $BIN" >&2; exit 64; }
command -v python3 >/dev/null || { echo "abuse-limits: needs python3" >&2; exit 64; }
cd "$WORK"

echo "abuse-limits: attacking $BIN in $WORK" >&2
# ---------------------------------------------------------------- the inputs
"$BIN" record --scenario "$SCENARIO" --backend sim --out small.bundle.json 2>/dev/null
"$BIN" view --bundle small.bundle.json --collectors combined --mode instrumented \
  --out small.view.json 2>/dev/null
"$BIN" profile --profiler causal-graph --view small.view.json --out small.explanation.json 2>/dev/null
# A valid bundle just under 100 MB: the catalog scenario with many requests.
sed -e 's/requests: 3$/requests: 22000/' -e 's/interval_us: 20000/interval_us: 2000/' \
  -e 's/^name: .*/name: abuse.large/' "$SCENARIO" > large.yaml
"$BIN" record --scenario large.yaml --backend sim --out large.bundle.json 2>/dev/null
"$BIN" view --bundle large.bundle.json --collectors combined --mode instrumented \
  --out large.view.json 2>/dev/null
# The scenario-size limit itself: tiny files asking for the most operations
# allowed (12 M: requests × (1 + 4 steps) × 2 for the no-injection twin), and one more.
# Recording the one at the limit needs a machine with about 10 GB of memory and room
# for a bundle of several GB (README "Limits").
sed -e 's/requests: 3$/requests: 1200000/' -e 's/interval_us: 20000/interval_us: 100/' \
  -e 's/^name: .*/name: abuse.at-the-ops-limit/' "$SCENARIO" > at-ops-limit.yaml
sed -e 's/requests: 3$/requests: 1200001/' -e 's/interval_us: 20000/interval_us: 100/' \
  -e 's/^name: .*/name: abuse.past-the-ops-limit/' "$SCENARIO" > past-ops-limit.yaml
# The same with one step per request: the most requests allowed.
python3 - "$SCENARIO" > at-requests-limit.yaml <<'PY'
import sys
s = open(sys.argv[1]).read()
head, rest = s.split("    steps:\n", 1)
tail = rest[rest.index("injection:"):]
one = "    steps:\n      - {op: kernel, id: gemm, stream: compute, name: gemm, duration_us: 1}\n"
s = head + one + tail
s = s.replace("requests: 3\n", "requests: 3000000\n").replace("interval_us: 20000", "interval_us: 10")
print(s.replace("name: late-launch-vs-device-queueing.occupancy-hog", "name: abuse.at-the-requests-limit"), end="")
PY

python3 - "$WORK" <<'PY'
import gzip, json, os, sys
work = sys.argv[1]
MB = 1 << 20
def put(name, data):
    with open(os.path.join(work, name), "wb") as f:
        f.write(data)
def bomb(name, size=1 << 30):
    # 1 GiB of zeros compress to about 1 MB: far past the expansion limit.
    with gzip.open(os.path.join(work, name), "wb", compresslevel=9) as f:
        block = b"\0" * (16 * MB)
        for _ in range(size // len(block)):
            f.write(block)
deep = b"[" * (100 * MB - 64)
scenario = open(os.path.join(work, "large.yaml"), "rb").read()
small_scenario = scenario.replace(b"requests: 22000", b"requests: 3")
put("deep-flow.yaml", b"programs: " + deep)
put("deep-block.yaml", b"programs:\n" + b"".join(b" " * i + b"- \n" for i in range(1, 3000)))
bomb("bomb.yaml")
put("wrong-type.yaml", small_scenario.replace(b"requests: 3", b"requests: \"" + b"x" * (100 * MB - len(small_scenario)) + b"\"", 1))
put("huge-numbers.yaml", small_scenario.replace(b"requests: 3", b"requests: 1e30", 1))
put("huge-duration.yaml", small_scenario.replace(b"duration_us: 300", b"duration_us: 1e16", 1))
put("random.yaml", os.urandom(100 * MB))

small = json.load(open(os.path.join(work, "small.bundle.json")))
view = json.load(open(os.path.join(work, "small.view.json")))
expl = json.load(open(os.path.join(work, "small.explanation.json")))
for kind in ["bundle", "view", "explanation"]:
    bomb(f"bomb.{kind}.json.gz")
    put(f"deep.{kind}.json", deep)
    put(f"random.{kind}.json", os.urandom(100 * MB))
def dump(name, value):
    put(name, json.dumps(value).encode())
b = json.loads(json.dumps(small)); b["schema_version"] = "x" * (100 * MB - 1000)
dump("wrong-type.bundle.json", b)
b = json.loads(json.dumps(small)); b["trace"][0]["start"] = 10 ** 30
dump("huge-number.bundle.json", b)
b = json.loads(json.dumps(small)); b["trace"][0]["end"] = 2 ** 64 - 1
dump("huge-end.bundle.json", b)
v = json.loads(json.dumps(view)); v["queries"][0]["id"] = "q" * (100 * MB - 1000)
dump("huge-query.view.json", v)
e = json.loads(json.dumps(expl)); e["meta"]["wall_ms"] = -1e308
dump("negative-cost.explanation.json", e)
e = json.loads(json.dumps(expl)); e["diagnoses"][0]["query"] = "q" * (100 * MB - 1000)
dump("huge-query.explanation.json", e)
# About 100 MB of claimed edges between records the view has.
rids = [r["rid"] for r in view["records"]]
edge = expl["edges"][0]
one = json.dumps({**edge, "src": rids[0], "dst": rids[-1]})
count = (100 * MB - 10000) // (len(one) + 1)
e = json.loads(json.dumps(expl)); e["edges"] = []
text = json.dumps(e).replace('"edges": []', '"edges": [' + ",".join([one] * count) + "]")
put("many-edges.explanation.json", text.encode())
PY

# A small results directory for `report`, then hostile copies of it.
mkdir -p suite && cp "$SCENARIO" suite/
"$BIN" run --backend sim --suite suite --reps 1 --profilers causal-graph --megakernel-reps 0 \
  --quiet --out results 2>/dev/null
python3 - "$WORK" <<'PY'
import os, shutil, sys
work = sys.argv[1]
MB = 1 << 20
src = os.path.join(work, "results")
lines = open(os.path.join(src, "scores.jsonl"), "rb").read().splitlines(keepends=True)
def results(name, scores=None, manifest=None):
    dst = os.path.join(work, name)
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    if scores is not None:
        open(os.path.join(dst, "scores.jsonl"), "wb").write(scores)
    if manifest is not None:
        open(os.path.join(dst, "manifest.json"), "wb").write(manifest)
blob = b"".join(lines)
results("results-large", scores=blob * max(1, (100 * MB) // len(blob)))
results("results-deep", scores=b"[" * (100 * MB))
results("results-wrong-type", scores=lines[0].replace(b'"repetition":0', b'"repetition":"' + b"9" * (100 * MB) + b'"', 1))
results("results-long-line", scores=b'{"bundle":"' + b"b" * (100 * MB) + b'"}\n')
results("results-deep-manifest", manifest=b"[" * (100 * MB))
PY

# Corpora for `run --corpus`, and megakernel case packs.
mkdir -p corpus-large corpus-bomb corpus-deep corpus-wrong packs-bomb packs-deep packs-random packs-wrong
cp large.bundle.json corpus-large/
cp bomb.bundle.json.gz corpus-bomb/x.bundle.json.gz
cp deep.bundle.json corpus-deep/x.bundle.json
cp wrong-type.bundle.json corpus-wrong/x.bundle.json
cp bomb.bundle.json.gz packs-bomb/f.cases.jsonl.gz
python3 - "$WORK" <<'PY'
import gzip, os, sys
work = sys.argv[1]
MB = 1 << 20
def pack(dir, data):
    # Stored uncompressed (the reader takes either): these attack the parser,
    # not the expansion limit.
    with open(os.path.join(work, dir, "f.cases.jsonl.gz"), "wb") as f:
        f.write(data)
pack("packs-deep", b"[" * (100 * MB))
pack("packs-random", os.urandom(100 * MB))
pack("packs-wrong", b'{"bundle": "' + b"x" * (100 * MB - 64) + b'", "telemetry": 1}\n')
PY
ls -la "$WORK" >&2

# ----------------------------------------------------------------- the cases
failed=0
printf '%-36s %-7s %5s %8s %9s  %s\n' case expect exit seconds "peak MB" "verdict / first line of stderr"
# attack NAME EXPECT ARGS...: EXPECT is accept (exit 0), refuse (exit 2) or fail (1 or 2).
attack() {
  local name=$1 expect=$2
  shift 2
  rm -rf "$WORK/out"
  timeout -s KILL $((LIMIT_S * 2)) /usr/bin/time -f '%e %M' -o "$WORK/time.txt" \
    "$BIN" "$@" >"$WORK/stdout.txt" 2>"$WORK/stderr.txt"
  local rc=$? seconds kb
  read -r seconds kb < <(tail -n 1 "$WORK/time.txt" 2>/dev/null || echo "? ?")
  [ "$rc" = 137 ] && seconds=">$((LIMIT_S * 2))"
  local first
  first=$( (grep -m 1 'failed: ' "$WORK/stderr.txt" || grep -v '^\s*$' "$WORK/stderr.txt" | head -n 1) |
    cut -c1-150)
  local verdict=ok why=""
  case "$expect:$rc" in
    accept:0 | refuse:2 | fail:1 | fail:2) ;;
    *) why="exit $rc, expected $expect" ;;
  esac
  grep -q panicked "$WORK/stderr.txt" && why="panicked"
  [ "$(stat -c %s "$WORK/stderr.txt")" -gt 65536 ] && why="stderr of $(stat -c %s "$WORK/stderr.txt") bytes"
  if [[ "$seconds" != ">"* ]] && [ "${kb:-0}" != "?" ]; then
    awk -v s="$seconds" -v l="$LIMIT_S" 'BEGIN { exit !(s > l) }' && why="over ${LIMIT_S} s"
    [ "$kb" -gt "$LIMIT_KB" ] && why="over 2 GB RSS"
  else
    why="killed after $((LIMIT_S * 2)) s"
  fi
  if [ -n "$why" ]; then
    verdict="FAIL ($why)"
    failed=$((failed + 1))
  fi
  printf '%-36s %-7s %5s %8s %9s  %s: %s\n' "$name" "$expect" "$rc" "$seconds" \
    "$(( ${kb:-0} / 1024 ))" "$verdict" "$first"
}
B=small.bundle.json V=small.view.json E=small.explanation.json
attack "record deep flow YAML 100MB" refuse record --scenario deep-flow.yaml --backend sim --out out/b.json
attack "record deep block YAML" refuse record --scenario deep-block.yaml --backend sim --out out/b.json
attack "record gzip bomb YAML" refuse record --scenario bomb.yaml --backend sim --out out/b.json
attack "record wrong type 100MB" refuse record --scenario wrong-type.yaml --backend sim --out out/b.json
attack "record requests 1e30" refuse record --scenario huge-numbers.yaml --backend sim --out out/b.json
attack "record duration 1e16 us" refuse record --scenario huge-duration.yaml --backend sim --out out/b.json
attack "record random bytes 100MB" refuse record --scenario random.yaml --backend sim --out out/b.json
attack "record at the ops limit" accept record --scenario at-ops-limit.yaml --backend sim --out out/b.json
attack "record at the requests limit" accept record --scenario at-requests-limit.yaml --backend sim --out out/b.json
attack "record past the ops limit" refuse record --scenario past-ops-limit.yaml --backend sim --out out/b.json
attack "record large (valid)" accept record --scenario large.yaml --backend sim --out out/b.json
for kind in bomb deep random wrong-type huge-number huge-end; do
  f=$kind.bundle.json; [ "$kind" = bomb ] && f=bomb.bundle.json.gz
  attack "view bundle $kind" refuse view --bundle "$f" --collectors combined --mode closed --out out/v.json
done
attack "view large bundle (valid)" accept view --bundle large.bundle.json --collectors combined --mode closed --out out/v.json
for f in bomb.view.json.gz deep.view.json random.view.json; do
  attack "profile ${f%%.json*}" refuse profile --profiler causal-graph --view "$f" --out out/e.json
done
attack "profile 100MB query id (valid)" accept profile --profiler causal-graph --view huge-query.view.json --out out/e.json
attack "profile large view (valid)" accept profile --profiler causal-graph --view large.view.json --out out/e.json
for f in bomb.explanation.json.gz deep.explanation.json random.explanation.json \
  negative-cost.explanation.json huge-query.explanation.json; do
  attack "score ${f%%.json*}" refuse score --bundle $B --view $V --explanation "$f"
done
attack "score many edges (valid)" accept score --bundle $B --view $V --explanation many-edges.explanation.json
attack "score bundle bomb" refuse score --bundle bomb.bundle.json.gz --view $V --explanation $E
attack "score view deep" refuse score --bundle $B --view deep.view.json --explanation $E
attack "report large scores (valid)" accept report --results results-large
for r in deep wrong-type long-line deep-manifest; do
  attack "report $r" refuse report --results "results-$r"
done
attack "export large bundle (valid)" accept export --perfetto --bundle large.bundle.json --out out
attack "export bundle bomb" refuse export --perfetto --bundle bomb.bundle.json.gz --out out
attack "export bundle deep" refuse export --perfetto --bundle deep.bundle.json --out out
attack "export explanation random" refuse export --perfetto --bundle $B --explanation random.explanation.json --out out
attack "run --corpus large (valid)" accept run --backend sim --corpus corpus-large --profilers causal-graph --megakernel-reps 0 --quiet --out out
for c in bomb deep wrong; do
  attack "run --corpus $c" fail run --backend sim --corpus "corpus-$c" --profilers causal-graph --megakernel-reps 0 --quiet --out out
done
for p in bomb deep random wrong; do
  attack "megakernel report packs $p" refuse megakernel report --packs "packs-$p" --out out
done
echo "abuse-limits: $failed failed case(s); inputs kept in $WORK" >&2
exit "$failed"
