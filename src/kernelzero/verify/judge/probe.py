"""GPU health probe: after a sample broke its CUDA context, check the GPU in a fresh process.

`probe_gpu(index)` starts `python -m kernelzero.verify.judge.probe_child` pinned to one GPU (forked by the caller's
fork server where there is one: a probe holds the GPU alone, and a fresh interpreter spent about 10 s of that
importing torch on the loaded H200, 2026-12-03); the child takes that
GPU's lease (verify/judge/lease.py), allocates memory, runs a matrix product and an elementwise kernel,
synchronises and compares with the CPU. The pool uses the GPU again only when the probe passes; it
never resets a GPU (a failing GPU is taken out of the pool and the verdicts say so). With
`device="cpu"` the same checks run on the CPU (how CI tests the mechanism); `"cuda-held"` skips taking
the lease (the caller holds it: see `lease.gpu_lease`, which runs the probe after a crash).

`start_probe(index)` starts the probe ahead: the process and its CUDA context are made while the caller still waits
for the lease (probe_child's `-ready` devices), and `StartedProbe.run()` only has it check, once the caller holds the
GPU alone. On the H200 gate at 15b821c (2026-12-04) a probe made after the lease was taken held the GPU alone for up
to 51 s, most of it a forked probe creating its CUDA context on a loaded host; the checks themselves take well under
a second.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from kernelzero.verify.sandbox import zygote_client
from kernelzero.verify.sandbox.process import physical_gpu, source_root


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    seconds: float
    message: str  # what failed ('' when ok)
    busy: bool = False  # inconclusive: no GPU memory for the probe (probe_child.BUSY); `ok` is False
    forked: bool = False  # started by the fork server (sandbox/zygote.py), not as a fresh interpreter


def probe_gpu(index: int | None, timeout_s: float = 120.0, device: str = "cuda") -> ProbeResult:
    """Probe visible GPU `index` (None: whatever this process sees) in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(source_root())}
    if index is not None:
        env["CUDA_VISIBLE_DEVICES"] = physical_gpu(index)
    start = time.monotonic()
    forked = zygote_client.start_trusted("probe", [device], env)  # no interpreter start, no torch import (zygote.py)
    try:
        if forked is not None:
            code, out = _finish(forked, timeout_s)
        else:
            done = subprocess.run(
                [sys.executable, "-m", "kernelzero.verify.judge.probe_child", device],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=timeout_s,
            )
            code, out = done.returncode, done.stdout
    except subprocess.TimeoutExpired:
        return ProbeResult(False, time.monotonic() - start, f"the probe did not finish in {timeout_s:g} s")
    return _result(code, out, time.monotonic() - start, forked is not None)


def _result(code: int, out: str, seconds: float, forked: bool) -> ProbeResult:
    if code == 0 and "probe ok" in out:
        return ProbeResult(True, seconds, "", forked=forked)
    if code == 3 and "probe busy" in out:  # probe_child.BUSY (not imported: it imports the lease)
        return ProbeResult(False, seconds, out.strip()[-300:], busy=True, forked=forked)
    return ProbeResult(False, seconds, f"probe exited with {code}: {out.strip()[-500:]}", forked=forked)


class StartedProbe:
    """A probe process started ahead, ready to check (`start_probe`); `run()` once, or `dismiss()`."""

    def __init__(self, proc, forked: bool, ready_s: float):
        self.proc, self.forked, self.ready_s = proc, forked, ready_s  # ready_s: its start and CUDA context, seconds

    def run(self, timeout_s: float = 120.0) -> ProbeResult:
        """Check now (the caller holds the GPU alone): the probe's result; seconds count from the word to check."""
        start = time.monotonic()
        try:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.flush()
            out, _ = _read(self.proc, start + timeout_s, until=None)
            code = self.proc.wait(max(1.0, start + timeout_s - time.monotonic()))
        except (OSError, subprocess.TimeoutExpired):
            self.dismiss()
            return ProbeResult(False, time.monotonic() - start, f"the probe did not finish in {timeout_s:g} s")
        return _result(code, out, time.monotonic() - start, self.forked)

    def dismiss(self) -> None:
        """End it unchecked (or after its check): stdin closed, its group killed if it has not ended."""
        with contextlib.suppress(OSError, AttributeError):
            self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        with contextlib.suppress(OSError, AttributeError):
            self.proc.stdout.close()


def start_probe(index: int | None, device: str = "cuda", timeout_s: float = 120.0) -> StartedProbe | None:
    """A probe of visible GPU `index` (`device` "cpu": on the CPU, for CI) started ahead: its process and CUDA context
    made now, its checks held until `run()`. None when it did not get ready (out of memory for a context, say, or a
    GPU it cannot use): the caller then probes as before, in a fresh process once it holds the lease."""
    env = {**os.environ, "PYTHONPATH": str(source_root())}
    if index is not None:
        env["CUDA_VISIBLE_DEVICES"] = physical_gpu(index)
    start, mode = time.monotonic(), ("cuda-held-ready" if device.startswith("cuda") else "cpu-ready")
    proc = zygote_client.start_trusted("probe", [mode], env, keep_stdin=True)
    forked = proc is not None
    if proc is None:
        command = [sys.executable, "-m", "kernelzero.verify.judge.probe_child", mode]
        proc = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    started = StartedProbe(proc, forked, 0.0)
    try:
        out, ready = _read(proc, start + timeout_s, until=b"probe ready")
    except (OSError, subprocess.TimeoutExpired):
        ready = False
    if not ready:
        started.dismiss()
        return None
    started.ready_s = time.monotonic() - start
    return started


def _read(proc, deadline: float, until: bytes | None) -> tuple[str, bool]:
    """The process's output until `until` appears (then True) or its end (False); TimeoutExpired at `deadline`."""
    out, fd = b"", proc.stdout.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(math.ceil(left * 1000)):
            raise subprocess.TimeoutExpired(getattr(proc, "args", "probe"), left)
        data = os.read(fd, 1 << 16)
        if not data:
            return out.decode(errors="replace"), False
        out += data
        if until is not None and until in out:
            return out.decode(errors="replace"), True


def _finish(proc: zygote_client.ZygoteProcess, timeout_s: float) -> tuple[int, str]:
    """A forked probe's exit status and output, or TimeoutExpired (its group killed) after `timeout_s`."""
    deadline, out = time.monotonic() + timeout_s, b""
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
                raise subprocess.TimeoutExpired(proc.args, timeout_s)
            data = os.read(proc.stdout.fileno(), 1 << 16)
            if not data:
                break
            out += data
        return proc.wait(max(1.0, deadline - time.monotonic())), out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        proc.kill_group()
        raise
    finally:
        proc.stdout.close()
