"""Measures on a GPU how host<->device copies share the copy engines: the
bandwidth of pinned and pageable copies, whether concurrent copies of one
direction and of opposite directions overlap, and whether a ready copy waits
behind an earlier-issued copy whose stream still holds it (issue 40 item 3).
Copy start and end times come from torch.profiler's device activity (CUPTI);
prints one JSON object; docs/gpu-facts.md cites the figures."""
import json, torch
from torch.profiler import profile, ProfilerActivity

torch.cuda.init()
dev = torch.device("cuda")
MiB = 1 << 20

pinned_a = torch.empty(256 * MiB, dtype=torch.uint8).pin_memory()
pinned_b = torch.empty(256 * MiB, dtype=torch.uint8).pin_memory()
pageable = torch.empty(256 * MiB, dtype=torch.uint8)
pageable.fill_(1)
small_pinned = torch.empty(8 * MiB, dtype=torch.uint8).pin_memory()
dev_a = torch.empty(256 * MiB, dtype=torch.uint8, device=dev)
dev_b = torch.empty(256 * MiB, dtype=torch.uint8, device=dev)
dev_small = torch.empty(8 * MiB, dtype=torch.uint8, device=dev)
streams = [torch.cuda.Stream() for _ in range(4)]


def spin_cycles_per_us():
    torch.cuda.synchronize()
    b = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    b.record()
    torch.cuda._sleep(10_000_000)
    e.record()
    torch.cuda.synchronize()
    return 10_000_000 / (b.elapsed_time(e) * 1000.0)


CYCLES_PER_US = spin_cycles_per_us()


def spin(us):
    torch.cuda._sleep(int(us * CYCLES_PER_US))


def device_ops(ops):
    """Runs the ops (stream index, fn) under the profiler after the streams
    are idle; returns each device activity (name, CUDA stream, start, end) in
    µs after the first one's start, in start order."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for si, fn in ops:
            with torch.cuda.stream(streams[si]):
                fn()
        torch.cuda.synchronize()
    acts = [
        (e.name, e.thread, e.time_range.start, e.time_range.end)
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
    ]
    acts.sort(key=lambda a: a[2])
    t0 = acts[0][2] if acts else 0
    return [(n[:32], st, round(s - t0, 1), round(e - t0, 1)) for n, st, s, e in acts]


def median_trial(ops, n=5):
    runs = [device_ops(ops) for _ in range(n)]
    runs.sort(key=lambda r: r[-1][3] if r else 0)
    return runs[len(runs) // 2]


h2d_a = lambda: dev_a.copy_(pinned_a, non_blocking=True)
h2d_b = lambda: dev_b.copy_(pinned_b, non_blocking=True)
d2h_a = lambda: pinned_a.copy_(dev_a, non_blocking=True)
h2d_small = lambda: dev_small.copy_(small_pinned, non_blocking=True)
d2h_small = lambda: small_pinned.copy_(dev_small, non_blocking=True)
h2d_pageable = lambda: dev_a.copy_(pageable, non_blocking=True)

for _ in range(2):
    device_ops([(0, h2d_a), (1, d2h_a), (2, lambda: spin(100))])

out = {"cycles_per_us": round(CYCLES_PER_US, 1)}
out["h2d_pinned_256MiB"] = median_trial([(0, h2d_a)])
out["d2h_pinned_256MiB"] = median_trial([(0, d2h_a)])
out["h2d_pinned_8MiB"] = median_trial([(0, h2d_small)])
out["h2d_pageable_256MiB"] = median_trial([(0, h2d_pageable)], n=3)
out["h2d_h2d_two_streams"] = median_trial([(0, h2d_a), (1, h2d_b)])
out["h2d_d2h_two_streams"] = median_trial([(0, h2d_a), (1, d2h_a)])
# Issue 40 item 3: stream 0 holds a D2H copy behind a 1 ms kernel; a ready
# H2D copy issued after it on stream 1.
out["gated_d2h_then_ready_h2d"] = median_trial(
    [(0, lambda: spin(1000)), (0, d2h_small), (1, h2d_small)]
)
# The same with both copies host-to-device.
out["gated_h2d_then_ready_h2d"] = median_trial(
    [(0, lambda: spin(1000)), (0, h2d_small), (1, h2d_small)]
)
# A small H2D copy issued while a long H2D copy runs, and a small D2H beside it.
out["long_h2d_then_small_h2d"] = median_trial([(0, h2d_a), (1, h2d_small)])
out["long_h2d_then_small_d2h"] = median_trial([(0, h2d_a), (1, d2h_small)])
# Sixteen back-to-back 8 MiB H2D copies on stream 0 (≈ 2.5 ms); then stream
# 1's 1 MiB H2D copy behind a 300 µs kernel (spinning on %globaltimer, so its
# length does not depend on the clocks): when the kernel ends while stream 0's
# copies run, does the 1 MiB copy go next, or after all of them?
import cupy

SPIN = cupy.RawKernel(r"""
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
""", "spin")


CUPY_STREAMS = {s.cuda_stream: cupy.cuda.ExternalStream(s.cuda_stream) for s in streams}


def timer_spin(us):
    with CUPY_STREAMS[torch.cuda.current_stream().cuda_stream]:
        SPIN((1,), (1,), (cupy.uint64(int(us * 1000)),))


# Compile and load the kernel before the trials.
with torch.cuda.stream(streams[1]):
    timer_spin(10)
torch.cuda.synchronize()


tiny_pinned = torch.empty(1 * MiB, dtype=torch.uint8).pin_memory()
dev_tiny = torch.empty(1 * MiB, dtype=torch.uint8, device=dev)
h2d_tiny = lambda: dev_tiny.copy_(tiny_pinned, non_blocking=True)
out["copies_then_gated_copy"] = median_trial(
    [(0, h2d_small)] * 16 + [(1, lambda: timer_spin(300)), (1, h2d_tiny)]
)
pageable_small = torch.empty(8 * MiB, dtype=torch.uint8)
out["d2h_pageable_8MiB"] = median_trial(
    [(0, lambda: pageable_small.copy_(dev_small))], n=3
)
out["device"] = torch.cuda.get_device_name()
print(json.dumps(out, indent=1))
