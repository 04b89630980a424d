#!/usr/bin/env python3
"""Raw material of the PyTorch track's torch.compile case (docs/torch-track.md,
"The compiled case"): a small model whose Inductor kernels fuse several
operators, compiled and run under torch.profiler (CUDA sync events and Python
stacks on, as the executor records), with Inductor's own kernel-to-operator
metadata written beside it.

    python3 compile_probe.py OUTDIR

Writes into OUTDIR:
  compiled.kineto.json  Kineto's trace of five steady-state steps of the compiled model;
                        each module's forward runs inside record_function("op:<module>")
                        (the NVTX-style enclosure a user would add)
  eager.kineto.json     the same model uncompiled, same annotations (eager kernels are
                        launched inside their ATen operator, the reference case)
  graph.json            the FX graph Dynamo handed to Inductor: per node its name, target,
                        module path (nn_module_stack), source line and the annotation region
                        (`op:<module>`) that line is in, from a recording backend
  inductor/             Inductor's debug trace (output_code.py: per generated kernel, the
                        source nodes and ATen operators it fuses; the provenance mapping
                        where this torch writes one)
  summary.json          versions, the kernel names Kineto saw with their device time, and
                        what Inductor's output code lists per kernel
The scoring is `causalbench torch attribution --probe OUTDIR`."""

import json
import os
import re
import sys
import textwrap
import traceback

out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "compile-probe")
os.makedirs(out, exist_ok=True)
os.environ["TORCH_COMPILE_DEBUG"] = "1"
os.environ["TORCH_COMPILE_DEBUG_DIR"] = os.path.join(out, "inductor")
import torch  # noqa: E402
import torch._inductor.config as inductor_config  # noqa: E402
from torch.profiler import record_function  # noqa: E402

inductor_config.trace.enabled = True
for name, value in [("provenance_tracking_level", 1), ("provenance_tracking", True)]:
    if hasattr(inductor_config.trace, name):
        setattr(inductor_config.trace, name, value)


class Block(torch.nn.Module):
    """LayerNorm, an up projection, a gated GELU and a down projection with a
    residual: Inductor fuses the pointwise and reduction operators around the
    two matrix multiplies."""

    def __init__(self, width):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        with record_function("op:norm"):
            h = self.norm(x)
        with record_function("op:gate"):
            gate = torch.sigmoid(h.sum(-1, keepdim=True))
        with record_function("op:up"):
            u = self.up(h)
        with record_function("op:gelu_mul"):
            u = torch.nn.functional.gelu(u) * gate
        with record_function("op:down"):
            d = self.down(u)
        with record_function("op:residual"):
            return x + d


graph_nodes = []


def annotated_regions():
    """Line number -> annotation name for every statement inside a
    `with record_function("op:NAME")` block of Block.forward (from its source
    code, so the regions are the model's by construction)."""
    import ast
    import inspect
    lines, first = inspect.getsourcelines(Block.forward)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    regions = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.With):
            continue
        for item in node.items:
            call = item.context_expr
            if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Constant):
                name = str(call.args[0].value)
                for stmt in node.body:
                    for line in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1):
                        regions[first + line - 1] = name
    return regions


REGIONS = annotated_regions()


def source_line(stack_trace):
    """The line of this file in a node's stack trace (the innermost one)."""
    found = None
    for m in re.finditer(r'File "([^"]+)", line (\d+)', stack_trace or ""):
        if os.path.basename(m.group(1)) == os.path.basename(__file__):
            found = int(m.group(2))
    return found


def recording_backend(gm, example_inputs):
    """Keeps the FX graph Dynamo traced (the operators by construction), then
    compiles it with Inductor as torch.compile's default backend does."""
    for node in gm.graph.nodes:
        stack = node.meta.get("nn_module_stack") or {}
        graph_nodes.append({
            "name": node.name,
            "op": node.op,
            "target": str(node.target),
            "module": [str(v[0]) for v in stack.values()],
            "stack_trace": (node.meta.get("stack_trace") or "").strip().splitlines()[-1:],
            "line": source_line(node.meta.get("stack_trace")),
            "region": REGIONS.get(source_line(node.meta.get("stack_trace"))),
        })
    from torch._inductor.compile_fx import compile_fx
    return compile_fx(gm, example_inputs)


def profile(fn, x, path):
    cfg = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
            record_shapes=False, with_stack=True, experimental_config=cfg) as prof:
        for _ in range(5):
            fn(x)
        torch.cuda.synchronize()
    prof.export_chrome_trace(path)
    with open(path) as f:
        return json.load(f)["traceEvents"]


summary = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "triton": None, "steps": 5, "errors": []}
try:
    import triton
    summary["triton"] = triton.__version__
except Exception:  # noqa: BLE001 - only a version line
    pass

torch.manual_seed(0)
model = Block(1024).cuda().half()
x = torch.randn(64, 256, 1024, device="cuda", dtype=torch.half)

try:
    for _ in range(2):
        model(x)
    torch.cuda.synchronize()
    profile(model, x, os.path.join(out, "eager.kineto.json"))
except Exception:  # noqa: BLE001 - the compiled half still runs
    summary["errors"].append("eager: " + traceback.format_exc())

kernels = {}
try:
    compiled = torch.compile(model, backend=recording_backend)
    for _ in range(3):  # compile and warm up outside the profile
        compiled(x)
    torch.cuda.synchronize()
    events = profile(compiled, x, os.path.join(out, "compiled.kineto.json"))
    for e in events:
        if e.get("cat") == "kernel":
            k = kernels.setdefault(e["name"], {"count": 0, "dur_us": 0.0})
            k["count"] += 1
            k["dur_us"] += e.get("dur", 0)
except Exception:  # noqa: BLE001
    summary["errors"].append("compiled: " + traceback.format_exc())

with open(os.path.join(out, "graph.json"), "w") as f:
    json.dump({"nodes": graph_nodes}, f, indent=1)

# Inductor's generated code names each Triton kernel and, in its comments, the
# source nodes and ATen operators it fuses.
fused = {}
for root, _, files in os.walk(os.path.join(out, "inductor")):
    for name in files:
        if name != "output_code.py":
            continue
        text = open(os.path.join(root, name)).read()
        for m in re.finditer(
                r"# (?:Topologically Sorted )?Source Nodes: \[([^\]]*)\], Original ATen: \[([^\]]*)\]"
                r"[\s\S]*?(triton_\w+) = async_compile", text):
            fused[m.group(3)] = {
                "source_nodes": [a.strip() for a in m.group(1).split(",") if a.strip()],
                "aten": [a.strip() for a in m.group(2).split(",") if a.strip()],
            }
summary["kernels"] = kernels
summary["inductor_fused"] = fused
summary["graph_nodes"] = len(graph_nodes)
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1)
print(f"{len(kernels)} kernel names in Kineto's trace, {len(fused)} Inductor kernels with their "
      f"operators, {len(graph_nodes)} graph nodes, {len(summary['errors'])} errors")
for err in summary["errors"]:
    print(err)
