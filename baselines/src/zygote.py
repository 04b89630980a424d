# The warm start of batch profilers (baselines/PROTOCOL.md, "Warm start";
# baselines/src/zygote.rs). The harness's own code, never a profiler's: it
# imports one of the harness's preload sets (the standard library's common modules,
# or those plus the analysis stack baselines/hta/setup-hta.sh pins), then forks one
# process per batch-profiler server the harness asks for. Each fork confines itself
# (its cgroup, its own user, PID, network, IPC and UTS namespaces, its limits, its own
# Landlock domain, nested in this process's) before it runs the profiler's script, so
# that no two of them share anything but what this process had imported.
#
# Runs under `python3 -I -c`, confined by the harness like any server (its own
# namespaces, Landlock, cgroup). stdin is a SOCK_SEQPACKET socket to the harness:
#   harness -> here: {"id", "argv", "env", "fsize", "nproc", "proc_access"}
#                    with descriptors [ruleset, stdin, stdout, stderr, cgroup.procs...]
#   here -> harness: {"preloaded": N} once; {"id", "ready": true} with the pidfd of the
#                    fork that runs the script; {"id", "status": "..."} when a fork ends
#                    (before or after it was ready).
import ctypes
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import traceback

PRELOADS = {
    "python": [
        "argparse", "bisect", "collections", "csv", "dataclasses", "functools", "gzip",
        "heapq", "io", "itertools", "json", "math", "pathlib", "re", "runpy",
        "statistics", "tempfile", "typing",
    ],
}
PRELOADS["hta"] = PRELOADS["python"] + [
    "numpy", "pandas", "networkx", "hta.trace_analysis",
    "hta.analyzers.critical_path_analysis",
]

CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_RULE_PATH_BENEATH = 1
MAX_MESSAGE = 1 << 20
MAX_FDS = 16

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def checked(result, what):
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, "%s: %s" % (what, os.strerror(err)))
    return result


def send(sock, message, fds=()):
    socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


def preload(name, path):
    # Single-threaded numerical libraries: a fork keeps only the forking thread.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    if path:
        sys.path.insert(0, path)
    import importlib
    import warnings

    warnings.simplefilter("ignore")
    for module in PRELOADS[name]:
        importlib.import_module(module)
    warnings.resetwarnings()
    # Out of the collector's reach: a collection in a fork would write to every
    # object's header and copy the zygote's pages into each fork (measured with HTA's
    # set: 29.5 MiB of private memory per fork against 6.4 MiB frozen).
    import gc

    gc.collect()
    gc.freeze()
    # What a fork inherits must be this process's state alone: no thread runs beside
    # the one that forks (a fork would copy a lock another thread held).
    tasks = len(os.listdir("/proc/self/task"))
    if tasks != 1 or threading.active_count() != 1:
        raise RuntimeError("preload %s left %d threads running" % (name, tasks))
    return len(PRELOADS[name])


def write(path, text):
    # O_WRONLY alone: O_TRUNC would need Landlock's truncate right on /proc.
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def relay(request, fds, sock, zygote):
    """The fork the harness's request made: enters the server's cgroup and new
    namespaces, forks the server (PID 1 of its PID namespace) and ends as it ends."""
    ruleset, stdin, stdout, stderr, *cgroups = fds
    try:
        os.dup2(stderr, 2)
        for procs in cgroups:
            os.write(procs, b"0")
            os.close(procs)
        checked(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
        if os.getppid() != zygote:
            os._exit(1)
        import resource

        nproc = request["nproc"]
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
        checked(libc.unshare(flags), "unshare")
        write("/proc/self/setgroups", "deny")
        write("/proc/self/uid_map", "0 0 1\n")
        write("/proc/self/gid_map", "0 0 1\n")
        server = os.fork()
        if server == 0:
            run(request, ruleset, stdin, stdout, sock)
        os.closerange(0, os.sysconf("SC_OPEN_MAX"))
        while True:
            try:
                _, status = os.waitpid(server, 0)
                break
            except InterruptedError:
                continue
        if os.WIFSIGNALED(status):
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
            os.kill(os.getpid(), os.WTERMSIG(status))
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    except BaseException:
        traceback.print_exc()
        os._exit(127)


def landlock_read_proc(ruleset, access):
    """The fork's own /proc is this process's: add it to the harness's ruleset, whose
    /proc is the harness's (as the per-view form does after its fresh mount)."""
    proc = os.open("/proc", os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY)
    attr = ctypes.create_string_buffer(struct.pack("=Qi", access, proc))
    checked(
        libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, attr, 0),
        "landlock_add_rule",
    )
    os.close(proc)


def run(request, ruleset, stdin, stdout, sock):
    """The server: confines itself, then runs the profiler's script as `python3
    SCRIPT ARGS...` would, in this process's interpreter."""
    try:
        checked(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
        pidfd = os.pidfd_open(os.getpid())
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        import resource

        fsize = request["fsize"]
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        landlock_read_proc(ruleset, request["proc_access"])
        checked(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl")
        checked(libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
        # Confined: now the harness may hold it, and nothing else of the zygote's stays.
        send(sock, {"id": request["id"], "ready": True}, [pidfd])
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(request["env"])
        import tempfile

        tempfile.tempdir = None
        import io

        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)))
        sys.stderr = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(2, "w", closefd=False)), line_buffering=True
        )
        script = request["argv"][0]
        sys.argv = list(request["argv"])
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    except BaseException:
        traceback.print_exc()
        os._exit(127)
    code = 0
    try:
        import runpy

        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            code = code or 120
    os._exit(code & 0xFF)


def describe(status):
    if os.WIFSIGNALED(status):
        return "killed by signal %d" % os.WTERMSIG(status)
    return "exit status: %d" % os.waitstatus_to_exitcode(status)


def main():
    # The socket leaves fd 0, which each fork makes its server's stdin.
    sock = socket.socket(fileno=os.dup(0))
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        count = preload(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
    except BaseException as e:
        traceback.print_exc()
        send(sock, {"failed": "%s: %s" % (type(e).__name__, e)})
        return 1
    send(sock, {"preloaded": count})
    zygote = os.getpid()
    forks = {}
    while True:
        readable, _, _ = select.select([sock], [], [], 0.2)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in forks:
                send(sock, {"id": forks.pop(pid), "status": describe(status)})
        if not readable:
            continue
        message, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
        if not message:
            return 0
        request = json.loads(message)
        try:
            pid = os.fork()
        except OSError as e:
            for fd in fds:
                os.close(fd)
            send(sock, {"id": request["id"], "status": "cannot fork: %s" % e})
            continue
        if pid == 0:
            relay(request, fds, sock, zygote)
        forks[pid] = request["id"]
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    sys.exit(main())
