"""The PyTorch track's training-step programs run as a real training loop, traced by
TraceML (docs/torch-track.md, "TraceML on the training step").

Started by `causalbench torch record --train-loop` as
`python3 -c <this source> serve <executor source>`: the executor
(`executor.py`, compiled under its own file name `<string>`, so its functions keep
the names and lines the fence lines and Kineto's stacks give them) is loaded
unchanged, and this file replaces, for every request marked `train_loop`, how the
consumer thread of the program's handoff runs its tasks. Every scenario step is
still issued by the executor's own `Run.step` (the same calls, the same log, the
same truth: `generator/src/torch/truth.rs`); what changes is the Python around
them, which is now the shape TraceML's quick-start instruments:

    for batch in loader:                     # torch.utils.data.DataLoader
        with traceml.trace_step(model):
            optimizer.zero_grad(set_to_none=True)
            batch = to_device(batch)         # the steps before `forward` (the H2D copy)
            loss = model(batch)              # nn.Module.forward: the steps up to `forward`
            loss.backward()                  # autograd.Function.backward: through the comm wait
            optimizer.step()                 # torch.optim.Optimizer.step: the `optimizer` kernel
            loss_value(loss)                 # the steps after it (the `.item()` readback)

The loader: the scenario's loader thread decodes each batch and hands it over its
queue, as a DataLoader's worker does; the dataset's `__getitem__` takes the next
handed-over batch (its wait is the loader's input wait TraceML measures). The
model's parameter is a CPU tensor so that autograd runs the backward on the
calling thread (the scenario's main thread), as the truth says.

TraceML runs as its users run it without its launcher (`traceml.init()` against a
`traceml serve` aggregator, its README's "Plain PyTorch" path): one TraceML run per
executor process. Only the injected run (the request that names `traceml_out`) is
traced; its end-of-run `traceml.final_summary()` is written to that file. The twin
and quiet runs go through the same loop untraced. The Rust side starts one executor
per bundle in this mode, so each case is its own TraceML run.
"""

import json
import os
import socket
import subprocess
import sys
import threading

EXECUTOR = {"__name__": "causalbench_executor", "__builtins__": __builtins__}
exec(compile(sys.argv[2], "<string>", "exec"), EXECUTOR)  # noqa: S102 (our own executor)

torch = EXECUTOR["torch"]
now = EXECUTOR["now"]
Run = EXECUTOR["Run"]
run_request_untraced = EXECUTOR["run_request"]

# Which steps of the consumer's part of a training step each phase runs, by step id.
FORWARD, OPTIMIZER = "forward", "optimizer"


def phases(steps, first):
    """The consumer's steps (from `first`, the step after the handoff) split into the
    loop's phases: before the forward (the batch's copy), the model's forward (through
    the `forward` step), the backward (up to the `optimizer` step), the optimizer step,
    and what follows it (the loss readback). Raises when the program has no such
    steps: only the training-step shape runs as a loop."""
    ids = [s.get("id") for s in steps]
    try:
        fwd = ids.index(FORWARD, first)
        opt = ids.index(OPTIMIZER, fwd)
    except ValueError:
        raise RuntimeError("not a training step: the steps after the handoff have no "
                           "`forward` and `optimizer` steps to run as a training loop")
    return {"to_device": range(first, fwd), "forward": range(fwd, fwd + 1),
            "backward": range(fwd + 1, opt), "optimizer": range(opt, opt + 1),
            "after": range(opt + 1, len(steps))}


class TrainState:
    """What the request asked of the loop (set per request, read by TrainRun)."""
    traced = False


class StepFunction(torch.autograd.Function):
    """The step's forward steps in `forward`, its backward steps (the backward kernel,
    the gradient all-reduce and its event handshake, as a DDP gradient hook issues
    them) in `backward`."""

    @staticmethod
    def forward(ctx, weight, run, ti, item):
        ctx.run, ctx.ti, ctx.item = run, ti, item
        run.run_phase(ti, item, "forward")
        return weight.sum()

    @staticmethod
    def backward(ctx, grad):
        ctx.run.run_phase(ctx.ti, ctx.item, "backward")
        return torch.ones(1), None, None, None


class StepModel(torch.nn.Module):
    def __init__(self, run, ti):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(1))
        self.run, self.ti = run, ti

    def forward(self, item):
        return StepFunction.apply(self.weight, self.run, self.ti, item)


class StepOptimizer(torch.optim.Optimizer):
    def __init__(self, model):
        super().__init__(model.parameters(), {})
        self.model = model
        self.item = None

    @torch.no_grad()
    def step(self, closure=None):
        self.model.run.run_phase(self.model.ti, self.item, "optimizer")


class HandedOver(torch.utils.data.Dataset):
    """The batches the loader thread hands over, in order: `__getitem__` takes the
    next one off the consumer's inbox (the bookkeeping `Run.worker` and
    `Run.run_item` do when a task takes an item)."""

    def __init__(self, run, ti, count):
        self.run, self.ti, self.count = run, ti, count

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        run, ti = self.run, self.ti
        item = run.inboxes[ti].get()
        if item is None:
            raise RuntimeError("the run ended before the loader handed over batch %d" % index)
        run.busy[ti] = True
        with run.lock:
            run.pending_items[ti] -= 1
        run.logs[ti]["events"].append({"task": [now(), item["request"], item.get("handoff"),
                                                item.get("queue", ""), run.thread_free]})
        run.took(item)
        return item


class TrainRun(Run):
    """A run whose handoff consumer runs its tasks as a training loop."""

    def __init__(self, *args):
        super().__init__(*args)
        programs = self.sc["programs"]
        if len(programs) != 1:
            raise RuntimeError("a training loop runs one program, not %d" % len(programs))
        steps = programs[0]["steps"]
        handoffs = [i for i, s in enumerate(steps) if s["op"] == "handoff"]
        if len(handoffs) != 1:
            raise RuntimeError("a training loop needs exactly one handoff (loader -> main)")
        self.consumer = self.queues[steps[handoffs[0]]["queue"]]["consumer"]
        if len(self.pools[self.consumer]) != 1:
            raise RuntimeError("a training loop has one main thread")
        self.phase_steps = phases(steps, handoffs[0] + 1)
        self.thread_free = 0

    def run_phase(self, ti, item, phase):
        steps = self.sc["programs"][0]["steps"]
        for si in self.phase_steps[phase]:
            self.step(ti, item, si, steps[si])

    def worker(self, ti, barrier):
        if ti != self.pools[self.consumer][0]:
            return Run.worker(self, ti, barrier)
        self.logs[ti]["tid"] = threading.get_native_id()
        barrier.wait()
        try:
            self.train(ti)
        except Exception as e:  # the run's errors end up in its log
            self.errors.append("thread %d (training loop): %r" % (ti, e))
            self.all_done.set()
        while self.inboxes[ti].get() is not None:
            pass

    def train(self, ti):
        model = StepModel(self, ti)
        optimizer = StepOptimizer(model)
        loader = torch.utils.data.DataLoader(HandedOver(self, ti, len(self.requests)),
                                             batch_size=None, num_workers=0)
        if TrainState.traced:
            import traceml_ai as traceml
            trace = traceml.trace_step
        else:
            trace = None
        for item in loader:
            optimizer.item = item
            with (trace(model) if trace else _untraced()):
                optimizer.zero_grad(set_to_none=True)
                self.run_phase(ti, item, "to_device")
                loss = model(item)
                loss.backward()
                optimizer.step()
                self.run_phase(ti, item, "after")
            self.thread_free = now()
            self.busy[ti] = False
            self.finished()


class _untraced:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# --- TraceML ---------------------------------------------------------------
TRACEML = {}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def die_with_parent():
    import ctypes
    import signal
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_aggregator(logs_dir):
    """`traceml serve`, its standalone aggregator, in the background (its output on
    our stderr), started with the executor so that it is up by the injected run."""
    port = free_port()
    cmd = [sys.executable, "-c", "import sys; from traceml_ai.launcher.cli import main; "
           "sys.argv[0] = 'traceml'; sys.exit(main())", "serve", "--mode", "summary",
           "--logs-dir", logs_dir, "--run-name", "case", "--interval", "0.5",
           "--aggregator-port", str(port)]
    # It ends with the executor, which the recorder kills once the bundle is done.
    proc = subprocess.Popen(cmd, stdout=sys.stderr, stderr=sys.stderr, preexec_fn=die_with_parent)
    TRACEML.update(port=port, logs_dir=logs_dir, proc=proc)


def traceml_init():
    import traceml_ai as traceml
    if not TRACEML.get("initialized"):
        traceml.init(mode="auto", aggregator_host="127.0.0.1", aggregator_port=TRACEML["port"],
                     session_id="case", logs_dir=TRACEML["logs_dir"], ui_mode="summary", interval=0.5,
                     on_missing_aggregator="raise", connect_timeout_sec=60.0)
        TRACEML["initialized"] = True


def run_request(device, req, warm):
    EXECUTOR["Run"] = TrainRun if req.get("train_loop") else Run
    out = req.get("traceml_out")
    TrainState.traced = bool(out)
    if not out:
        return run_request_untraced(device, req, warm)
    verdict = {"tool": "traceml-ai"}
    t0 = now()
    try:
        import traceml_ai
        verdict["version"] = traceml_ai.__version__
        traceml_init()
    except Exception as e:
        verdict["error"] = "TraceML did not start: %r" % (e,)
        TrainState.traced = False
    t1 = now()
    answer = run_request_untraced(device, req, warm)
    t2 = now()
    if "error" not in verdict:
        try:
            import traceml_ai as traceml
            verdict["final_summary"] = traceml.final_summary(timeout_sec=120.0)
        except Exception as e:
            verdict["error"] = "TraceML's final summary failed: %r" % (e,)
    sys.stderr.write("traceml: init %.1f s, final summary %.1f s\n" % ((t1 - t0) / 1e9, (now() - t2) / 1e9))
    with open(out, "w") as f:
        json.dump(verdict, f)
    return answer


EXECUTOR["run_request"] = run_request

if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "serve":
        logs = os.environ.get("CAUSALBENCH_TRACEML_LOGS")
        if logs:
            start_aggregator(logs)
        try:
            EXECUTOR["serve"]()
        finally:
            if TRACEML.get("proc"):
                TRACEML["proc"].terminate()
    else:
        sys.stderr.write("usage: train_loop.py serve <executor source>\n")
        sys.exit(2)
