# The PyTorch executor of the scenario language (docs/torch-track.md).
#
# Embedded in the causalbench binary and started by `generator::torch` as
# `python3 -c <this file> serve`, in its own process group. It reads one JSON
# request per line on stdin (a scenario, a seed, the injection plan in the
# executor's terms, whether to record under torch.profiler and where to write
# Kineto's trace) and answers one JSON line on stdout: the step log. Nothing
# else is written to stdout.
#
# The step log says what the executor did by construction (which call made
# which op on which stream, each stream's previous ops, what a wait waited on,
# handoffs, requests) with host times from this process's own clock
# (time.monotonic_ns, CLOCK_MONOTONIC) and device times from the work's own
# measurements: every kernel is a self-timed spin kernel reading %globaltimer,
# and copies, memsets, event records and stream waits are bracketed by
# time-stamp kernels on the same stream. The %globaltimer is calibrated
# against CLOCK_MONOTONIC by a kernel that waits for a flag the host writes
# into mapped pinned memory. Nothing here reads Kineto's trace: the Rust side
# builds the ground truth from this log alone and binds Kineto's events to it
# through the `cb:` record_function annotations each harness call is wrapped
# in (the executor's private correlation, stripped from every view).

import json
import os
import queue
import random
import sys
import threading
import time

# The answers go to a private copy of stdout; file descriptor 1 itself (and
# Python's sys.stdout) then points at stderr, so nothing a library prints can
# corrupt them.
REAL_STDOUT = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr

import torch  # noqa: E402
import cupy  # noqa: E402

KERNEL_SOURCE = r"""
__device__ __forceinline__ unsigned long long cb_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// acc: [start (min over blocks), end (max over blocks), blocks done].
// A graph node kernel (graph != 0) moves its accumulator into the log once
// its last block is done and resets it, so each replay leaves one entry.
__device__ __forceinline__ void cb_spin_body(unsigned long long dur,
                                   unsigned long long* acc,
                                   unsigned long long* log,
                                   unsigned int* counter,
                                   unsigned long long tag,
                                   int graph,
                                   unsigned char* hold) {
    __shared__ unsigned long long t0;
    if (threadIdx.x == 0) t0 = cb_now();
    __syncthreads();
    unsigned long long begin = t0;
    while (cb_now() - begin < dur) { }
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long t1 = cb_now();
        atomicMin(&acc[0], begin);
        atomicMax(&acc[1], t1);
        if (graph) {
            __threadfence();
            unsigned long long blocks = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
            unsigned long long n = atomicAdd(&acc[2], 1ULL);
            if (n == blocks - 1) {
                __threadfence();
                unsigned int i = atomicAdd(counter, 1u);
                volatile unsigned long long* a = acc;
                log[3 * i] = tag;
                log[3 * i + 1] = a[0];
                log[3 * i + 2] = a[1];
                a[0] = 0xFFFFFFFFFFFFFFFFULL;
                a[1] = 0;
                a[2] = 0;
                __threadfence();
            }
        }
    }
}

// One time stamp: when the stream reached it.
extern "C" __global__ void cb_stamp(unsigned long long* out) {
    out[0] = cb_now();
}

// Calibration: stamps the %globaltimer when it sees the host's flag.
extern "C" __global__ void cb_calibrate(volatile unsigned int* flag,
                                        unsigned long long* out) {
    out[0] = cb_now();
    while (flag[0] == 0) { }
    out[1] = cb_now();
}
"""

# One entry point per kernel name, so Kineto names each kernel as the
# scenario does (CUPTI reports the entry point's name).
KERNEL_ENTRY = r"""
extern "C" __global__ void %s(unsigned long long dur, unsigned long long* acc,
    unsigned long long* log, unsigned int* counter, unsigned long long tag, int graph) {
    extern __shared__ unsigned char hold[];
    cb_spin_body(dur, acc, log, counter, tag, graph, hold);
}
"""


def entry_name(name):
    """The C identifier a kernel name is launched as (Kineto shows this)."""
    out = "".join(c if (c.isascii() and c.isalnum()) or c == "_" else "_" for c in name)
    if not out or out[0].isdigit():
        out = "k_" + out
    return out

MAX_U64 = 0xFFFFFFFFFFFFFFFF
SLOTS = 1 << 16
HOG_SHARED = 96 * 1024


def now():
    return time.monotonic_ns()


# Busy host work without a Python call per loop iteration: with_stack's
# Python tracer records every call, so a spin loop would fill Kineto's trace.
# One PBKDF2 call (C, GIL released) holds the CPU for most of the time, a
# short spin the rest.
PBKDF2_PER_NS = [0.0]


def calibrate_busy():
    import hashlib
    n = 20000
    t = now()
    hashlib.pbkdf2_hmac("sha256", b"cb", b"salt", n)
    PBKDF2_PER_NS[0] = n / max(1, now() - t)


def busy_until(t):
    import hashlib
    left = t - now()
    if left > 50_000 and PBKDF2_PER_NS[0] > 0:
        n = int((left - 30_000) * PBKDF2_PER_NS[0])
        if n > 0:
            hashlib.pbkdf2_hmac("sha256", b"cb", b"salt", n)
    while now() < t:
        pass


def spin_until(t):
    busy_until(t)


def wait_until(t):
    """Waits (sleeping, not busy) until CLOCK_MONOTONIC `t`, to about 100 us, then spins."""
    left = t - now()
    if left > 300_000:
        time.sleep((left - 200_000) / 1e9)
    while now() < t:
        pass


class Device:
    """The device side shared by every run of the server."""

    def __init__(self):
        torch.cuda.init()
        self.props = torch.cuda.get_device_properties(0)
        self.sms = self.props.multi_processor_count
        self.module = cupy.RawModule(code=KERNEL_SOURCE, options=("-std=c++14",))
        self.entries = {}
        self.stamp = self.module.get_function("cb_stamp")
        self.calib = self.module.get_function("cb_calibrate")
        # Accumulators of direct launches: one per op, three words each.
        self.acc = torch.empty(SLOTS * 3, dtype=torch.int64, device="cuda")
        self.stamps = torch.zeros(SLOTS, dtype=torch.int64, device="cuda")
        self.glog = torch.zeros(SLOTS * 3, dtype=torch.int64, device="cuda")
        self.gacc = torch.empty(4096 * 3, dtype=torch.int64, device="cuda")
        self.counter = torch.zeros(4, dtype=torch.int32, device="cuda")
        self.scratch = {}
        self.offset_ns = 0
        self.calibration = []

    def kernels(self, names):
        """Compiles an entry point for each kernel name not compiled yet."""
        missing = sorted({entry_name(n) for n in names} - set(self.entries))
        if not missing:
            return
        code = KERNEL_SOURCE + "".join(KERNEL_ENTRY % m for m in missing)
        module = cupy.RawModule(code=code, options=("-std=c++14",))
        for m in missing:
            f = module.get_function(m)
            try:
                f.max_dynamic_shared_size_bytes = HOG_SHARED
            except Exception as e:  # the hog then runs without its shared memory
                sys.stderr.write("cannot raise the shared memory of %s: %r\n" % (m, e))
            self.entries[m] = f

    def spin(self, name):
        if entry_name(name) not in self.entries:
            self.kernels([name])
        return self.entries[entry_name(name)]

    def reset(self):
        # Start words to the largest u64 (-1 as int64 reads as it), ends to 0.
        view = self.acc.view(SLOTS, 3)
        view[:, 0] = -1
        view[:, 1:] = 0
        gview = self.gacc.view(-1, 3)
        gview[:, 0] = -1
        gview[:, 1:] = 0
        self.stamps.zero_()
        self.glog.zero_()
        self.counter.zero_()
        torch.cuda.synchronize()

    def calibrate(self, rounds=21):
        """globaltimer + offset = CLOCK_MONOTONIC, from a flag the host writes."""
        flag = torch.zeros(4, dtype=torch.int32, pin_memory=True)
        out = torch.zeros(2, dtype=torch.int64, device="cuda")
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
        offsets = []
        for _ in range(rounds):
            flag[0] = 0
            self.calib((1,), (1,), (cupy.uint64(flag.data_ptr()), cupy.uint64(out.data_ptr())),
                       stream=stream)
            time.sleep(0.002)
            t = now()
            flag[0] = 1
            torch.cuda.synchronize()
            g = out[1].item()
            offsets.append(t - g)
        offsets.sort()
        self.offset_ns = offsets[len(offsets) // 2]
        self.calibration = [offsets[0] - self.offset_ns, offsets[-1] - self.offset_ns]

    def buffer(self, key, nbytes, pinned=None):
        """A scratch buffer of at least `nbytes`, on the device or the host."""
        k = (key, pinned)
        buf = self.scratch.get(k)
        if buf is None or buf.numel() < nbytes:
            n = max(nbytes, 1 << 20)
            if pinned is None:
                buf = torch.empty(n, dtype=torch.uint8, device="cuda")
            else:
                buf = torch.empty(n, dtype=torch.uint8, pin_memory=pinned)
                buf.fill_(1)
            self.scratch[k] = buf
        return buf[:nbytes]


def dev_to_host(device, g):
    return int(g) + device.offset_ns if g else 0


class Run:
    """One execution of a scenario (a twin, a quiet run or the injected run)."""

    def __init__(self, device, sc, seed, plan):
        self.d = device
        self.sc = sc
        self.seed = seed
        self.plan = plan or {}
        self.lock = threading.Lock()
        self.next_op = 1
        self.next_slot = 0
        self.next_stamp = 0
        self.errors = []
        self.threads = []  # (name, pool) per OS thread index
        self.pools = {}
        for decl in sc["threads"]:
            members = []
            for i in range(decl.get("count", 1)):
                members.append(len(self.threads))
                self.threads.append(decl["name"])
            self.pools[decl["name"]] = members
        self.queues = {q["name"]: q for q in sc.get("queues", [])}
        self.streams = []
        self.stream_ids = []
        self.generations = {}
        for s in sc["streams"]:
            self.streams.append(torch.cuda.Stream(priority=max(-5, min(0, s.get("priority", 0)))))
            self.stream_ids.append(self.streams[-1].stream_id)
        self.tails = [[] for _ in self.streams]
        self.event_base, self.event_ring = self.event_rings(sc)
        self.events, self.event_src = [torch.cuda.Event() for _ in self.event_ring], [None] * len(self.event_ring)
        self.graphs = []
        self.graph_replays = {}
        self.inboxes = [queue.Queue() for _ in self.threads]
        self.busy = [False] * len(self.threads)
        self.pending_items = [0] * len(self.threads)
        self.logs = [{"tid": 0, "events": [], "ops": []} for _ in self.threads]
        self.nvtx_stacks = [[] for _ in self.threads]
        self.done = 0
        self.done_lock = threading.Lock()
        self.all_done = threading.Event()
        self.next_handoff = 1
        self.requests = []
        for pi, p in enumerate(sc["programs"]):
            for i in range(p.get("requests", 1)):
                at = int(round((p.get("offset_us", 0.0) + i * p.get("interval_us", 0.0)) * 1000))
                self.requests.append({"program": pi, "index": i, "at_rel": at})
        self.requests.sort(key=lambda r: (r["at_rel"], r["program"], r["index"]))
        for k, r in enumerate(self.requests):
            r["token"] = 1000 + k
        self.rng = random.Random(seed)
        self.injector_items = queue.Queue()
        self.injector_log = {"tid": 0, "events": [], "ops": []}

    # --- identities -------------------------------------------------------
    def op_id(self):
        with self.lock:
            i = self.next_op
            self.next_op += 1
            return i

    def slot(self):
        with self.lock:
            s = self.next_slot
            self.next_slot += 1
            if s >= SLOTS:
                raise RuntimeError("too many kernels for the accumulator table")
            return s

    def stamp_slot(self):
        with self.lock:
            s = self.next_stamp
            self.next_stamp += 1
            if s >= SLOTS:
                raise RuntimeError("too many time stamps")
            return s

    def ext(self, si):
        return cupy.cuda.ExternalStream(self.streams[si].cuda_stream)

    def stamp(self, si):
        """A time-stamp kernel on stream `si` (harness work, not a scenario op)."""
        k = self.stamp_slot()
        ptr = self.d.stamps.data_ptr() + 8 * k
        with torch.profiler.record_function("cb:h"):
            self.d.stamp((1,), (1,), (cupy.uint64(ptr),), stream=self.ext(si))
        return k

    def launch_spin(self, name, stream, dur_ns, grid, block, shared=0, acc_ptr=None, tag=0, graph=0):
        if acc_ptr is None:
            slot = self.slot()
            acc_ptr = self.d.acc.data_ptr() + 24 * slot
        else:
            slot = None
        self.d.spin(name)((max(1, grid),), (max(1, block),),
                    (cupy.uint64(dur_ns), cupy.uint64(acc_ptr), cupy.uint64(self.d.glog.data_ptr()),
                     cupy.uint64(self.d.counter.data_ptr()), cupy.uint64(tag), cupy.int32(graph)),
                    stream=stream, shared_mem=shared)
        return slot

    # --- graphs -----------------------------------------------------------
    def capture_graphs(self, stretch):
        """Captures every declared graph once (the capture is no scenario step)."""
        side = [torch.cuda.Stream() for _ in range(8)]
        gacc = 0
        for gi, g in enumerate(self.sc.get("graphs", [])):
            graph = torch.cuda.CUDAGraph()
            origin = torch.cuda.Stream()
            nodes = g["nodes"]
            index = {n["id"]: i for i, n in enumerate(nodes)}
            done = [None] * len(nodes)
            meta = []
            with torch.cuda.graph(graph, stream=origin):
                start = torch.cuda.Event()
                start.record(origin)
                for ni, n in enumerate(nodes):
                    s = origin if ni == 0 else side[(ni - 1) % len(side)]
                    if s is not origin:
                        s.wait_event(start)
                    for a in n.get("after", []):
                        s.wait_event(done[index[a]])
                    k = n["kernel"]
                    dur = int(round(k["duration_us"] * 1000))
                    if stretch and stretch.get("graph_node") == n["id"] and stretch.get("graph") == gi:
                        dur += stretch["extra_ns"]
                    tag = (gi << 16) | ni
                    ptr = self.d.gacc.data_ptr() + 24 * gacc
                    gacc += 1
                    self.launch_spin(k["name"], cupy.cuda.ExternalStream(s.cuda_stream), dur, k.get("grid", 132),
                                     k.get("block", 128), acc_ptr=ptr, tag=tag, graph=1)
                    ev = torch.cuda.Event()
                    ev.record(s)
                    done[ni] = ev
                    meta.append(tag)
                for ni in range(len(nodes)):
                    origin.wait_event(done[ni])
            self.graphs.append(graph)
            self.graph_replays[gi] = meta
        torch.cuda.synchronize()

    # --- steps ------------------------------------------------------------
    def record_op(self, ti, op):
        self.logs[ti]["ops"].append(op)
        self.logs[ti]["events"].append({"api": op["id"]})

    def base_op(self, ti, item, si, what):
        # The operator is the innermost NVTX range open on the thread.
        stack = self.nvtx_stacks[ti]
        return {
            "id": self.op_id(),
            "thread": ti,
            "request": item["request"],
            "step": si,
            "what": what,
            "operator": stack[-1][0] if stack else None,
        }

    def stretch_for(self, item, si):
        st = self.plan.get("stretch")
        if not st:
            return None
        r = self.requests[item["request"]]
        if st["program"] == r["program"] and st["request"] == r["index"] and st["step"] == si \
                and st.get("graph_node") is None:
            return st
        return None

    def is_key(self, key, item, si):
        if not key:
            return False
        r = self.requests[item["request"]]
        return key["program"] == r["program"] and key["request"] == r["index"] and key["step"] == si

    def step(self, ti, item, si, step):
        kind = step["op"]
        plan = self.plan
        if self.is_key(plan.get("host_delay"), item, si):
            t0 = now()
            spin_until(t0 + plan["host_delay"]["ns"])
            self.logs[ti]["events"].append({"host_delay": [t0, now()]})
        if self.is_key(plan.get("trigger"), item, si):
            done = threading.Event()
            self.injector_items.put(done)
            self.wait_for_injector(done)
        if kind == "host_work":
            spin_until(now() + int(round(step["duration_us"] * 1000)))
            return
        if kind == "nvtx_push":
            rf = torch.profiler.record_function(step["name"])
            rf.__enter__()
            torch.cuda.nvtx.range_push(step["name"])
            self.nvtx_stacks[ti].append((step["name"], now(), rf))
            return
        if kind == "nvtx_pop":
            if self.nvtx_stacks[ti]:
                name, t0, rf = self.nvtx_stacks[ti].pop()
                torch.cuda.nvtx.range_pop()
                rf.__exit__(None, None, None)
                self.logs[ti]["events"].append({"nvtx": [name, t0, now()]})
            return
        if kind == "recreate":
            obj, name = step["object"], step["name"]
            if obj == "stream":
                i = [s["name"] for s in self.sc["streams"]].index(name)
                self.streams[i].synchronize()
                self.streams[i] = torch.cuda.Stream(
                    priority=max(-5, min(0, self.sc["streams"][i].get("priority", 0))))
                self.stream_ids[i] = self.streams[i].stream_id
                self.tails[i] = []
            elif obj == "event":
                for i in range(self.event_base[name], self.event_base[name] + self.event_ring[self.event_base[name]]):
                    self.events[i] = torch.cuda.Event()
                    self.event_src[i] = None
            key = (obj, name)
            self.generations[key] = self.generations.get(key, 0) + 1
            op = self.base_op(ti, item, si, {"kind": "recreate"})
            op["t0"] = op["t1"] = now()
            self.record_op(ti, op)
            return
        stream_names = [s["name"] for s in self.sc["streams"]]
        if kind == "sync":
            self.sync(ti, item, si, step)
            return
        sidx = stream_names.index(step["stream"])
        gen = self.generations.get(("stream", step["stream"]), 0)
        with self.lock:
            prev = list(self.tails[sidx])
        token = self.requests[item["request"]]["token"]
        if kind == "kernel":
            dur = int(round(step["duration_us"] * 1000))
            st = self.stretch_for(item, si)
            extra = st["extra_ns"] if st and "extra_ns" in st else 0
            op = self.base_op(ti, item, si, {"kind": "kernel", "name": step["name"], "dur_ns": dur + extra,
                                             "extra_ns": extra})
            with torch.profiler.record_function("cb:op:%d:%d" % (op["id"], token)):
                op["t0"] = now()
                slot = self.launch_spin(step["name"], self.ext(sidx), dur + extra, step.get("grid", 132),
                                        step.get("block", 128))
                op["t1"] = now()
            op["slot"] = slot
        elif kind in ("copy", "memset"):
            nbytes = step["bytes"]
            st = self.stretch_for(item, si)
            extra = st["extra_bytes"] if st and "extra_bytes" in st else 0
            total = nbytes + extra
            what = {"kind": kind, "bytes": nbytes, "extra_bytes": extra}
            if kind == "copy":
                what["direction"] = step["direction"]
                what["memory"] = step.get("memory", "pageable")
            op = self.base_op(ti, item, si, what)
            before = self.stamp(sidx)
            with torch.profiler.record_function("cb:op:%d:%d" % (op["id"], token)):
                with torch.cuda.stream(self.streams[sidx]):
                    op["t0"] = now()
                    if kind == "memset":
                        buf = self.d.buffer("memset%d" % ti, total)
                        cupy.cuda.runtime.memsetAsync(buf.data_ptr(), 0, total,
                                                      self.streams[sidx].cuda_stream)
                    else:
                        self.copy(ti, what["direction"], what["memory"], total)
                    op["t1"] = now()
            after = self.stamp(sidx)
            op["stamps"] = [before, after]
        elif kind == "event_record":
            ei = self.event_slot(item, step)
            op = self.base_op(ti, item, si, {"kind": "event_record", "event": ei})
            before = self.stamp(sidx)
            with torch.profiler.record_function("cb:op:%d:%d" % (op["id"], token)):
                op["t0"] = now()
                self.events[ei].record(self.streams[sidx])
                op["t1"] = now()
            op["stamps"] = [before]
            with self.lock:
                self.event_src[ei] = op["id"]
            op["event_generation"] = self.generations.get(("event", step["event"]), 0)
        elif kind == "stream_wait":
            ei = self.event_slot(item, step)
            with self.lock:
                src = self.event_src[ei]
            op = self.base_op(ti, item, si, {"kind": "stream_wait", "event": ei})
            with torch.profiler.record_function("cb:op:%d:%d" % (op["id"], token)):
                op["t0"] = now()
                self.streams[sidx].wait_event(self.events[ei])
                op["t1"] = now()
            after = self.stamp(sidx)
            op["stamps"] = [after]
            op["event_src"] = src
        elif kind == "graph_launch":
            gi = [g["name"] for g in self.sc["graphs"]].index(step["graph"])
            op = self.base_op(ti, item, si, {"kind": "graph_launch", "graph": gi})
            with torch.profiler.record_function("cb:op:%d:%d" % (op["id"], token)):
                with torch.cuda.stream(self.streams[sidx]):
                    op["t0"] = now()
                    self.graphs[gi].replay()
                    op["t1"] = now()
        else:
            raise RuntimeError("step %s cannot run on the torch executor" % kind)
        op["stream"] = sidx
        op["stream_id"] = self.stream_ids[sidx]
        op["generation"] = gen
        op["prev"] = prev
        op["tid"] = threading.get_native_id()
        with self.lock:
            self.tails[sidx] = [op["id"]]
        self.record_op(ti, op)

    def copy(self, ti, direction, memory, total):
        pinned = memory == "pinned"
        dev = self.d.buffer("dev%d" % ti, total)
        if direction == "h2d":
            host = self.d.buffer("host%d" % ti, total, pinned)
            dev.copy_(host, non_blocking=True)
        elif direction == "d2h":
            host = self.d.buffer("host%d" % ti, total, pinned)
            host.copy_(dev, non_blocking=True)
        else:
            other = self.d.buffer("dev2%d" % ti, total)
            other.copy_(dev, non_blocking=True)

    def sync(self, ti, item, si, step):
        target = step["target"]
        token = self.requests[item["request"]]["token"]
        op = self.base_op(ti, item, si, {"kind": "sync", "target": target})
        with self.lock:
            if target == "stream":
                sidx = [s["name"] for s in self.sc["streams"]].index(step["stream"])
                waited = list(self.tails[sidx])
            elif target == "event":
                ei = self.event_slot(item, step)
                waited = [self.event_src[ei]] if self.event_src[ei] else []
            else:
                waited = [o for t in self.tails for o in t]
        with torch.profiler.record_function("cb:op:%d:%d" % (op["id"], token)):
            op["t0"] = now()
            if target == "stream":
                self.streams[sidx].synchronize()
            elif target == "event":
                self.events[ei].synchronize()
            else:
                torch.cuda.synchronize()
            op["t1"] = now()
        op["waited"] = waited
        op["tid"] = threading.get_native_id()
        self.record_op(ti, op)

    # --- threads ----------------------------------------------------------
    def pick(self, pool, randomized, key):
        members = self.pools[pool]
        idle = [m for m in members if not self.busy[m] and self.pending_items[m] == 0]
        cands = idle or [min(members, key=lambda m: self.pending_items[m])]
        if randomized:
            return cands[random.Random(self.seed ^ key).randrange(len(cands))]
        return cands[0]

    def send(self, m, item):
        with self.lock:
            self.pending_items[m] += 1
        self.inboxes[m].put(item)

    def worker(self, ti, barrier):
        self.logs[ti]["tid"] = threading.get_native_id()
        barrier.wait()
        thread_free = 0
        while True:
            item = self.inboxes[ti].get()
            if item is None:
                return
            self.busy[ti] = True
            with self.lock:
                self.pending_items[ti] -= 1
            try:
                self.run_item(ti, item, thread_free)
            except Exception as e:  # the run's errors end up in its log
                self.errors.append("thread %d: %r" % (ti, e))
                self.finished()
            thread_free = now()
            self.busy[ti] = False

    @staticmethod
    def event_rings(sc):
        """One torch event per slot of each event's ring (EventDecl::count): where
        each event's ring starts, and every slot's ring size. A step of request i
        uses slot (i + request_offset) mod count, as the other backends do
        (docs/scenario-space.md, "Scenario language"). Defined after the copies
        so that their line numbers, which the committed corpus's fence lines
        name, stay where they were recorded."""
        base, ring = {}, []
        for e in sc.get("events", []):
            base[e["name"]] = len(ring)
            ring.extend([e.get("count", 1)] * e.get("count", 1))
        return base, ring

    def event_slot(self, item, step):
        """The slot of the step's event ring its request uses."""
        base = self.event_base[step["event"]]
        index = self.requests[item["request"]]["index"]
        return base + (index + step.get("request_offset", 0)) % self.event_ring[base]

    def run_item(self, ti, item, thread_free):
        r = self.requests[item["request"]]
        steps = self.sc["programs"][r["program"]]["steps"]
        self.logs[ti]["events"].append({"task": [now(), item["request"], item.get("handoff"),
                                                 item.get("queue", ""), thread_free]})
        self.took(item)
        si = item["step"]
        while si < len(steps):
            step = steps[si]
            if step["op"] == "handoff":
                q = self.queues[step["queue"]]
                pushed = self.room(step["queue"])
                with self.lock:
                    hid = self.next_handoff
                    self.next_handoff += 1
                m = self.pick(q["consumer"], q.get("randomized", False),
                              (item["request"] << 8) ^ si ^ hid)
                self.logs[ti]["events"].append({"handoff": [now(), hid, step["queue"], item["request"]] + pushed})
                self.send(m, {"request": item["request"], "step": si + 1, "handoff": hid,
                              "queue": step["queue"]})
                return
            self.step(ti, item, si, step)
            si += 1
        self.finished()

    def finished(self):
        with self.done_lock:
            self.done += 1
            if self.done >= len(self.requests):
                self.all_done.set()

    def injector(self, barrier, stop):
        self.injector_log["tid"] = threading.get_native_id()
        stream = torch.cuda.Stream()
        sid = stream.stream_id
        barrier.wait()
        actions = self.plan.get("actions", [])
        while not stop.is_set():
            try:
                done = self.injector_items.get(timeout=0.05)
            except queue.Empty:
                continue
            for a in actions:
                on = a.get("on_target_stream")
                si = on if on is not None else None
                s = self.streams[si] if si is not None else stream
                op = {"id": self.op_id(), "thread": len(self.threads), "request": None, "step": None,
                      "injected": True, "delays_target": a.get("delays_target", True)}
                with self.lock:
                    prev = list(self.tails[si]) if si is not None else list(self.inj_tail)
                if a["kind"] == "kernel":
                    grid = a.get("grid") or 8
                    block = 128
                    shared = 0
                    if a.get("hog"):
                        grid, block, shared = self.d.sms * 2, 1024, HOG_SHARED
                        f = self.d.spin(a["name"])
                        if getattr(f, "max_dynamic_shared_size_bytes", HOG_SHARED) < HOG_SHARED:
                            shared = 0
                    op["what"] = {"kind": "kernel", "name": a["name"], "dur_ns": a["dur_ns"], "extra_ns": 0}
                    with torch.profiler.record_function("cb:op:%d:0" % op["id"]):
                        op["t0"] = now()
                        op["slot"] = self.launch_spin(a["name"], cupy.cuda.ExternalStream(s.cuda_stream), a["dur_ns"],
                                                      grid, block, shared)
                        op["t1"] = now()
                else:
                    op["what"] = {"kind": "copy", "direction": "h2d", "memory": "pinned",
                                  "bytes": a["bytes"], "extra_bytes": 0}
                    ssi = si if si is not None else -1
                    before = self.stamp(si) if si is not None else self.stamp_on(stream)
                    with torch.profiler.record_function("cb:op:%d:0" % op["id"]):
                        with torch.cuda.stream(s):
                            op["t0"] = now()
                            host = self.d.buffer("inj-host", a["bytes"], True)
                            dev = self.d.buffer("inj-dev", a["bytes"])
                            dev.copy_(host, non_blocking=True)
                            op["t1"] = now()
                    after = self.stamp(si) if si is not None else self.stamp_on(stream)
                    op["stamps"] = [before, after]
                    del ssi
                op["stream"] = si if si is not None else -1
                op["stream_id"] = self.stream_ids[si] if si is not None else sid
                op["generation"] = 0
                op["prev"] = prev
                op["tid"] = self.injector_log["tid"]
                with self.lock:
                    if si is not None:
                        self.tails[si] = [op["id"]]
                    else:
                        self.inj_tail = [op["id"]]
                self.injector_log["ops"].append(op)
                self.injector_log["events"].append({"api": op["id"]})
            done.set()

    def wait_for_injector(self, done):
        # Only work that must precede the target is waited for. A negative
        # control's unrelated work is nothing the application waits for: waiting
        # for its launch made the target 400-1000 us late on the H200 (the
        # real program shapes' harmless variants), a delay no record explains
        # (the GPU executor's `trigger_injector` does the same).
        if any(a.get("delays_target", True) for a in self.plan.get("actions", [])):
            done.wait(1.0)

    def stamp_on(self, stream):
        k = self.stamp_slot()
        ptr = self.d.stamps.data_ptr() + 8 * k
        with torch.profiler.record_function("cb:h"):
            self.d.stamp((1,), (1,), (cupy.uint64(ptr),), stream=cupy.cuda.ExternalStream(stream.cuda_stream))
        return k

    def execute(self):
        self.inj_tail = []
        st = self.plan.get("stretch")
        self.capture_graphs(st if st and st.get("graph_node") is not None else None)
        nthreads = len(self.threads)
        self.bounded = {q["name"]: threading.Semaphore(q["capacity"])
                        for q in self.sc.get("queues", []) if q.get("capacity")}
        injector = bool(self.plan.get("actions"))
        barrier = threading.Barrier(nthreads + 1 + int(injector))
        stop = threading.Event()
        workers = [threading.Thread(target=self.worker, args=(i, barrier), name="cb-worker-%d" % i,
                                    daemon=True) for i in range(nthreads)]
        for w in workers:
            w.start()
        inj = None
        if injector:
            inj = threading.Thread(target=self.injector, args=(barrier, stop), name="cb-worker-%d" % nthreads,
                                   daemon=True)
            inj.start()
        barrier.wait()
        origin = now() + 1_000_000
        arrivals = []
        for k, r in enumerate(self.requests):
            wait_until(origin + r["at_rel"])
            p = self.sc["programs"][r["program"]]
            m = self.pick(p["start"], False, k ^ 0xA11)
            arrivals.append({"request": k, "t": now(), "tid": self.logs[m]["tid"]})
            self.send(m, {"request": k, "step": 0})
        if not self.all_done.wait(30.0):
            self.errors.append("the run did not finish within 30 s")
        for m in range(nthreads):
            self.inboxes[m].put(None)
        stop.set()
        for w in workers:
            w.join(5)
        if inj:
            inj.join(5)
        torch.cuda.synchronize()
        end = now()
        return origin, arrivals, end

    def device_log(self):
        acc = self.d.acc.view(SLOTS, 3)[: self.next_slot, :2].cpu().tolist()
        stamps = self.d.stamps[: self.next_stamp].cpu().tolist()
        n = int(self.d.counter[0].item())
        glog = self.d.glog[: 3 * n].view(-1, 3).cpu().tolist()
        conv = lambda g: dev_to_host(self.d, g & MAX_U64) if g not in (-1, 0) else 0  # noqa: E731
        return ([[conv(a), conv(b)] for a, b in acc], [conv(s) for s in stamps],
                [[int(t), conv(a), conv(b)] for t, a, b in glog])

    # --- bounded queues (QueueDecl::capacity) -------------------------------
    def room(self, name):
        """A push onto a full bounded queue waits until a consumer task takes an
        item, as queue.Queue(maxsize=capacity).put does. The handoff's time is then
        when it got room; answers the extra field of its log entry, when the push
        was ready (none for an unbounded queue, whose pushes never wait)."""
        room = self.bounded.get(name)
        if room is None:
            return []
        ready = now()
        if not room.acquire(timeout=30.0):
            self.errors.append("a push onto the full queue `%s` found no room within 30 s" % name)
        return [ready]

    def took(self, item):
        """A task took its item: the slot it held in its bounded queue is free. Called
        once the task's time is logged, so a push that waited for it is logged after."""
        room = self.bounded.get(item.get("queue", "")) if item.get("handoff") else None
        if room is not None:
            room.release()


def serve():
    device = Device()
    device.calibrate()
    calibrate_busy()
    warm = False
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            answer = run_request(device, req, warm)
            warm = True
        except Exception as e:  # one failed run must not end the server
            import traceback
            traceback.print_exc()
            answer = {"error": repr(e)}
        REAL_STDOUT.write(json.dumps(answer) + "\n")
        REAL_STDOUT.flush()


def run_request(device, req, warm):
    if req.get("calibrate"):
        device.calibrate()
    device.kernels(req.get("kernel_names", []))
    device.reset()
    run = Run(device, req["scenario"], req["seed"], req.get("plan"))
    profiler = None
    trace_path = req.get("kineto_out")
    if req.get("profile", True):
        cfg = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
        profiler = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
            record_shapes=False, with_stack=True, profile_memory=False, experimental_config=cfg)
        profiler.__enter__()
    wall_rt0, wall_mono0 = time.time_ns(), now()
    origin, arrivals, end = run.execute()
    wall_rt1, wall_mono1 = time.time_ns(), now()
    if profiler is not None:
        profiler.__exit__(None, None, None)
        if trace_path:
            profiler.export_chrome_trace(trace_path)
    acc, stamps, glog = run.device_log()
    threads = list(run.logs)
    injector = None
    if run.plan.get("actions"):
        injector = len(threads)
        threads.append(run.injector_log)
    return {
        "origin": origin,
        "end": end,
        "arrivals": arrivals,
        "requests": run.requests,
        "threads": threads,
        "injector": injector,
        "kernels": acc,
        "stamps": stamps,
        "graph_kernels": glog,
        "graph_tags": [run.graph_replays[g] for g in sorted(run.graph_replays)],
        "errors": run.errors,
        "clock": {"offset_ns": device.offset_ns, "spread_ns": device.calibration,
                  "realtime_minus_monotonic_ns": [wall_rt0 - wall_mono0, wall_rt1 - wall_mono1]},
        "device": {"name": device.props.name, "sms": device.sms,
                   "capability": [device.props.major, device.props.minor]},
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda, "cupy": cupy.__version__,
                     "python": sys.version.split()[0]},
    }


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve()
    else:
        sys.stderr.write("usage: executor.py serve\n")
        sys.exit(2)
