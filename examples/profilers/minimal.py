#!/usr/bin/env python3
"""A minimal causalbench external profiler (stdlib only).

Usage: minimal.py VIEW.json OUT.json     (one view per process)
       minimal.py --serve                (batch form: one request per line on stdin)
Protocol: baselines/PROTOCOL.md. Claims launch edges by correlation id, request
tokens from external correlation records, and for each query the cause of the
device phase that exceeds the median of the same operation's peers the most.
"""
import json
import statistics
import sys
import time

DEVICE = ("kernel", "memcpy", "memset")


def phases(r):
    q, s, st, e = r["queued"], r["submitted"], r["start"], r["end"]
    return (
        s - q if q and s >= q else 0,  # queued -> submitted
        st - s if s and st >= s else 0,  # submitted -> start
        e - st,  # execution
    )


def peer_key(r):
    if r["kind"] == "kernel":
        return ("kernel", r["name"])
    if r["kind"] == "memcpy":
        return ("memcpy", r["direction"], r["bytes"])
    return ("memset", r["bytes"])


def main(view_path, out_path):
    out = explain(view_path)
    with open(out_path, "w") as f:
        json.dump(out, f)
    return 0


def serve():
    """The batch form: each line of stdin names a view ({"view": PATH}); each is
    answered by its explanation on one line of stdout."""
    for line in sys.stdin:
        if line.strip():
            out = explain(json.loads(line)["view"])
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()
    return 0


def explain(view_path):
    t0 = time.monotonic()
    with open(view_path) as f:
        view = json.load(f)
    records = view["records"]
    by_rid = {r["rid"]: r for r in records}
    api = {r["correlation_id"]: r for r in records if r["kind"] == "api"}
    token = {r["correlation_id"]: str(r["external_id"])
             for r in records if r["kind"] == "external_correlation"}
    peers = {}
    for r in records:
        if r["kind"] in DEVICE:
            peers.setdefault(peer_key(r), []).append(r)

    edges, attribution = [], []
    for r in records:
        if r["kind"] not in DEVICE:
            continue
        a = api.get(r["correlation_id"])
        if a is not None:
            edges.append({"src": a["rid"], "dst": r["rid"], "type": "launch",
                          "evidence": "explicit", "confidence": 1.0})
        else:
            edges.append({"src": r["rid"], "dst": r["rid"], "type": "launch",
                          "evidence": "missing", "confidence": 0.8})
        attribution.append({"rid": r["rid"],
                            "request": token.get(r["correlation_id"], "unknown")})

    diagnoses = []
    for q in view["queries"]:
        r = by_rid.get(q["rid"])
        diag = {"query": q["id"], "causes": [{"label": "none", "score": 1.0}],
                "critical_path": [q["rid"]], "complete": True}
        if r is not None and r["kind"] in DEVICE:
            own = phases(r)
            others = [phases(p) for p in peers[peer_key(r)] if p["rid"] != r["rid"]]
            base = [statistics.median(x[i] for x in others) if others else 0 for i in range(3)]
            excess = [max(0, own[i] - base[i]) for i in range(3)]
            if not others:
                excess[2] = 0  # a long op is not a late one without peers
            i = max(range(3), key=lambda k: excess[k])
            copy = r["kind"] == "memcpy"
            if excess[i] > 20_000:
                label = [("stream_backlog",) * 2,
                         ("occupancy_pressure", "pcie_contention"),
                         ("occupancy_pressure", "slow_copy")][i][1 if copy else 0]
                diag["causes"] = [{"label": label, "score": 0.8},
                                  {"label": "none", "score": 0.2}]
            diag["phases"] = {"host_enqueue": 0.0, "queued_to_submitted": float(excess[0]),
                              "submitted_to_start": float(excess[1]), "execution": float(excess[2])}
            a = api.get(r["correlation_id"])
            if a is not None:
                diag["critical_path"] = [a["rid"], r["rid"]]
            else:
                diag["complete"] = False
                diag["first_unresolved"] = r["rid"]
        diagnoses.append(diag)

    return {"schema_version": view["schema_version"],
            "meta": {"profiler": "minimal.py", "version": "0.1", "view": view["spec"],
                     "wall_ms": (time.monotonic() - t0) * 1000.0},
            "edges": edges, "attribution": attribution, "diagnoses": diagnoses}


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        sys.exit(serve())
    if len(sys.argv) != 3:
        sys.stderr.write("usage: minimal.py VIEW.json OUT.json\n")
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
