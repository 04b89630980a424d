"""Measures on a GPU how device-to-device copies (cuMemcpyDtoDAsync) and memsets
(cuMemsetD8Async) share the device with host-to-device copies and with kernels
that hold every SM. Prints one JSON object; docs/gpu-facts.md cites the figures."""
import ctypes, json, torch

cuda = ctypes.CDLL("libcuda.so.1")
torch.cuda.init()
dev = torch.device("cuda")
MiB = 1 << 20


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} failed: {rc}")


def d2d(dst, src, nbytes, stream):
    check(cuda.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(dst.data_ptr()), ctypes.c_uint64(src.data_ptr()),
                                    ctypes.c_size_t(nbytes), ctypes.c_void_p(stream.cuda_stream)), "d2d")


def memset(buf, nbytes, stream):
    check(cuda.cuMemsetD8Async(ctypes.c_uint64(buf.data_ptr()), ctypes.c_ubyte(0),
                               ctypes.c_size_t(nbytes), ctypes.c_void_p(stream.cuda_stream)), "memset")


big_a = torch.empty(1024 * MiB, dtype=torch.uint8, device=dev)
big_b = torch.empty(1024 * MiB, dtype=torch.uint8, device=dev)
pinned = torch.empty(256 * MiB, dtype=torch.uint8).pin_memory()
dev_h2d = torch.empty(256 * MiB, dtype=torch.uint8, device=dev)
m = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
streams = [torch.cuda.Stream() for _ in range(3)]


def h2d(stream):
    with torch.cuda.stream(stream):
        dev_h2d.copy_(pinned, non_blocking=True)


def hog(stream, reps):
    with torch.cuda.stream(stream):
        x = m
        for _ in range(reps):
            x = m @ m


def trial(ops):
    """Runs each (stream index, fn) from one common start; returns each op's
    end after the start, in ms."""
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    start.record(streams[0])
    for s in streams[1:]:
        s.wait_event(start)
    ends = []
    for si, fn in ops:
        b = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        b.record(streams[si])
        fn(streams[si])
        e.record(streams[si])
        ends.append((b, e))
    torch.cuda.synchronize()
    return [(round(start.elapsed_time(b), 3), round(start.elapsed_time(e), 3)) for b, e in ends]


def best(ops, n=5):
    runs = [trial(ops) for _ in range(n)]
    return runs[len(runs) // 2]


D2D = lambda n: (lambda s: d2d(big_b, big_a, n, s))
MS = lambda n: (lambda s: memset(big_a, n, s))
out = {}
for _ in range(3):
    trial([(0, D2D(64 * MiB)), (1, MS(64 * MiB)), (2, h2d)])
    trial([(0, lambda s: hog(s, 2))])
out["d2d_1GiB"] = best([(0, D2D(1024 * MiB))])
out["d2d_64MiB"] = best([(0, D2D(64 * MiB))])
out["d2d_1MiB"] = best([(0, D2D(1 * MiB))])
out["memset_1GiB"] = best([(0, MS(1024 * MiB))])
out["memset_64MiB"] = best([(0, MS(64 * MiB))])
out["memset_1MiB"] = best([(0, MS(1 * MiB))])
out["h2d_256MiB"] = best([(0, h2d)])
out["h2d_then_d2d_1GiB_other_stream"] = best([(0, h2d), (1, D2D(1024 * MiB))])
out["h2d_then_memset_1GiB_other_stream"] = best([(0, h2d), (1, MS(1024 * MiB))])
out["d2d_1GiB_twice_two_streams"] = best([(0, D2D(1024 * MiB)), (1, D2D(1024 * MiB))])
out["hog_alone"] = best([(0, lambda s: hog(s, 40))])
out["hog_then_d2d_1GiB"] = best([(0, lambda s: hog(s, 40)), (1, D2D(1024 * MiB))])
out["hog_then_memset_1GiB"] = best([(0, lambda s: hog(s, 40)), (1, MS(1024 * MiB))])
out["hog_then_d2d_1MiB"] = best([(0, lambda s: hog(s, 40)), (1, D2D(1 * MiB))])
out["hog_then_memset_1MiB"] = best([(0, lambda s: hog(s, 40)), (1, MS(1 * MiB))])
out["device"] = torch.cuda.get_device_name()
print(json.dumps(out, indent=1))
