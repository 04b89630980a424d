#!/usr/bin/env python3
"""Raw material of the PyTorch track's torch.compile case (docs/torch-track.md):
a small model whose Inductor kernels fuse several operators, compiled and run
under torch.profiler (CUDA sync events and Python stacks on, as the executor
records), with Inductor's own kernel-to-operator metadata written beside it.

    python3 compile_probe.py OUTDIR

Writes OUTDIR/compiled.kineto.json (Kineto's trace of five steady-state steps),
OUTDIR/inductor/ (Inductor's debug trace: output_code.py names, per generated
kernel, the aten operators it fuses) and OUTDIR/summary.json (kernel names seen by
Kineto, their total device time, and the operators Inductor lists per kernel).
Nothing here is ground truth yet: a later change turns it into a scenario."""

import json
import os
import re
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "compile-probe"
os.makedirs(out, exist_ok=True)
os.environ.setdefault("TORCH_COMPILE_DEBUG_DIR", os.path.join(out, "inductor"))
import torch  # noqa: E402
import torch._inductor.config as inductor_config  # noqa: E402

inductor_config.trace.enabled = True


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        h = self.norm(x)
        h = torch.nn.functional.gelu(self.up(h)) * torch.sigmoid(h.sum(-1, keepdim=True))
        return x + self.down(h)


model = Block(1024).cuda().half()
compiled = torch.compile(model)
x = torch.randn(64, 256, 1024, device="cuda", dtype=torch.half)
for _ in range(3):  # compile and warm up outside the profile
    compiled(x)
torch.cuda.synchronize()

cfg = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
        record_shapes=False, with_stack=True, experimental_config=cfg) as prof:
    for _ in range(5):
        compiled(x)
    torch.cuda.synchronize()
trace = os.path.join(out, "compiled.kineto.json")
prof.export_chrome_trace(trace)

with open(trace) as f:
    events = json.load(f)["traceEvents"]
kernels = {}
for e in events:
    if e.get("cat") == "kernel":
        k = kernels.setdefault(e["name"], {"count": 0, "dur_us": 0.0})
        k["count"] += 1
        k["dur_us"] += e.get("dur", 0)
# Inductor's generated code names each Triton kernel and, in its comments, the
# aten nodes it fuses (`# Source Nodes: [...]`, `# Original ATen: [...]`).
fused = {}
for root, _, files in os.walk(os.path.join(out, "inductor")):
    for name in files:
        if name != "output_code.py":
            continue
        text = open(os.path.join(root, name)).read()
        for m in re.finditer(r"# Original ATen: \[([^\]]*)\][\s\S]*?(triton_\w+) = async_compile", text):
            fused[m.group(2)] = [a.strip() for a in m.group(1).split(",") if a.strip()]
summary = {"torch": torch.__version__, "kernels": kernels, "inductor_fused_aten": fused}
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1)
print(f"{len(kernels)} kernel names in Kineto's trace, {len(fused)} Inductor kernels with their ATen operators")
