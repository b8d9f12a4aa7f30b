"""Judges started ahead of their requests, so a sample does not wait for two Python start-ups.

What: `Standby(count)` keeps up to `count` judge processes ready per kind of environment (a GPU lane's
`CUDA_VISIBLE_DEVICES` and build cache; the sandbox of the options): each is `verify.launch --standby`,
which has already started its sandboxed worker, imported torch in both and, on a GPU, created the CUDA
contexts, warmed Triton and checked CUDA IPC (verify/judge/launch.py, verify/worker/warm.py). `take(env, opts)` hands
one over (None when none is ready: the caller starts a judge as usual) and asks for a replacement.

Why it keeps the verifier's guarantees: a standby judge serves at most `serves` requests (`KZ_STANDBY_SERVES`,
judge/turns.py; default 8), each with a fresh sandboxed candidate worker, so no state passes from one candidate
to the next through a worker; it runs the same judge with the same sandbox (a request whose sandbox differs gets a
fresh worker); the candidate is written only when its request arrives, and nothing of it runs before the guards are
installed, as in a cold start. A judge that answers `again` (judge/judge_io.py) comes back here (`returned`) and
waits for its next request; one that served its last, or ended after a verdict that says something went wrong,
is replaced. `take` prefers the judge that kept the request's task's reference process (its last request had the
same task and options, `affinity`), then one whose reference has no task yet, then one resting with another task's.

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

from kernelzero.verify.judge import turns
from kernelzero.verify.judge.judge_io import sandbox_spec
from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.sandbox import zygote_client

MOMENTARY = frozenset({"PYTEST_CURRENT_TEST"})  # environment variables a standby's kind ignores


class Standby:
    """Ready judge processes, `count` per environment (see the module docstring)."""

    def __init__(self, count: int, serves: int | None = None):
        self.count = max(0, count)
        self.serves = turns.serves() if serves is None else max(1, serves)  # requests each judge serves at most
        self.ready: dict[str, deque] = defaultdict(deque)
        self.lock = threading.Lock()
        self.wanted: queue.Queue = queue.Queue()
        self.closed = False
        self.known: set[str] = set()
        self.left: dict[int, int] = {}  # pid -> requests a started judge may still take
        self.last: dict[int, str] = {}  # pid -> the reference key of the last request it served (its kept reference)
        self.lent: dict[int, tuple] = {}  # pid -> (kind, env, spec) of a judge out with a request
        self.started = 0  # standbys started, taken, and taken again after serving (for tests and benchmarks)
        self.taken = 0
        self.again = 0
        if self.count:
            threading.Thread(target=self._starter, name="kz-standby", daemon=True).start()

    @staticmethod
    def _key(env: dict[str, str], spec: dict) -> str:
        """One kind of environment: the judge's environment without the variables that name the caller's moment
        (pytest's current test changes with every test, and would make every request a kind of its own)."""
        kept = sorted((k, v) for k, v in env.items() if k not in MOMENTARY)
        return json.dumps([kept, spec], sort_keys=True)

    def _rank(self, proc: subprocess.Popen, affinity: str | None) -> int:
        """0: it kept this request's reference; 1: its reference has no task yet; 2: it rests with another task's."""
        last = self.last.get(proc.pid)
        return 1 if last is None else 0 if last == affinity else 2

    def take(
        self, env: dict[str, str], opts: VerifyOptions, on_gpu: bool, affinity: str | None = None
    ) -> subprocess.Popen | None:
        """A ready judge for this environment, or None; a replacement is started when the judge taken will not
        come back (its last request) or none was ready. `affinity`: the request's reference key (turns.py)."""
        if self.count == 0 or self.closed:
            return None
        spec = sandbox_spec(opts, on_gpu)
        key = self._key(env, spec)
        proc, dead = None, []
        with self.lock:
            starts = 0 if key in self.known else self.count
            self.known.add(key)
            ready = self.ready[key]
            for candidate in sorted(ready, key=lambda p: self._rank(p, affinity)):
                ready.remove(candidate)
                if candidate.poll() is None:
                    proc = candidate
                    break
                dead.append(candidate)  # died waiting (killed, out of memory): start another
            if proc is None:
                starts = max(starts, 1)
            else:
                self.taken += 1
                proc.kz_served = proc.pid in self.last  # it served a request before this one (run.py: STALE)
                self.again += proc.kz_served
                self.left[proc.pid] -= 1
                if self.left[proc.pid] > 0:
                    self.lent[proc.pid] = (key, env, spec)
                else:
                    starts = max(starts, 1)
                    self._forget(proc)
            for gone in dead:
                self._forget(gone)
        for _ in range(starts + len(dead)):
            self.wanted.put((key, env, spec))
        _end(dead)
        return proc

    def returned(self, proc: subprocess.Popen, again: bool, served: str | None = None) -> bool:
        """A judge lent by `take` answered. `again` (it said it serves another request): back among the ready, and
        True; `served` is the reference key of the request it served. Otherwise False: the caller sees it end,
        and another is started in its place."""
        with self.lock:
            lent = self.lent.pop(proc.pid, None)
            if lent is None:  # its last request: its replacement was asked for when it was taken
                return False
            if again and not self.closed and proc.poll() is None:
                self.last[proc.pid] = served
                self.ready[lent[0]].append(proc)
                return True
            self._forget(proc)
        if not self.closed:
            self.wanted.put(lent)
        return False

    def _forget(self, proc: subprocess.Popen) -> None:
        for table in (self.left, self.last, self.lent):
            table.pop(proc.pid, None)

    def _starter(self) -> None:
        while True:
            item = self.wanted.get()
            if item is None:
                return
            key, env, spec = item
            with self.lock:
                if self.closed or len(self.ready[key]) >= self.count:
                    continue
            argv = ["--parent", str(os.getpid()), "--standby", json.dumps(spec), "--serves", str(self.serves)]
            proc = start_judge(argv, env, keep_stdin=True)
            with self.lock:
                self.started += 1
                late = self.closed
                if not late:
                    self.ready[key].append(proc)
                    self.left[proc.pid] = self.serves
            if late:  # closed while it started
                _end([proc])

    def close(self) -> None:
        """End every standby judge (none has a request) and the starter thread."""
        with self.lock:
            self.closed = True
            procs = [p for ready in self.ready.values() for p in ready]
            self.ready.clear()
            self.left.clear()
            self.last.clear()
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
