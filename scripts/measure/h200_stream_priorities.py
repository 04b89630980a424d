"""Measures on a GPU whether a kernel of a higher-priority stream, launched
after a lower-priority one while every SM is busy, gets the SMs first.
Prints one JSON object; docs/gpu-facts.md cites the figures."""
import json, torch

dev = torch.device("cuda")
m = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
least, greatest = torch.cuda.Stream.priority_range() if hasattr(torch.cuda.Stream, "priority_range") else (0, -1)


def trial(hi_priority):
    hold = torch.cuda.Stream()
    lo = torch.cuda.Stream(priority=0)
    hi = torch.cuda.Stream(priority=hi_priority)
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    start.record(hold)
    with torch.cuda.stream(hold):
        for _ in range(10):
            m @ m
    ends = {}
    for name, s in (("low", lo), ("high", hi)):
        with torch.cuda.stream(s):
            m @ m
        e = torch.cuda.Event(enable_timing=True)
        e.record(s)
        ends[name] = e
    h = torch.cuda.Event(enable_timing=True)
    h.record(hold)
    torch.cuda.synchronize()
    return {k: round(start.elapsed_time(e), 3) for k, e in {**ends, "hold": h}.items()}


for _ in range(2):
    trial(0)
out = {"equal": [trial(0) for _ in range(3)], "high_first": [trial(-1) for _ in range(3)],
       "device": torch.cuda.get_device_name()}
print(json.dumps(out))
