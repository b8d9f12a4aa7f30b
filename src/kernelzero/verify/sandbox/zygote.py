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
PRELOAD_GPU = ("triton", "triton.language")  # only where a GPU is visible: a worker that interprets Triton (CPU)
# needs triton.language imported after TRITON_INTERPRET is set (its own @jit functions become interpreted ones)
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_MM, PR_SET_MM_ARG_START, PR_SET_MM_ARG_END = 1, 4, 35, 8, 9
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
        if len(fds) != 3 or not isinstance(request.get("argv"), list) or not isinstance(request.get("env"), dict):
            raise ValueError("a request is JSON with argv, env and spec, and three descriptors")
        if request["env"].get("TRITON_INTERPRET") and "triton.language" in sys.modules:
            raise ValueError("this server imported Triton for the GPU: an interpreting worker starts cold")
        pid = os.fork()
        if pid == 0:
            try:
                _outer(conn, listener, request, fds)
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
        if conn.fileno() in ready:  # the judge closed its end (or died): the sample ends now
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            os._exit(0)


def _worker(request: dict, fds: list[int]) -> None:
    """Process 1 of the new PID namespace: enter the sandbox, then run the worker. Never returns."""
    try:
        libc = _libc()
        _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
        _check(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
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
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


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


_CMDLINE: list = []  # the buffer /proc/PID/cmdline points at, kept alive for the process's life


def _set_cmdline(argv: list[str]) -> None:
    """Make /proc/PID/cmdline read as a cold worker's (diagnostics and process listings go by it; the server's own
    would name its socket). Needs CAP_SYS_RESOURCE, so it runs before the change of uid; a refusal changes nothing."""
    data = b"\0".join(a.encode() for a in argv) + b"\0"
    buf = ctypes.create_string_buffer(data, len(data))
    start = ctypes.addressof(buf)
    libc = _libc()
    if libc.prctl(PR_SET_MM, PR_SET_MM_ARG_START, ctypes.c_ulong(start), 0, 0) == 0:
        libc.prctl(PR_SET_MM, PR_SET_MM_ARG_END, ctypes.c_ulong(start + len(data)), 0, 0)
        _CMDLINE.append(buf)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m kernelzero.verify.sandbox.zygote SOCKET\n")
        return 2
    serve(argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
