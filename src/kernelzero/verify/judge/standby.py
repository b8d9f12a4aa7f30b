"""Judges started ahead of their requests, so a sample does not wait for two Python start-ups.

What: `Standby(count)` keeps up to `count` judge processes ready per kind of environment (a GPU lane's
`CUDA_VISIBLE_DEVICES` and build cache; the sandbox of the options): each is `verify.launch --standby`,
which has already started its sandboxed worker, imported torch in both and, on a GPU, created the CUDA
contexts, warmed Triton and checked CUDA IPC (verify/judge/launch.py, verify/worker/warm.py). `take(env, opts)` hands
one over (None when none is ready: the caller starts a judge as usual) and asks for a replacement.

Why it keeps the verifier's guarantees: each standby serves exactly one request and exits, so no state
passes from one candidate to the next; it runs the same judge with the same sandbox (a request whose
sandbox differs gets a fresh worker); the candidate is written only when its request arrives, and
nothing of it runs before the guards are installed, as in a cold start.

Processes are started from one long-lived thread: a judge dies with the thread that started it
(PR_SET_PDEATHSIG follows the thread), so a short-lived starter would take its standbys with it.
`close()` ends them all (their stdin closes: they exit without judging anything).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict, deque

from kernelzero.verify.judge.launch import sandbox_spec
from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.sandbox import zygote_client

MOMENTARY = frozenset({"PYTEST_CURRENT_TEST"})  # environment variables a standby's kind ignores


class Standby:
    """Ready judge processes, `count` per environment (see the module docstring)."""

    def __init__(self, count: int):
        self.count = max(0, count)
        self.ready: dict[str, deque] = defaultdict(deque)
        self.lock = threading.Lock()
        self.wanted: queue.Queue = queue.Queue()
        self.closed = False
        self.known: set[str] = set()
        self.started = 0  # standbys started, and taken (for tests and benchmarks)
        self.taken = 0
        if self.count:
            threading.Thread(target=self._starter, name="kz-standby", daemon=True).start()

    @staticmethod
    def _key(env: dict[str, str], spec: dict) -> str:
        """One kind of environment: the judge's environment without the variables that name the caller's moment
        (pytest's current test changes with every test, and would make every request a kind of its own)."""
        kept = sorted((k, v) for k, v in env.items() if k not in MOMENTARY)
        return json.dumps([kept, spec], sort_keys=True)

    def take(self, env: dict[str, str], opts: VerifyOptions, on_gpu: bool) -> subprocess.Popen | None:
        """A ready judge for this environment, or None; either way a replacement is started."""
        if self.count == 0 or self.closed:
            return None
        spec = sandbox_spec(opts, on_gpu)
        key = self._key(env, spec)
        proc, dead = None, []
        with self.lock:
            starts = 1 if key in self.known else self.count
            self.known.add(key)
            ready = self.ready[key]
            while ready and proc is None:
                proc = ready.popleft()
                if proc.poll() is not None:  # died waiting (killed, out of memory): start another
                    dead.append(proc)
                    proc = None
            self.taken += proc is not None
        for _ in range(starts + len(dead)):
            self.wanted.put((key, env, spec))
        _end(dead)
        return proc

    def _starter(self) -> None:
        while True:
            item = self.wanted.get()
            if item is None:
                return
            key, env, spec = item
            with self.lock:
                if self.closed or len(self.ready[key]) >= self.count:
                    continue
            proc = start_judge(["--parent", str(os.getpid()), "--standby", json.dumps(spec)], env, keep_stdin=True)
            with self.lock:
                self.started += 1
                late = self.closed
                if not late:
                    self.ready[key].append(proc)
            if late:  # closed while it started
                _end([proc])

    def close(self) -> None:
        """End every standby judge (none has a request) and the starter thread."""
        with self.lock:
            self.closed = True
            procs = [p for ready in self.ready.values() for p in ready]
            self.ready.clear()
        self.wanted.put(None)
        _end(procs)


def start_judge(argv: list[str], env: dict[str, str], keep_stdin: bool = False):
    """A judge process (`python -m kernelzero.verify.judge.launch` with `argv`) in its own session, its output (stdout
    and stderr) a pipe: forked by the fork server `env` names (sandbox/zygote.py: no interpreter start, no import of
    torch), else started cold. Its stdin is a pipe when `keep_stdin`, else empty."""
    proc = zygote_client.start_judge(argv, env, keep_stdin)
    if proc is not None:
        return proc
    return subprocess.Popen(
        [sys.executable, "-m", "kernelzero.verify.judge.launch", *argv],
        stdin=subprocess.PIPE if keep_stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )


NONE = Standby(0)  # no standby judge, not even the process's own (verify/api.py own_standby): a cold judge


def _end(procs: list[subprocess.Popen], grace_s: float = 15.0) -> None:
    """Close the standbys' stdin (each exits and cleans up); kill a group that has not exited after `grace_s`."""
    for proc in procs:
        try:
            proc.stdin.close()
        except OSError:
            pass
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
