#!/usr/bin/env python3
"""causalbench adapter for Holistic Trace Analysis' critical-path analysis.

    python3 hta_adapter.py KINETO.json VIEW.json OUT.json [RIDS.json]
    python3 hta_adapter.py --serve

    python3 hta_adapter.py --serve [--hta DIR_OR_FILE_IN_IT] [--exporter CAUSALBENCH]

KINETO.json is the view exported as a Kineto trace (`causalbench export --kineto`), or,
with RIDS.json, the native trace torch.profiler wrote for a `kineto` view's bundle;
VIEW.json the view itself (for its queries and spec); OUT.json the explanation written
(protocol: baselines/PROTOCOL.md). RIDS.json ({"events": {"<traceEvents index>": rid}},
written by baselines/src/hta_native.rs from Kineto's correlation ids) says which events
of a native trace are which records of the view; an export names them itself
(`args["causalbench.rid"]`). Standard library + HTA only. HTA is looked for in the
directory --hta names (or the directory of the file it names: the sandbox of an
external profiler grants the directory of a file argument, PROTOCOL.md), else
$CAUSALBENCH_HTA_DIR, else ${XDG_CACHE_HOME:-~/.cache}/causalbench/hta (where
baselines/hta/setup-hta.sh installs it), else on the normal path.

With --serve, HTA is imported once (importing pandas, networkx and plotly costs far
more than one analysis) and every line of stdin is one request, answered by one line
on stdout, in either of two shapes:
- the batch form of the external-profiler protocol (PROTOCOL.md, "Batch form"):
  {"view": VIEW, "inputs": {"kineto.json": KINETO, "rids.json": RIDS}} (inputs optional)
  is answered by the explanation itself. Without a Kineto input the view is exported
  with `CAUSALBENCH export --kineto` (--exporter) into $TMPDIR first. So HTA runs as an
  external profiler of its own, confined like any other:
  `causalbench run --profiler 'hta=serve: python3 baselines/hta/hta_adapter.py --serve
  --hta ~/.cache/causalbench/hta/.installed-hta-0.5.0-perfetto-0.59.1 --exporter
  target/release/causalbench'`.
- the built-in `hta-critical-path`'s ({"kineto": ..., "view": ..., "out": ..., "rids":
  ... or absent}), answered by {"done": OUT} once OUT is written, or {"error": MESSAGE}.
Exit 3: HTA does not import.

What HTA is asked: `TraceAnalysis.critical_path_analysis(rank=0,
annotation="ProfilerStep", instance_id=0)` on an export (which has one ProfilerStep),
`annotation=""` (HTA's whole-trace window) on a native trace (the executor runs no
profiler steps, docs/torch-track.md), with HTA's defaults (ns timestamps rounded
to µs as HTA does for PyTorch traces), plus HTA's documented option
CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1 so every kernel keeps its launch edge.

How its answer becomes an explanation:
- edges: every edge of HTA's critical-path graph between two different trace events:
  kernel launch (runtime -> kernel)  -> launch, explicit, 1.0 (correlation id)
  kernel-kernel (same stream)        -> stream_order, observed, 1.0
  operator/dependency (same thread)  -> host_order, observed, 1.0
  sync GPU -> GPU (event wait)       -> event, inferred, 0.7 (HTA picks the producer
                                        as the last launch before cudaEventRecord)
  sync GPU -> CPU (synchronize)      -> sync, inferred, 0.7
- diagnosis per query: HTA's critical path to the queried operation (the longest
  weighted path of HTA's graph ending at it; a prefix of HTA's global critical path
  when the operation is on it). The cause is what that path puts right before the
  operation:
  sync GPU->GPU edge -> event_wait; kernel-kernel edge -> stream_backlog;
  launch edge with the op starting > 20 us after its launch call returned (HTA's
  "kernel launch overhead") -> occupancy_pressure (kernel), implicit_sync (a copy whose
  call HTA lists as blocking) or pcie_contention (other copies);
  launch edge with the op starting right away (the launch itself was late, "cpu bound")
  -> implicit_sync when the launch came right after (<= 20 us) a blocking call that
  HTA's path shows released by GPU work (sync edge), else host_compute; a copy whose own duration exceeds its wait ->
  slow_copy. HTA cannot see scheduler or page-fault events, request identity or call
  sites: never claims those. `complete` is true whenever HTA produced a path (HTA has no
  notion of a missing record); false when the queried event is not in HTA's graph.
- when HTA raises on a view (it does on graph replays and on some lossy views,
  baselines/README.md), the explanation claims nothing and carries HTA's message in
  `meta.failure`: the evaluator counts a crash, not an abstention.
- operator questions: the innermost user annotation (NVTX range) enclosing the
  operation's launch call on its thread, as HTA's call stacks link kernels to operators.
"""

import json
import os
import sys
import time


def option(name):
    """The value after `name` on the command line, or None."""
    args = sys.argv[1:]
    if name in args and args.index(name) + 1 < len(args):
        return args[args.index(name) + 1]
    return None


def hta_dir():
    given = option("--hta")
    if given:
        return given if os.path.isdir(given) else os.path.dirname(os.path.abspath(given))
    d = os.environ.get("CAUSALBENCH_HTA_DIR")
    if d:
        return d
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "causalbench", "hta")


_d = hta_dir()
if os.path.isdir(_d) and _d not in sys.path:
    sys.path.insert(0, _d)

os.environ.setdefault("CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE", "1")

NAME = "hta-critical-path"
LAUNCH_GAP_US = 20.0
BLOCKING_COPY_CALLS = ("cudaMemcpy", "cudaMemcpyAsync", "cuMemcpyHtoD", "cuMemcpyDtoH")


def write_atomic(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def abstain(view, q, why=None):
    return {"query": q["id"], "causes": [], "critical_path": [], "complete": False,
            "phases": {"host_enqueue": 0, "queued_to_submitted": 0,
                       "submitted_to_start": 0, "execution": 0}}


def explanation(view, version, wall_ms, edges, diagnoses):
    return {"schema_version": 1,
            "meta": {"profiler": NAME, "version": version, "view": view["spec"],
                     "wall_ms": wall_ms},
            "edges": edges, "attribution": [], "diagnoses": diagnoses}


def load_hta():
    """Imports HTA once: (modules, version), or (None, why) when it does not import."""
    try:
        import logging
        import warnings

        warnings.simplefilter("ignore")
        import hta
        from hta.analyzers.critical_path_analysis import CPEdgeType
        from hta.configs.config import logger as hta_logger
        from hta.trace_analysis import TraceAnalysis
        import networkx as nx

        hta_logger.setLevel(logging.CRITICAL)
        version = "hta-" + str(getattr(hta, "__version__", "unknown"))
    except Exception as e:
        return None, f"cannot import HTA ({type(e).__name__}: {e})"
    try:
        from importlib.metadata import version as pkg_version

        version = "hta-" + pkg_version("HolisticTraceAnalysis")
    except Exception:
        pass
    return {"CPEdgeType": CPEdgeType, "TraceAnalysis": TraceAnalysis, "nx": nx}, version


def one_line(message, limit=1000):
    """A failure message as the explanation format takes it: one line, bounded."""
    text = " ".join(str(message).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def crashed(view, version, wall, why):
    """HTA raised on this view: an explanation that claims nothing and says why
    (meta.failure), so the crash is counted as such, not as an abstention."""
    x = explanation(view, version, wall, [], [abstain(view, q) for q in view["queries"]])
    x["meta"]["failure"] = one_line(why)
    return x


def analyze(hta_modules, version, kineto_path, view_path, out_path, rids_path=None):
    """HTA's critical path on one view, written as an explanation to out_path."""
    write_atomic(out_path, analysis(hta_modules, version, kineto_path, view_path, rids_path))


def analysis(hta_modules, version, kineto_path, view_path, rids_path=None):
    """HTA's critical path on one view, as an explanation."""
    with open(view_path) as f:
        view = json.load(f)
    # Analysis time: from here (HTA imported) to the explanation, as HTA would run in a
    # notebook that already imported it.
    t0 = time.perf_counter()
    try:
        x = explain(hta_modules, version, kineto_path, view, t0, rids_path)
    except Exception as e:
        wall = (time.perf_counter() - t0) * 1000.0
        print(f"hta-critical-path: HTA failed on this view: {type(e).__name__}: {e}",
              file=sys.stderr)
        x = crashed(view, version, wall, f"HTA raised {type(e).__name__}: {e}")
    return x


def exported(view_path):
    """The view as a Kineto trace, by `causalbench export --kineto` (--exporter)."""
    import subprocess

    exporter = option("--exporter") or "causalbench"
    out = os.path.join(os.environ.get("TMPDIR") or "/tmp", "kineto.json")
    subprocess.run([exporter, "export", "--kineto", "--view", view_path, "--out", out],
                   check=True, stdout=subprocess.DEVNULL, stderr=sys.stderr)
    return out


def answer(hta_modules, version, job):
    """One request of either shape (module docstring): the line that answers it."""
    if "out" not in job:
        # The batch form of the external-profiler protocol: the answer is the explanation.
        inputs = job.get("inputs") or {}
        kineto = inputs.get("kineto.json") or exported(job["view"])
        return analysis(hta_modules, version, kineto, job["view"], inputs.get("rids.json"))
    analyze(hta_modules, version, job["kineto"], job["view"], job["out"], job.get("rids"))
    return {"done": job["out"]}


def serve(hta_modules, version):
    """One process for many views: HTA is imported once, then each line of stdin is one
    request (module docstring), each answered by one line on stdout."""
    # Answers go to the real stdout; whatever HTA or its libraries print goes to stderr,
    # so that no stray line can pass for an answer.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = answer(hta_modules, version, json.loads(line))
        except Exception as e:  # the adapter itself failed: the caller reports it
            reply = {"error": one_line(f"{type(e).__name__}: {e}")}
        answers.write(json.dumps(reply) + "\n")
        answers.flush()
    return 0


def main(argv):
    serving = len(argv) >= 2 and argv[1] == "--serve"
    if len(argv) not in (4, 5) and not serving:
        print("usage: hta_adapter.py KINETO.json VIEW.json OUT.json [RIDS.json] | "
              "hta_adapter.py --serve",
              file=sys.stderr)
        return 2
    hta_modules, version = load_hta()
    if hta_modules is None:
        print(f"hta-critical-path: {version}", file=sys.stderr)
        return 3
    if serving:
        return serve(hta_modules, version)
    analyze(hta_modules, version, argv[1], argv[2], argv[3], argv[4] if len(argv) == 5 else None)
    return 0


def read_trace_events(path):
    """traceEvents of a Kineto trace, gzip-compressed or not (HTA reads both)."""
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def critical_path_graph(hta_modules, trace_file, annotation, instance):
    """HTA's critical-path graph of one trace file (HTA prints progress: kept off stdout,
    the serve protocol's channel)."""
    import contextlib
    import io

    TraceAnalysis = hta_modules["TraceAnalysis"]
    with contextlib.redirect_stdout(io.StringIO()):
        ta = TraceAnalysis(trace_files={0: trace_file}, trace_dir=os.path.dirname(trace_file))
        res = ta.critical_path_analysis(rank=0, annotation=annotation, instance_id=instance)
    if res is None:
        raise RuntimeError("critical_path_analysis returned nothing")
    g, ok = res
    if not ok:
        raise RuntimeError("critical path algorithm failed")
    return g


# HTA's graphs of the last native traces: the loss-free kineto views of one bundle (the
# instrumented and the closed one) are answers from the same file, so HTA analyses it
# once; each view's wall_ms still counts that analysis ((path, mtime, size) -> (events,
# graph, analysis seconds)).
NATIVE_GRAPHS = {}
NATIVE_GRAPHS_KEPT = 16


def native_graph(hta_modules, trace_file):
    st = os.stat(trace_file)
    key = (trace_file, st.st_mtime_ns, st.st_size)
    if key not in NATIVE_GRAPHS:
        t = time.perf_counter()
        raw = read_trace_events(trace_file)
        # A native trace has no ProfilerStep: HTA's whole-trace window ("").
        g = critical_path_graph(hta_modules, trace_file, "", None)
        while len(NATIVE_GRAPHS) >= NATIVE_GRAPHS_KEPT:
            NATIVE_GRAPHS.pop(next(iter(NATIVE_GRAPHS)))
        NATIVE_GRAPHS[key] = (raw, g, time.perf_counter() - t)
        return raw, g, 0.0
    raw, g, seconds = NATIVE_GRAPHS[key]
    return raw, g, seconds


def explain(hta_modules, version, kineto_path, view, t0, rids_path=None):
    CPEdgeType = hta_modules["CPEdgeType"]
    nx = hta_modules["nx"]
    # HTA joins a relative file name to trace_dir: always give it the absolute path.
    trace_file = os.path.abspath(kineto_path)
    reused_s = 0.0
    if rids_path is not None:
        raw, g, reused_s = native_graph(hta_modules, trace_file)
        with open(rids_path) as f:
            named = json.load(f)["events"]
        pairs = ((int(i), r) for i, r in named.items())
    else:
        raw = read_trace_events(trace_file)
        g = critical_path_graph(hta_modules, trace_file, "ProfilerStep", 0)
        pairs = ((i, (e.get("args") or {}).get("causalbench.rid")) for i, e in enumerate(raw))
    rid_of = {}
    idx_of_rid = {}
    for i, r in pairs:
        if r is not None and 0 <= i < len(raw) and raw[i].get("ph") == "X":
            rid_of[i] = r
            idx_of_rid[r] = i

    nodes = g.node_list

    def ev(n):
        return raw[nodes[n].ev_idx]

    def is_gpu(e):
        return e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")

    # ---- edges
    edges = {}
    for u, v in g.edges:
        obj = g.edges[u, v]["object"]
        a, b = nodes[u].ev_idx, nodes[v].ev_idx
        if a == b or a not in rid_of or b not in rid_of:
            continue
        ea, eb = raw[a], raw[b]
        t = obj.type
        if t == CPEdgeType.KERNEL_LAUNCH_DELAY:
            k = ("launch", "explicit", 1.0)
        elif t == CPEdgeType.KERNEL_KERNEL_DELAY:
            k = ("stream_order", "observed", 1.0)
        elif t in (CPEdgeType.OPERATOR_KERNEL, CPEdgeType.DEPENDENCY):
            if is_gpu(ea) or is_gpu(eb):
                continue
            k = ("host_order", "observed", 1.0)
        elif t == CPEdgeType.SYNC_DEPENDENCY:
            k = ("event", "inferred", 0.7) if is_gpu(eb) else ("sync", "inferred", 0.7)
        else:
            continue
        key = (rid_of[a], rid_of[b], k[0])
        edges[key] = {"src": rid_of[a], "dst": rid_of[b], "type": k[0], "evidence": k[1],
                      "confidence": k[2]}

    # ---- diagnoses
    topo = list(nx.topological_sort(g))

    def longest_to(end):
        anc = nx.ancestors(g, end) | {end}
        dist, pred = {}, {}
        for n in topo:
            if n not in anc:
                continue
            best, bp = 0.0, None
            for p in g.predecessors(n):
                w = float(g.edges[p, n]["weight"]) + dist[p]
                if bp is None or w > best:
                    best, bp = w, p
            dist[n], pred[n] = best, bp
        path = [end]
        while pred[path[-1]] is not None:
            path.append(pred[path[-1]])
        path.reverse()
        return path

    def edge_into(path, n):
        i = path.index(n)
        if i == 0:
            return None, None
        p = path[i - 1]
        return p, g.edges[p, n]["object"].type

    def host_cause(path, op_start):
        """Why a host call (a launch, or the queried call) started late, from the host
        part of HTA's path: right after a blocking call that GPU work released
        (HTA's sync dependency) -> implicit_sync; otherwise HTA sees CPU time
        ("cpu_bound") -> host_compute."""
        p, t = edge_into(path, op_start)
        if p is None or is_gpu(ev(p)):
            return "host_compute"
        gap_us = nodes[op_start].ts - nodes[p].ts
        if (not nodes[p].is_start and ev(p).get("name") in g.BLOCKING_SYNC_CALLS
                and gap_us <= LAUNCH_GAP_US):
            q, tq = edge_into(path, p)
            if tq == CPEdgeType.SYNC_DEPENDENCY:
                return "implicit_sync"
        return "host_compute"

    def enclosing_annotation(e):
        best = None
        for a in raw:
            if a.get("cat") != "user_annotation" or a.get("ph") != "X":
                continue
            if a.get("name", "").startswith("ProfilerStep"):
                continue
            if a.get("tid") != e.get("tid") or a.get("pid") != e.get("pid"):
                continue
            if a["ts"] <= e["ts"] and e["ts"] + e.get("dur", 0) <= a["ts"] + a["dur"]:
                if best is None or a["dur"] <= best["dur"]:
                    best = a
        return best["name"] if best else None

    corr_runtime = {}
    for i, e in enumerate(raw):
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("ph") == "X":
            corr_runtime[(e.get("args") or {}).get("correlation")] = e

    diagnoses = []
    for q in view["queries"]:
        i = idx_of_rid.get(q["rid"])
        start, end = g.get_nodes_for_event(i) if i is not None else (None, None)
        if start is None or end is None:
            d = abstain(view, q)
            d["first_unresolved"] = q["rid"]
            diagnoses.append(d)
            continue
        path = longest_to(end.idx)
        rids = []
        for n in path:
            r = rid_of.get(nodes[n].ev_idx)
            if r is not None and (not rids or rids[-1] != r):
                rids.append(r)
        if not rids or rids[-1] != q["rid"]:
            rids.append(q["rid"])
        e = raw[i]
        phases = {"host_enqueue": 0.0, "queued_to_submitted": 0.0,
                  "submitted_to_start": 0.0, "execution": 0.0}
        causes = []
        if is_gpu(e):
            runtime = corr_runtime.get((e.get("args") or {}).get("correlation"))
            p, t = edge_into(path, start.idx) if start.idx in path else (None, None)
            wait_us = 0.0
            if t == CPEdgeType.SYNC_DEPENDENCY:
                causes.append(("event_wait", 1.0))
                wait_us = max(0.0, e["ts"] - ev(p)["ts"] - ev(p).get("dur", 0))
                phases["queued_to_submitted"] = wait_us * 1000.0
            elif t == CPEdgeType.KERNEL_KERNEL_DELAY:
                causes.append(("stream_backlog", 1.0))
                if runtime:
                    wait_us = max(0.0, e["ts"] - runtime["ts"] - runtime["dur"])
                phases["queued_to_submitted"] = wait_us * 1000.0
            elif t == CPEdgeType.KERNEL_LAUNCH_DELAY:
                r = ev(p)
                gap = e["ts"] - (r["ts"] + r.get("dur", 0))
                if gap > LAUNCH_GAP_US:
                    wait_us = gap
                    if e.get("cat") == "kernel":
                        causes.append(("occupancy_pressure", 1.0))
                    elif r.get("name") in BLOCKING_COPY_CALLS and r.get("name") in g.BLOCKING_SYNC_CALLS:
                        causes.append(("implicit_sync", 1.0))
                        causes.append(("pcie_contention", 0.5))
                    else:
                        causes.append(("pcie_contention", 1.0))
                    phases["submitted_to_start"] = gap * 1000.0
                else:
                    hc = host_cause(path, p)
                    causes.append((hc, 1.0))
                    prev = path.index(p)
                    if prev > 0:
                        phases["host_enqueue"] = max(0.0, (nodes[p].ts - nodes[path[prev - 1]].ts)) * 1000.0
            else:
                causes.append(("host_compute", 1.0))
            if e.get("cat") == "gpu_memcpy" and e.get("dur", 0) > wait_us:
                causes.insert(0, ("slow_copy", 1.0))
                phases["execution"] = e.get("dur", 0) * 1000.0
        else:
            hc = host_cause(path, start.idx)
            causes.append((hc, 1.0))
        # Ranked, scores normalized; later entries are alternatives HTA's path also shows.
        seen, ranked = set(), []
        for k, (label, s) in enumerate(causes):
            if label not in seen:
                seen.add(label)
                ranked.append((label, s / (1 + k)))
        total = sum(s for _, s in ranked) or 1.0
        d = {"query": q["id"],
             "causes": [{"label": l, "score": round(s / total, 3)} for l, s in ranked],
             "critical_path": rids, "phases": phases, "complete": True}
        if q.get("question") == "operator":
            runtime = corr_runtime.get((e.get("args") or {}).get("correlation")) if is_gpu(e) else e
            name = enclosing_annotation(runtime) if runtime else None
            if name:
                d["answer"] = name
        diagnoses.append(d)

    wall = (time.perf_counter() - t0 + reused_s) * 1000.0
    ordered = sorted(edges.values(), key=lambda x: (x["dst"], x["src"], x["type"]))
    return explanation(view, version, wall, ordered, diagnoses)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
