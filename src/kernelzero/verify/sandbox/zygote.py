"""A fork server for sandboxed workers: torch and Triton imported once, each worker forked into its own sandbox.

Why: on the H200 host the pool is CPU-bound, and a fresh worker interpreter spends about 5.5 CPU-s importing torch
before it does anything (bench/service.md, 2026-12-03: 12.5-13 CPU-s per worker, two workers and a judge per
sample). The server (`python -m kernelzero.verify.sandbox.zygote SOCKET`) imports `PRELOAD` once, as root, without
touching CUDA (a CUDA context does not survive a fork), and then forks one worker per request.

The sandbox is the one `box.py` builds with util-linux, built here in-process instead (same spec, same `enter.py`
steps, so the two paths cannot drift apart in what they give the sandboxed code):

- **request**: one SOCK_SEQPACKET connection per worker, on a socket in a folder only root can reach (mode 0700,
  and the peer must be root: SO_PEERCRED); the message is JSON (`spec`: enter.py's keep/private/cwd/uid/gid;
  `net`: an empty network namespace; `env`; `argv`; `cgroup`: the memory cgroup's `cgroup.procs` or null) with
  three descriptors: the worker's stdin, its output (stdout and stderr) and its reply pipe;
- **outer process** (forked by the server, root, the role `unshare` plays on the cold path): its own session (the
  judge kills the group), joins the memory cgroup, unshares PID, mount (propagation private), IPC and network
  namespaces, forks the worker and tells the judge its own pid; then waits for either end: the worker's exit (its
  status goes to the judge) or the judge's connection closing (the judge died or gave up: the worker is killed,
  and with process 1 of its namespace every process it started, setsid daemons included);
- **worker** (process 1 of the new PID namespace): dies with the outer process, mounts its own /proc, runs
  `enter.enter(spec)` (private tmpfs over /tmp, /dev/shm, /var/tmp, its folders bound back, no core dumps,
  no_new_privs, every group dropped, the sandbox uid), takes the three descriptors as 0, 1/2 and 3 and closes every
  other one (the server's socket, the connection), replaces the environment, `sys.path` and `sys.argv` with the
  request's, re-seeds `random`, and runs `kernelzero.verify.worker`'s `main`.

What a forked worker shares with the server: the server's memory as it was at the fork (imported modules; no key,
no verdict, nothing of another sample: the channel's key reaches the worker later, through its stdin, from the
judge). A candidate that rewrites a module changes its own copy only. The server never runs untrusted code and
never initialises CUDA; it ends when its starter closes the server's stdin (`zygote_client.address`).

Everything here is an optimisation of the worker's start, never a different sandbox: where the server is
unavailable the judge starts the worker the cold way (`worker_process.py`).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import io
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import tempfile
import traceback

from kernelzero.verify.sandbox import enter as enter_mod

PRELOAD = ("torch", "kernelzero.verify.worker.__main__")
# Only where a GPU is visible: a worker that interprets Triton (CPU) needs triton.language imported after
# TRITON_INTERPRET is set (its own @jit functions become interpreted ones), and torch._dynamo imports Triton. Dynamo is
# what the guards' first dispatch mode imports (worker/guards.py warm_dispatch: about 900 modules, 2.4 CPU-s on the
# 2-core machine, 4-6 s of wall time in each standby worker on the loaded H200 host, 2026-12-03). Not
# torch.utils.cpp_extension: importing it in the fork server initialised CUDA there (H200, 2026-12-04: every judge
# forked after it failed with "Cannot re-initialize CUDA in forked subprocess").
PRELOAD_GPU = ("triton", "triton.language", "torch._dynamo")
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x8000000, 0x20000000, 0x40000000
REPLY_FD = 3  # the worker's reply pipe, as the worker's argv names it
MAX_REQUEST = 1 << 20
SETUP_FAILED = enter_mod.SETUP_FAILED


def preload() -> list[str]:
    """Import PRELOAD (those that are installed); the names imported."""
    from kernelzero.verify.sandbox.process import gpu_visible

    done = []
    for name in PRELOAD + (PRELOAD_GPU if gpu_visible() else ()):
        try:
            importlib.import_module(name)
            done.append(name)
        except ImportError:
            continue
    return done


def serve(path: str) -> None:
    """Listen on `path` and fork a sandboxed worker per request, until stdin closes (the starter is gone)."""
    loaded = preload()
    threads = len(os.listdir("/proc/self/task"))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(128)
    print(json.dumps({"ready": path, "preloaded": loaded, "threads": threads}), flush=True)
    try:
        _loop(listener)
    finally:  # its starter is gone (or closed it): the socket and its folder go with the server
        listener.close()
        with contextlib.suppress(OSError):  # its starter may have removed them first
            os.unlink(path)
            if os.path.basename(os.path.dirname(path)).startswith("kz-zygote-"):
                os.rmdir(os.path.dirname(path))


def _loop(listener: socket.socket) -> None:
    poller = select.poll()
    poller.register(listener.fileno(), select.POLLIN)
    poller.register(0, select.POLLIN)
    while True:
        for fd, _ in poller.poll(1000):
            if fd == 0:
                if not os.read(0, 4096):
                    return
                continue
            conn, _ = listener.accept()
            try:
                _handle(conn, listener)
            except Exception as exc:  # noqa: BLE001 - one bad request never ends the server
                _reply(conn, {"error": f"{type(exc).__name__}: {exc}"})
            finally:
                conn.close()
        _reap()


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _reply(conn: socket.socket, obj: dict) -> None:
    try:
        conn.send(json.dumps(obj).encode())
    except OSError:
        pass


def _peer_is_root(conn: socket.socket) -> bool:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1] == 0


def _handle(conn: socket.socket, listener: socket.socket) -> None:
    conn.settimeout(10)
    if not _peer_is_root(conn):
        raise PermissionError("only root may ask for a worker")
    data, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST, 3)
    try:
        request = json.loads(data)
        trusted = request.get("role") in TRUSTED
        if len(fds) != (2 if trusted else 3) or not _valid(request, trusted):
            raise ValueError(
                "a request is JSON with argv, env and spec, and three descriptors (a judge's or a probe's: role, the "
                "entry point's own argv, env and cwd, and two descriptors)"
            )
        if request["env"].get("TRITON_INTERPRET") and "triton.language" in sys.modules:
            raise ValueError("this server imported Triton for the GPU: an interpreting process starts cold")
        pid = os.fork()
        if pid == 0:
            try:
                (_outer_trusted if trusted else _outer)(conn, listener, request, fds)
            except BaseException:  # noqa: BLE001 - said where the worker's log goes, then the sample ends
                traceback.print_exc()
            finally:
                os._exit(SETUP_FAILED)
    finally:
        for fd in fds:
            os.close(fd)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _outer(conn: socket.socket, listener: socket.socket, request: dict, fds: list[int]) -> None:
    """The outer process (root, outside the new PID namespace): see the module docstring."""
    listener.close()
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(fds[1], 1)  # its own errors reach the worker's log
    os.dup2(fds[1], 2)
    os.setsid()
    try:
        if request.get("cgroup"):
            with open(request["cgroup"], "w") as f:
                f.write(str(os.getpid()))
        flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | (CLONE_NEWNET if request.get("net") else 0)
        _check(_libc().unshare(flags), "unshare")  # os.unshare is Python 3.12's: the CPU machines run 3.11
        _check(_libc().mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    except OSError as exc:
        _reply(conn, {"error": f"the sandbox could not be set up: {exc}"})
        return
    child = os.fork()
    if child == 0:
        _worker(request, fds)
    for fd in fds:
        os.close(fd)
    _reply(conn, {"pid": os.getpid()})
    _watch(conn, child, 0.0)


# The verifier's own processes a caller may have forked (unsandboxed, root, as their cold starts are): the entry
# module of each role. A judge's argv is launch's (`--parent PID` and its own arguments); a probe's is its device.
TRUSTED = {"judge": "kernelzero.verify.judge.launch", "probe": "kernelzero.verify.judge.probe_child"}
PROBE_DEVICES = ("cuda", "cuda-held", "cpu", "cuda-held-ready", "cpu-ready")


def _valid(request: dict, trusted: bool) -> bool:
    argv, env = request.get("argv"), request.get("env")
    if not isinstance(argv, list) or not isinstance(env, dict):
        return False
    if not trusted:
        return True
    if not isinstance(request.get("cwd"), str) or not all(isinstance(a, str) for a in argv):
        return False
    if request["role"] == "probe":
        return len(argv) == 1 and argv[0] in PROBE_DEVICES
    return len(argv) >= 3 and argv[0] == "--parent"


def _watch(conn: socket.socket, child: int, grace_s: float) -> None:
    """The outer process's wait: the child's exit status goes to the caller; the caller's end of the connection
    closing (it died or gave up) ends the child: SIGKILL at once (a worker), or SIGTERM, its death signal, and
    SIGKILL only after `grace_s` (a judge: it kills its workers and removes its folders first). Never returns."""
    conn.settimeout(None)
    watch = select.poll()
    pidfd = os.pidfd_open(child)
    watch.register(pidfd, select.POLLIN)
    watch.register(conn.fileno(), select.POLLIN)
    while True:
        ready = {fd for fd, _ in watch.poll()}
        if pidfd in ready:
            _, status = os.waitpid(child, 0)
            _reply(conn, {"status": os.waitstatus_to_exitcode(status)})
            os._exit(0)
        if conn.fileno() in ready:
            if grace_s:
                os.kill(child, signal.SIGTERM)
                if not select.select([pidfd], [], [], grace_s)[0]:
                    os.kill(child, signal.SIGKILL)
            else:
                os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            os._exit(0)


JUDGE_GRACE_S = 60.0  # a judge (or a probe) whose caller went has this long for its teardown


def _outer_trusted(conn: socket.socket, listener: socket.socket, request: dict, fds: list[int]) -> None:
    """A judge's or a probe's outer process: no sandbox (the verifier's own side, root, as a cold start is), its own
    session (the caller kills the group), the process forked as its child, whose death signal follows this one."""
    listener.close()
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(fds[1], 1)
    os.dup2(fds[1], 2)
    os.setsid()
    child = os.fork()
    if child == 0:
        _trusted(request, fds)
    for fd in fds:
        os.close(fd)
    _reply(conn, {"pid": os.getpid()})
    _watch(conn, child, JUDGE_GRACE_S)


FORKED_JUDGE = False  # True in a judge this server forked (the verdict says so: judge.Judge._cpu_seconds)


def _trusted(request: dict, fds: list[int]) -> None:
    """`python -m <TRUSTED[role]>` with the request's argv, environment and folder, forked instead of started. A
    judge's caller is its death signal's subject through this outer process. Never returns."""
    code = 1
    try:
        _reset_signals()
        module, argv = TRUSTED[request["role"]], list(request["argv"])
        _set_cmdline(["python", "-m", module, *argv])  # as a cold one's (a judge's names its caller)
        if request["role"] == "judge":
            argv[1] = str(os.getppid())  # launch.die_with_parent: the outer process stands for the caller
        for target, fd in ((0, fds[0]), (1, fds[1]), (2, fds[1])):
            os.dup2(fd, target)
        os.closerange(3, _max_fd())
        os.chdir(request["cwd"])
        _become({**request, "argv": argv})
        if request["role"] == "judge":  # (this module is __main__ here: the flag goes to the importable one)
            importlib.import_module("kernelzero.verify.sandbox.zygote").FORKED_JUDGE = True
        code = importlib.import_module(module).main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the judge's own failure: its traceback goes to its output
        traceback.print_exc()
    finally:
        _flush_and_exit(code)


def _reset_signals() -> None:
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _flush_and_exit(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code)


def _worker(request: dict, fds: list[int]) -> None:
    """Process 1 of the new PID namespace: enter the sandbox, then run the worker. Never returns."""
    try:
        libc = _libc()
        _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
        _check(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
        _reset_signals()
        _set_cmdline(["python", "-m", "kernelzero.verify.worker", str(REPLY_FD), *map(str, request["argv"])])
        enter_mod.enter(request["spec"])
        for target, fd in ((0, fds[0]), (1, fds[1]), (2, fds[1]), (REPLY_FD, fds[2])):
            os.dup2(fd, target)
        os.closerange(REPLY_FD + 1, _max_fd())
        if "reference" not in request["argv"]:  # as after an exec on the cold path (a change of uid cleared it)
            libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        os.write(fds[1] if len(fds) > 1 else 2, f"kernelzero sandbox: could not enter the sandbox: {exc}\n".encode())
        os._exit(SETUP_FAILED)
    code = 1
    try:
        _become(request)
        from kernelzero.verify.worker.__main__ import main

        code = main([str(REPLY_FD), *request["argv"]])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the worker's own failure: its traceback goes to its log
        traceback.print_exc()
    finally:
        _flush_and_exit(code)


def _max_fd() -> int:
    try:
        return int(os.sysconf("SC_OPEN_MAX"))
    except (ValueError, OSError):
        return 65536


def _become(request: dict) -> None:
    """The interpreter's state as a fresh `python -m kernelzero.verify.worker` in the request's environment."""
    env = {str(k): str(v) for k, v in request["env"].items()}
    os.environ.clear()
    os.environ.update(env)
    entries = [e for e in env.get("PYTHONPATH", "").split(os.pathsep) if e]
    rest = [p for p in sys.path[1:] if p and p not in entries]
    sys.path[:] = [os.getcwd(), *entries, *rest]
    sys.argv = ["-m", *(str(a) for a in request["argv"])]
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True, write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True, write_through=True)
    random.seed()
    tempfile.tempdir = None  # cached from the server's environment at its imports: found again from TMPDIR


def _set_cmdline(argv: list[str]) -> None:
    """Make /proc/PID/cmdline read as a cold process's (`ps`, the GPU gate's monitor and the tests go by it; the
    server's own would name its socket): `argv` written over the server's own command line, in place (no privilege
    needed), cut to its length; the server starts with room for it (zygote_client: a last argument of spaces)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start and arg_end: fields 48 and 49 of proc(5)
    except (OSError, IndexError, ValueError):
        return
    room = end - start
    data = b"\0".join(a.encode() for a in argv)[: max(room - 1, 0)]
    if room > 0:
        ctypes.memmove(start, data.ljust(room, b"\0"), room)


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):  # the second: room for the forked processes' command lines (_set_cmdline)
        sys.stderr.write("usage: python -m kernelzero.verify.sandbox.zygote SOCKET [ROOM]\n")
        return 2
    serve(argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
