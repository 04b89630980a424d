#!/usr/bin/env python3
"""Decode a causalbench Perfetto export with the Perfetto project's own protos and check it.

    perfetto_decode.py BUNDLE.json TRACE.perfetto-trace [--view VIEW.json]
                       [--explanation EXPLANATION.json]

The protos are the ones the `perfetto` PyPI package ships, compiled by the Perfetto
project from protos/perfetto/trace/perfetto_trace.proto
(perfetto.protos.perfetto.trace.perfetto_trace_pb2), decoded with google.protobuf. They
are looked for in $CAUSALBENCH_HTA_DIR (or ~/.cache/causalbench/hta, where
baselines/hta/setup-hta.sh installs them), then on the normal path.

Without --explanation the trace is the truth export; with it, the claimed export.
Expected counts are computed here from the bundle (and view / explanation) JSON, not
taken from the exporter:
- one thread track per host thread, one stream track per (device, stream);
- a slice (SLICE_BEGIN + SLICE_END) for every shown record with an interval, an instant
  for every zero-length one, each carrying its rid; in the truth file also one per node
  on an edge that no shown record observes;
- one flow per true edge (truth) / per drawable claimed edge (claimed), each flow id
  started by exactly one event and terminated by exactly one instant, no earlier;
- slices nest on every track; every track_uuid and parent_uuid is declared.
Exit 0 = OK (a JSON summary on stdout), 1 = check failed, 3 = protos not importable.
"""

import json
import os
import sys
from collections import Counter, defaultdict


def proto_module():
    d = os.environ.get("CAUSALBENCH_HTA_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "causalbench", "hta")
    if os.path.isdir(d):
        sys.path.insert(0, d)
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2  # noqa: E402

    return perfetto_trace_pb2


def interval(r):
    k = r["kind"]
    if k in ("api", "kernel", "memcpy", "memset", "sync", "nvtx"):
        return r["start"], r["end"]
    if k in ("cuda_event", "marker"):
        return r["ts"], r["ts"]
    if k == "uprobe":
        return r["enter"], r["exit"]
    if k == "sched":
        return r["switch_out"], r["switch_in"]
    if k == "page_fault":
        return r["ts"], r["ts"] + r["duration"]
    return None


def main(argv):
    args = argv[1:]
    opts = {}
    pos = []
    i = 0
    while i < len(args):
        if args[i] in ("--view", "--explanation"):
            opts[args[i][2:]] = args[i + 1]
            i += 2
        else:
            pos.append(args[i])
            i += 1
    bundle_path, trace_path = pos
    try:
        pb = proto_module()
    except Exception as e:
        print(f"perfetto protos not importable: {e}", file=sys.stderr)
        return 3
    bundle = json.load(open(bundle_path))
    view = json.load(open(opts["view"])) if "view" in opts else None
    expl = json.load(open(opts["explanation"])) if "explanation" in opts else None
    records = view["records"] if view else bundle["trace"]
    truth = bundle["ground_truth"]

    trace = pb.Trace()
    trace.ParseFromString(open(trace_path, "rb").read())
    errors = []

    # ---- tracks
    tracks = {}
    for p in trace.packet:
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.uuid in tracks:
                errors.append(f"track uuid {d.uuid} declared twice")
            tracks[d.uuid] = d
    for u, d in tracks.items():
        if d.HasField("parent_uuid") and d.parent_uuid not in tracks:
            errors.append(f"track {u} has unknown parent {d.parent_uuid}")
    thread_tracks = [d for d in tracks.values() if d.HasField("thread")]
    gpu_procs = {u for u, d in tracks.items()
                 if d.HasField("process") and d.process.process_name.startswith("GPU ")}
    stream_tracks = [d for d in tracks.values()
                     if d.parent_uuid in gpu_procs and d.name.startswith("stream ")]

    exp_tids = {r["tid"] for r in records if "tid" in r}
    exp_streams = set()
    for r in records:
        if r["kind"] in ("kernel", "memcpy", "memset"):
            exp_streams.add((r["device"], r["stream"]))
        elif r["kind"] == "cuda_event":
            exp_streams.add((0, r["stream"]))
        elif r["kind"] == "sync" and r["sync_type"] in ("stream_wait_event", "stream_synchronize"):
            exp_streams.add((0, r["stream"]))
    if {d.thread.tid for d in thread_tracks} != exp_tids or len(thread_tracks) != len(exp_tids):
        errors.append(f"thread tracks {sorted(d.thread.tid for d in thread_tracks)} != tids {sorted(exp_tids)}")
    if len(stream_tracks) != len(exp_streams):
        errors.append(f"{len(stream_tracks)} stream tracks, expected {len(exp_streams)}")

    # ---- events
    T = pb.TrackEvent
    stacks = defaultdict(list)
    begins = ends = instants = 0
    last_ts = -1
    flow_start = defaultdict(list)
    flow_end = defaultdict(list)
    rid_seen = Counter()
    for p in trace.packet:
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        if e.track_uuid not in tracks:
            errors.append(f"event on undeclared track {e.track_uuid}")
        if p.timestamp < last_ts:
            errors.append(f"timestamps go back: {p.timestamp} after {last_ts}")
        last_ts = p.timestamp
        if e.type == T.TYPE_SLICE_BEGIN:
            begins += 1
            stacks[e.track_uuid].append(p.timestamp)
        elif e.type == T.TYPE_SLICE_END:
            ends += 1
            if not stacks[e.track_uuid]:
                errors.append(f"slice end without begin on track {e.track_uuid}")
            else:
                stacks[e.track_uuid].pop()
        elif e.type == T.TYPE_INSTANT:
            instants += 1
        else:
            errors.append(f"unexpected event type {e.type}")
        for f in e.flow_ids:
            flow_start[f].append((p.timestamp, e.type))
        for f in e.terminating_flow_ids:
            flow_end[f].append((p.timestamp, e.type))
        if e.type in (T.TYPE_SLICE_BEGIN, T.TYPE_INSTANT):
            cat = e.categories[0] if e.categories else ""
            for a in e.debug_annotations:
                if a.name == "rid" and cat not in ("flow", "symptom", "missing"):
                    rid_seen[a.uint_value] += 1
    for u, st in stacks.items():
        if st:
            errors.append(f"{len(st)} slices left open on track {u}")

    shown = {}
    for r in records:
        iv = interval(r)
        if iv is not None:
            shown[r["rid"]] = iv
    for rid in shown:
        if rid_seen[rid] != 1:
            errors.append(f"record {rid} drawn {rid_seen[rid]} times")
    exp_slices = sum(1 for s, e in shown.values() if e > s)
    exp_instants_records = len(shown) - exp_slices

    # ---- flows
    if expl is None:
        exp_flows = len(truth["edges"])
        owners_shown = set()
        for n in truth["nodes"]:
            if any(r in shown for r in n["rids"]):
                owners_shown.add(n["id"])
        on_edges = {x for e in truth["edges"] for x in (e["src"], e["dst"])}
        unrec = [truth["nodes"][n] for n in on_edges if n not in owners_shown]
        exp_slices += sum(1 for n in unrec if n["end"] > n["start"])
        extra_instants = sum(1 for n in unrec if n["end"] <= n["start"])
        extra_instants += len(truth["symptoms"]) + (1 if truth.get("injections") else 0)
    else:
        drawable = [c for c in expl["edges"]
                    if c["evidence"] != "missing" and c["src"] != c["dst"]
                    and c["src"] in shown and c["dst"] in shown]
        missing = [c for c in expl["edges"]
                   if (c["evidence"] == "missing" or c["src"] == c["dst"]) and c["dst"] in shown]
        exp_flows = len(drawable)
        extra_instants = (len(missing) + len(expl["diagnoses"]) + len(truth["symptoms"])
                          + (1 if truth.get("injections") else 0))
    ids = set(flow_start) | set(flow_end)
    if len(ids) != exp_flows:
        errors.append(f"{len(ids)} flows, expected {exp_flows}")
    for f in ids:
        s, t = flow_start.get(f, []), flow_end.get(f, [])
        if len(s) != 1 or len(t) != 1:
            errors.append(f"flow {f}: {len(s)} starts, {len(t)} ends")
            continue
        if t[0][0] < s[0][0]:
            errors.append(f"flow {f} ends at {t[0][0]} before it starts at {s[0][0]}")
        if t[0][1] != T.TYPE_INSTANT:
            errors.append(f"flow {f} does not end on an instant")
    if begins != exp_slices or ends != exp_slices:
        errors.append(f"{begins} begins / {ends} ends, expected {exp_slices} slices")
    exp_instants = exp_instants_records + exp_flows + extra_instants
    if instants != exp_instants:
        errors.append(f"{instants} instants, expected {exp_instants}")

    summary = {"packets": len(trace.packet), "tracks": len(tracks),
               "thread_tracks": len(thread_tracks), "stream_tracks": len(stream_tracks),
               "slices": begins, "instants": instants, "flows": len(ids)}
    if errors:
        for e in errors[:30]:
            print("perfetto_decode: " + e, file=sys.stderr)
        print(json.dumps(summary))
        return 1
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
