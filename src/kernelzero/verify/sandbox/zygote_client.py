"""The judge's side of the fork server (zygote.py): start this process's server, and start a worker through it.

- `address()`: in a process that starts judges (`verify()`'s caller, the pool, the service, a pytest worker): this
  process's fork server, started on first use (a fresh interpreter, root, in a folder of mode 0700), and its socket
  path, which judges find in `KZ_ZYGOTE_SOCKET`; a parent's server when `KZ_ZYGOTE_SOCKET` came with the environment
  and its folder still exists (the GPU gate starts one for all of its pytest workers). The server ends when this process does (its stdin is a pipe this
  process holds). "" where there is none: `KZ_FORK_SERVER=0`, not root (no sandbox to build), or it failed to start.
  The first judges may find no socket yet (the server is still importing torch): they start their workers cold.
- `start_judge(...)`: in a caller, a judge forked by the server (no interpreter start, no torch import).
- `start(...)`: in a judge, a worker through the server (`ZygoteProcess`, the part of `subprocess.Popen` the judge
  uses: `pid`, `stdin`, `stdout`, `poll`, `wait`, and `kill_group`); None when the server cannot be reached or
  cannot build the sandbox, and the judge starts the worker cold (the same sandbox, built by util-linux).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SOCKET_ENV = "KZ_ZYGOTE_SOCKET"  # the judge's environment: the fork server's socket
SWITCH_ENV = "KZ_FORK_SERVER"  # "0": no fork server (every worker starts cold)
CMDLINE_ROOM = 480  # bytes the server's command line keeps for a forked process's own (zygote._set_cmdline)
REPLY_TIMEOUT_S = 30.0  # a started worker's pid comes back within this (the fork itself takes milliseconds)

_lock = threading.Lock()
_server: dict = {}  # this process's server: pid (of the process that started it), proc, folder, path


def enabled() -> bool:
    return os.environ.get(SWITCH_ENV, "1").strip() != "0" and os.geteuid() == 0


def address(wait_s: float = 0.0) -> str:
    """This process's fork server's socket path, the server started on first use; "" when there is none. With
    `wait_s`, waits up to that long for the server to listen (it imports torch first)."""
    if not enabled():
        return ""
    inherited = os.environ.get(SOCKET_ENV, "")
    if inherited and _server.get("pid") != os.getpid() and os.path.isdir(os.path.dirname(inherited)):
        return inherited  # a parent's server, shared (the GPU gate's pytest workers): its folder goes when it ends
    with _lock:
        if _server.get("pid") != os.getpid() or _server["proc"].poll() is not None:
            try:
                _start_server()
            except OSError:
                _server.clear()
                return ""
        path, proc = _server["path"], _server["proc"]
    deadline = time.monotonic() + wait_s
    while not os.path.exists(path) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    return path


def _start_server() -> None:
    from kernelzero.verify.sandbox.process import KEEP_ENV, import_path

    # mode 0700, root's: no sandboxed process reaches it. In /tmp rather than TMPDIR: a socket's path has at most
    # 107 bytes (a test's TMPDIR can be longer), and a caller's scratch folder is not the server's
    base = "/tmp" if os.access("/tmp", os.W_OK) else None
    folder = tempfile.mkdtemp(prefix="kz-zygote-", dir=base)
    path = str(Path(folder, "sock"))
    env = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
    # No HOME or TMPDIR of its own: a module that caches one at import (tempfile does) would hand it to every worker
    env.update({"PYTHONPATH": import_path(), "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/nonexistent"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelzero.verify.sandbox.zygote", path, " " * CMDLINE_ROOM],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
        cwd=folder,
    )
    if not _server:
        atexit.register(_stop_server)
    _server.update(pid=os.getpid(), proc=proc, folder=folder, path=path)


def _stop_server() -> None:
    if _server.get("pid") != os.getpid():
        return
    proc = _server["proc"]
    try:
        proc.stdin.close()  # the server's lifeline: it ends at once
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
    shutil.rmtree(_server["folder"], ignore_errors=True)


class ZygoteProcess:
    """A worker started through the fork server: `pid` is its outer process (the leader of its process group, the
    parent of its PID namespace's process 1), `returncode` the worker's exit status as the outer process reported it
    (-9 when the outer process was killed before it could)."""

    def __init__(self, conn: socket.socket, pid: int, stdin_fd: int, stdout_fd: int):
        self.conn, self.pid, self.returncode = conn, pid, None
        self.stdin = os.fdopen(stdin_fd, "wb", buffering=0)
        self.stdout = os.fdopen(stdout_fd, "rb", buffering=0)
        self.args = ["zygote", str(pid)]
        self._lock = threading.Lock()

    def _read_status(self, timeout_s: float | None) -> None:
        with self._lock:
            if self.returncode is not None:
                return
            ready, _, _ = select.select([self.conn], [], [], timeout_s)
            if not ready:
                return
            try:
                data = self.conn.recv(4096)
            except OSError:
                data = b""
            try:
                status = json.loads(data).get("status") if data else None
            except ValueError:
                status = None
            self.returncode = status if type(status) is int else -signal.SIGKILL
            self.conn.close()

    def poll(self) -> int | None:
        self._read_status(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read_status(left if left is None else max(left, 0.0))
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[bytes, None]:
        """Its remaining output (read to its end) and its exit, as `subprocess.Popen.communicate` gives them."""
        out = b""
        if self.stdout is not None and not self.stdout.closed:
            out = self.stdout.read() or b""
            self.stdout.close()
        self.wait(timeout)
        return out, None

    def kill_group(self) -> None:
        """SIGKILL the worker's process group (its outer process and the worker), unless it has already ended (its
        pid may then be another process's)."""
        if self.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def start(argv: list[str], env: dict[str, str], spec: dict, net: bool, cgroup: str | None, reply_fd: int):
    """A worker (`python -m kernelzero.verify.worker` with `argv` after its reply descriptor) through this judge's
    fork server, in the sandbox `spec` (box.spec); None when the server cannot start it (the caller starts it cold).
    `reply_fd`: the write end of the reply pipe (the caller closes its copy)."""
    request = {"argv": argv, "env": env, "spec": spec, "net": net, "cgroup": cgroup}
    return _ask(os.environ.get(SOCKET_ENV, ""), request, [reply_fd])


def start_judge(argv: list[str], env: dict[str, str], keep_stdin: bool = False):
    """A judge (`python -m kernelzero.verify.judge.launch` with `argv`, which starts `--parent PID`) forked by the
    server `env` names, in `env` and this process's working folder: the same judge a cold start runs, without its
    interpreter's start and torch's import. None when the server cannot start it (the caller starts it cold). Its
    stdin is a pipe, closed at once unless `keep_stdin` (a standby reads its request there); its output (stdout and
    stderr) is `stdout`."""
    return start_trusted("judge", argv, env, keep_stdin)


def start_trusted(role: str, argv: list[str], env: dict[str, str], keep_stdin: bool = False):
    """A verifier process of `role` (zygote.TRUSTED: `judge`, `probe`) forked by the server `env` names, as
    `start_judge` says; None when the server cannot start it."""
    request = {"role": role, "argv": argv, "env": env, "cwd": os.getcwd()}
    proc = _ask(env.get(SOCKET_ENV, ""), request, [])
    if proc is not None and not keep_stdin:
        proc.stdin.close()
        proc.stdin = None
    return proc


def _ask(path: str, request: dict, extra_fds: list[int]) -> ZygoteProcess | None:
    """Send `request` with a new stdin pipe, a new output pipe and `extra_fds`; the started process, or None."""
    if not path or not enabled() or not os.path.exists(path):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    mine = [in_w, out_r]
    try:
        conn.settimeout(REPLY_TIMEOUT_S)
        conn.connect(path)
        socket.send_fds(conn, [json.dumps(request).encode()], [in_r, out_w, *extra_fds])
        reply = json.loads(conn.recv(4096) or b"{}")
        if type(reply.get("pid")) is not int:
            raise OSError(f"the fork server did not start the process: {reply.get('error', 'no answer')}")
    except (OSError, ValueError):
        conn.close()
        for fd in mine:
            os.close(fd)
        return None
    finally:
        os.close(in_r)
        os.close(out_w)
    return ZygoteProcess(conn, reply["pid"], in_w, out_r)
