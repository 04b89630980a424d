#!/usr/bin/env python3
"""causalbench adapter for two further analyses of Holistic Trace Analysis (HTA),
each scored as its own profiler on the native Kineto trace torch.profiler wrote
beside a bundle (baselines/src/hta_analyses.rs):

    python3 hta_analyses.py --serve

Each line of stdin names one view: {"analysis": "idle-time" | "launch-stats",
"kineto": TRACE, "view": VIEW, "out": OUT, "rids": RIDS}; each is answered by one line
on stdout ({"done": OUT} or {"error": MESSAGE}) once the explanation (protocol:
baselines/PROTOCOL.md) is written to OUT. RIDS ({"events": {"<traceEvents index>":
rid}}, written by baselines/src/hta_native.rs from Kineto's correlation ids) says which
events of the trace are which records of the view. Exit 3: HTA does not import.

What HTA is asked, as its documentation shows users asking it (no private method):
- `hta-idle-time`: `TraceAnalysis.get_idle_time_breakdown(ranks=[0], visualize=False)`:
  per CUDA stream, the time the stream was idle before each of its kernels, copies and
  memsets, split into "host wait" (the op's launch call started after the stream's
  previous op ended: the CPU did not enqueue work fast enough), "kernel wait" (a gap
  under `consecutive_kernel_delay`: launch overhead between back-to-back ops) and
  "other" (HTA's example: a kernel waiting for a CUDA event of another stream).
- `hta-launch-stats`: `TraceAnalysis.get_cuda_kernel_launch_stats(ranks=[0],
  visualize=False)` with HTA's default cut-offs: for each op launched by
  `cudaLaunchKernel`, `cudaLaunchKernelExC`, `cudaMemcpyAsync` or `cudaMemsetAsync`
  (joined by correlation id) the launch call's duration (`cpu_duration`; above
  `runtime_cutoff` = 50 us HTA calls it a runtime outlier) and its launch delay (the op's
  start minus the call's end; above `launch_delay_cutoff` = 100 us a launch-delay
  outlier).

How an answer becomes a diagnosis (only `cause` questions about a device op; every
other question, and a host call, is outside what these analyses answer: abstained):
- idle time: the queried op's stream's categories, largest idle time first, each
  with its share of the stream's idle time as score: host wait -> host_compute (the
  only host cause HTA's category implies: it cannot tell a preempted thread, a page
  fault or a queue from the application's own work), kernel wait -> stream_backlog
  (the op followed its stream's previous op back to back), other -> event_wait. A
  stream HTA finds never idle: abstained.
- launch stats: an op without a row (a kernel launched by `cuLaunchKernel`, as CuPy's
  kernels of the PyTorch track are, or by a graph launch) is abstained. A launch-delay
  outlier says the op waited on the device, not for what: the device-side causes share
  the score (a kernel: stream_backlog, occupancy_pressure, event_wait; a copy:
  pcie_contention, stream_backlog, event_wait). A runtime outlier says the call
  itself was long: implicit_sync for a copy call (a pageable cudaMemcpyAsync
  blocks), host_compute for a launch. Neither: the op started as soon as its call
  returned, so its lateness came before the call: host_compute.
- No edges, no critical path, no phases beyond what the analysis measured, never
  `complete` (neither analysis claims a path).
- When HTA raises on a view the explanation claims nothing and carries HTA's message in
  `meta.failure`: the evaluator counts a crash, not an abstention.
"""

import contextlib
import io
import json
import os
import sys
import time


def hta_dir():
    d = os.environ.get("CAUSALBENCH_HTA_DIR")
    if d:
        return d
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "causalbench", "hta")


_d = hta_dir()
if os.path.isdir(_d) and _d not in sys.path:
    sys.path.insert(0, _d)

NAMES = {"idle-time": "hta-idle-time", "launch-stats": "hta-launch-stats"}
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
# HTA's categories (IdleTimeType, lower-cased by get_idle_time_breakdown) -> our labels.
IDLE_LABEL = {"host_wait": "host_compute", "kernel_wait": "stream_backlog", "other": "event_wait"}
# HTA's defaults of get_cuda_kernel_launch_stats, in microseconds.
RUNTIME_CUTOFF_US = 50
LAUNCH_DELAY_CUTOFF_US = 100
DEVICE_SIDE = {
    "kernel": ("stream_backlog", "occupancy_pressure", "event_wait"),
    "gpu_memcpy": ("pcie_contention", "stream_backlog", "event_wait"),
    "gpu_memset": ("stream_backlog", "occupancy_pressure", "event_wait"),
}
COPY_CALLS = ("cudaMemcpyAsync", "cudaMemsetAsync")


def load_hta():
    """Imports HTA once: (TraceAnalysis, version), or (None, why)."""
    try:
        import logging
        import warnings

        warnings.simplefilter("ignore")
        from hta.configs.config import logger as hta_logger
        from hta.trace_analysis import TraceAnalysis

        hta_logger.setLevel(logging.CRITICAL)
    except Exception as e:
        return None, f"cannot import HTA ({type(e).__name__}: {e})"
    try:
        from importlib.metadata import version as pkg_version

        version = "hta-" + pkg_version("HolisticTraceAnalysis")
    except Exception:
        version = "hta-unknown"
    return TraceAnalysis, version


def one_line(message, limit=1000):
    text = " ".join(str(message).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def write_atomic(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def zero_phases():
    return {"host_enqueue": 0, "queued_to_submitted": 0, "submitted_to_start": 0, "execution": 0}


def abstained(q):
    return {"query": q["id"], "causes": [], "critical_path": [], "complete": False,
            "phases": zero_phases()}


def explanation(name, view, version, wall_ms, diagnoses):
    return {"schema_version": 1,
            "meta": {"profiler": name, "version": version, "view": view["spec"],
                     "wall_ms": wall_ms},
            "edges": [], "attribution": [], "diagnoses": diagnoses}


def read_trace_events(path):
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def trace_analysis(TraceAnalysis, trace_file):
    """HTA's parse of one trace (its progress messages kept off stdout, the reply channel)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return TraceAnalysis(trace_files={0: trace_file}, trace_dir=os.path.dirname(trace_file))


def idle_causes(ta):
    """Per stream, HTA's idle categories as ranked causes: {stream: [(label, share)]}."""
    with contextlib.redirect_stdout(io.StringIO()):
        idle, _ = ta.get_idle_time_breakdown(ranks=[0], visualize=False)
    by_stream = {}
    for row in idle.itertuples(index=False):
        label = IDLE_LABEL.get(str(row.idle_category))
        share = float(row.idle_time_ratio) if row.idle_time_ratio == row.idle_time_ratio else 0.0
        if label is None or not share > 0:
            continue
        by_stream.setdefault(int(row.stream), []).append((label, share))
    return {s: sorted(c, key=lambda x: -x[1]) for s, c in by_stream.items()}


def launch_rows(ta):
    """HTA's launch statistics by correlation id: {correlation: (cpu_us, delay_us)}."""
    with contextlib.redirect_stdout(io.StringIO()):
        stats = ta.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)
    df = stats.get(0)
    rows = {}
    if df is None:
        return rows
    for row in df.itertuples(index=False):
        rows[int(row.correlation)] = (float(row.cpu_duration), float(row.launch_delay))
    return rows


def diagnose_idle(q, event, by_stream):
    stream = (event.get("args") or {}).get("stream")
    causes = by_stream.get(stream)
    if not causes:
        return abstained(q)
    d = abstained(q)
    d["causes"] = [{"label": l, "score": round(s, 3)} for l, s in causes]
    return d


def diagnose_launch(q, event, rows, call_names):
    correlation = (event.get("args") or {}).get("correlation")
    row = rows.get(correlation)
    if row is None:
        return abstained(q)
    cpu_us, delay_us = row
    d = abstained(q)
    if delay_us > LAUNCH_DELAY_CUTOFF_US:
        labels = DEVICE_SIDE[event["cat"]]
        d["causes"] = [{"label": l, "score": round(1.0 / len(labels), 3)} for l in labels]
        d["phases"]["submitted_to_start"] = delay_us * 1000.0
    elif cpu_us > RUNTIME_CUTOFF_US:
        copy = call_names.get(correlation) in COPY_CALLS
        d["causes"] = [{"label": "implicit_sync" if copy else "host_compute", "score": 1.0}]
        d["phases"]["host_enqueue"] = cpu_us * 1000.0
    else:
        d["causes"] = [{"label": "host_compute", "score": 1.0}]
    return d


# HTA's answers on the last native traces: the loss-free kineto views of one bundle (the
# instrumented and the closed one) are answers from the same file, so each analysis runs
# once per file; each view's wall_ms still counts that analysis ((path, mtime, size,
# analysis) -> (events, answer, analysis seconds)).
ANSWERS = {}
ANSWERS_KEPT = 16


def answer_of(TraceAnalysis, analysis, trace_file):
    """(trace events, HTA's answer, seconds HTA took) for one analysis of one file."""
    st = os.stat(trace_file)
    key = (trace_file, st.st_mtime_ns, st.st_size, analysis)
    if key not in ANSWERS:
        t = time.perf_counter()
        raw = read_trace_events(trace_file)
        ta = trace_analysis(TraceAnalysis, trace_file)
        if analysis == "idle-time":
            answer = idle_causes(ta)
        else:
            calls = {(e.get("args") or {}).get("correlation"): e.get("name") for e in raw
                     if e.get("cat") in ("cuda_runtime", "cuda_driver")}
            answer = (launch_rows(ta), calls)
        while len(ANSWERS) >= ANSWERS_KEPT:
            ANSWERS.pop(next(iter(ANSWERS)))
        ANSWERS[key] = (raw, answer, time.perf_counter() - t)
        return raw, answer, 0.0
    return ANSWERS[key]


def explain(TraceAnalysis, analysis, trace_file, view, rids_path):
    """Diagnoses of the view's queries, and the seconds of an earlier analysis reused."""
    raw, answer, reused_s = answer_of(TraceAnalysis, analysis, trace_file)
    with open(rids_path) as f:
        named = {int(i): r for i, r in json.load(f)["events"].items()}
    index_of_rid = {r: i for i, r in named.items() if 0 <= i < len(raw)}
    if analysis == "idle-time":
        by_stream = answer
    else:
        rows, call_names = answer
    diagnoses = []
    for q in view["queries"]:
        i = index_of_rid.get(q["rid"])
        event = raw[i] if i is not None else None
        if (q.get("question", "cause") != "cause" or event is None
                or event.get("cat") not in DEVICE_CATS):
            diagnoses.append(abstained(q))
        elif analysis == "idle-time":
            diagnoses.append(diagnose_idle(q, event, by_stream))
        else:
            diagnoses.append(diagnose_launch(q, event, rows, call_names))
    return diagnoses, reused_s


def analyze(TraceAnalysis, version, job):
    analysis = job["analysis"]
    name = NAMES[analysis]
    with open(job["view"]) as f:
        view = json.load(f)
    # Analysis time: from here (HTA imported) to the explanation.
    t0 = time.perf_counter()
    try:
        diagnoses, reused_s = explain(TraceAnalysis, analysis, os.path.abspath(job["kineto"]),
                                      view, job["rids"])
        wall = (time.perf_counter() - t0 + reused_s) * 1000.0
        x = explanation(name, view, version, wall, diagnoses)
    except Exception as e:
        wall = (time.perf_counter() - t0) * 1000.0
        x = explanation(name, view, version, wall, [abstained(q) for q in view["queries"]])
        x["meta"]["failure"] = one_line(f"HTA raised {type(e).__name__}: {e}")
    write_atomic(job["out"], x)


def main(argv):
    if argv[1:] != ["--serve"]:
        print("usage: hta_analyses.py --serve", file=sys.stderr)
        return 2
    TraceAnalysis, version = load_hta()
    if TraceAnalysis is None:
        print(f"hta_analyses: {version}", file=sys.stderr)
        return 3
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            job = json.loads(line)
            analyze(TraceAnalysis, version, job)
            reply = {"done": job["out"]}
        except Exception as e:  # the adapter itself failed: the caller reports it
            reply = {"error": one_line(f"{type(e).__name__}: {e}")}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
