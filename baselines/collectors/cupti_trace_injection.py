#!/usr/bin/env python3
"""Converter of NVIDIA's CUPTI trace-injection sample (CUPTI's
samples/cupti_trace_injection, injected with CUDA_INJECTION64_PATH) for
causalbench's collector protocol (baselines/COLLECTORS.md).

Usage: cupti_trace_injection.py NATIVE OUT_DIR

NATIVE is what the sample printed (its activity records, one per line, with
tab-indented continuation lines: `PrintActivity` of the sample's
helper_cupti_activity.h). OUT_DIR/records.json receives the collector records
(`causalbench schema collector-records`): API records, kernels, copies and
memsets, on CUPTI's own clock (the harness aligns it). Lines it does not know
are counted, not guessed at.
"""

import json
import re
import sys

HEAD = re.compile(
    r'^(?P<kind>[A-Z_]+)(?: "(?P<copy>[A-Za-z]+)")? \[ (?P<start>\d+), (?P<end>\d+) \] '
    r"duration \d+, (?P<rest>.*)$"
)
NAME = re.compile(r'^"(?P<name>[^"]*)", (?P<rest>.*)$')
FIELD = re.compile(r"([A-Za-z]+) (-?\d+)")
TRIPLE = re.compile(r"(grid|block) \[ (\d+), (\d+), (\d+) \]")
COPY = {"HtoD": "h2d", "DtoH": "d2h", "DtoD": "d2d"}


def fields(text):
    return {k: int(v) for k, v in FIELD.findall(text)}


def records_of(lines):
    """Each activity's head line joined with its continuation lines."""
    current = None
    for line in lines:
        line = line.rstrip("\n")
        if line.startswith("\t") or line.startswith("  "):
            if current is not None:
                current += " " + line.strip()
            continue
        if current is not None:
            yield current
        current = line
    if current is not None:
        yield current


def convert(text):
    out, unknown = [], 0
    for rec in records_of(text.splitlines()):
        m = HEAD.match(rec)
        if not m:
            unknown += bool(rec.strip())
            continue
        kind, start, end, rest = m["kind"], int(m["start"]), int(m["end"]), m["rest"]
        named = NAME.match(rest)
        name = named["name"] if named else None
        f = fields(named["rest"] if named else rest)
        corr = f.get("correlationId", 0)
        if kind in ("DRIVER", "RUNTIME") and name is not None:
            out.append({
                "kind": "api", "rid": 0, "domain": kind.lower(), "cbid": f.get("cbid", 0),
                "name": name, "tid": f.get("threadId", 0) & 0xFFFFFFFF,
                "start": start, "end": end, "correlation_id": corr,
            })
        elif kind in ("KERNEL", "CONCURRENT_KERNEL") and name is not None:
            dims = {d: [int(x), int(y), int(z)] for d, x, y, z in TRIPLE.findall(rec)}
            out.append({
                "kind": "kernel", "rid": 0, "name": name, "stream": f.get("streamId", 0),
                "context": f.get("contextId", 0), "device": f.get("deviceId", 0),
                "correlation_id": corr, "graph_id": f.get("graphId", 0),
                "graph_node_id": f.get("graphNodeId", 0), "queued": 0, "submitted": 0,
                "start": start, "end": end, "grid": dims.get("grid", [0, 0, 0]),
                "block": dims.get("block", [0, 0, 0]), "channel": f.get("channelId", 0),
            })
        elif kind == "MEMCPY" and m["copy"] in COPY:
            pageable = "PAGEABLE" in rest
            out.append({
                "kind": "memcpy", "rid": 0, "direction": COPY[m["copy"]],
                "memory": "pageable" if pageable else "pinned", "bytes": f.get("size", 0),
                "stream": f.get("streamId", 0), "context": f.get("contextId", 0),
                "device": f.get("deviceId", 0), "correlation_id": corr,
                "graph_id": f.get("graphId", 0), "graph_node_id": f.get("graphNodeId", 0),
                "queued": 0, "submitted": 0, "start": start, "end": end,
                "channel": f.get("channelId", 0),
            })
        elif kind == "MEMSET":
            out.append({
                "kind": "memset", "rid": 0, "bytes": f.get("size", 0),
                "stream": f.get("streamId", 0), "context": f.get("contextId", 0),
                "device": f.get("deviceId", 0), "correlation_id": corr, "queued": 0,
                "submitted": 0, "start": start, "end": end,
            })
        else:
            unknown += 1
    return out, unknown


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1], encoding="utf-8", errors="replace") as f:
        records, unknown = convert(f.read())
    doc = {
        "schema_version": 1,
        "collector": "cupti-trace-injection",
        "clock": "own",
        "dropped": 0,
        "records": records,
    }
    with open(argv[2] + "/records.json", "w", encoding="utf-8") as f:
        json.dump(doc, f)
    sys.stderr.write(f"{len(records)} records, {unknown} lines of other kinds skipped\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
