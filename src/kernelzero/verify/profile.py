"""Which of a candidate's kernels take the time: a profiled run in the candidate's sandbox (feedback, not a verdict).

    from kernelzero.verify.profile import profile_candidate, profiler
    rows = profile_candidate(task, source, "triton")   # [KernelTime(name, ms per forward, launches)], or None
    env = KernelEnv(..., profiler=profiler())           # the multi-turn environment's observation uses it

The candidate runs in a fresh sandboxed process (`profile_child.py`: the sandbox of the verifier's worker, its
own folder, a deadline) that builds ModelNew, warms it, and runs a few forward calls under torch.profiler. On a
GPU this parent holds a GPU memory lease (judge/memory.py, of the default size) and the GPU lease as the judge does: shared while the child loads and warms (beside other
samples' checks), alone while it profiles, so no other sample is timed while it runs and it is not timed beside
another. The rows are the device kernels by total device time per forward call; on a CPU (tests), the operators
by self CPU time. The candidate's own process writes the result, so it is only ever shown to the Coder as
feedback (KernelEnv's observation); verdicts and rewards never read it. Not for use from threads other than the
main one (the sandbox's limits are applied in a preexec function). A candidate that fails, hangs past the
deadline or prints garbage gets None.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from kernelzero.types import KernelTime, Task
from kernelzero.verify.backends import get_backend
from kernelzero.verify.judge.task_source import TaskBroken, sized_source
from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.sandbox.process import (
    plan_for,
    popen_sandboxed,
    prepare_workdir,
    released,
    role_plan,
    scratch_folder,
)

PREFIX = "kz-profile"


def profile_candidate(
    task: Task,
    source: str,
    backend: str,
    opts: VerifyOptions | None = None,
    calls: int = 3,
    timeout_s: float = 180.0,
) -> list[KernelTime] | None:
    """Profile `source` (code, as extracted from a completion) on `task`; None when it cannot be profiled."""
    opts = opts or VerifyOptions()
    try:
        task_code = sized_source(task)
    except TaskBroken:
        return None
    gpu = _gpu_visible()
    plan = role_plan(plan_for(opts))
    with scratch_folder("kz-profile-") as folder, released(plan):
        env = prepare_workdir(folder, plan, {"task.py": task_code, "candidate.py": source})  # before it is handed over
        if not gpu and get_backend(backend).without_gpu == "interpret":
            env["TRITON_INTERPRET"] = "1"
        argv = [sys.executable, "-m", "kernelzero.verify.profile_child", str(calls)]
        proc = popen_sandboxed(
            argv, folder, plan, env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        try:
            return _converse(proc, gpu, time.monotonic() + timeout_s)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def profiler(opts: VerifyOptions | None = None, calls: int = 3) -> Callable:
    """A `Profiler` for kernelzero.env.KernelEnv: [(task, code, backend)] -> [rows or None], one run each."""

    def run(items: Sequence[tuple[Task, str, str]]) -> list[list[KernelTime] | None]:
        return [profile_candidate(task, code, backend, opts, calls) for task, code, backend in items]

    return run


def _converse(proc: subprocess.Popen, gpu: bool, deadline: float) -> list[KernelTime] | None:
    """The line protocol of profile_child.py, under the GPU lease on a GPU."""
    if _expect(proc, "imported", deadline) is None:
        return None
    with _memory(gpu), _lease(gpu, shared=True):
        _send(proc)
        if _expect(proc, "ready", deadline) is None:
            return None
        with _lease(gpu, shared=False):
            _send(proc)
            answer = _expect(proc, "{", deadline)
    return _rows(answer)


def _memory(gpu: bool) -> contextlib.AbstractContextManager:
    """A GPU memory lease of the default size (judge/memory.py: the task's footprint is not measured here)."""
    if not gpu:
        return contextlib.nullcontext()
    from kernelzero.verify.judge.memory import DEFAULT_NEED, current_gpu_lease

    return current_gpu_lease(DEFAULT_NEED, None)


def _lease(gpu: bool, shared: bool) -> contextlib.AbstractContextManager:
    """The judge's GPU lease (verify/judge/lease.py): shared beside other checks, or the GPU alone; none on CPU."""
    if not gpu:
        return contextlib.nullcontext()
    from kernelzero.verify.judge.lease import exclusive_gpu, gpu_lease

    return gpu_lease(shared=True) if shared else exclusive_gpu()


def _send(proc: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):
        proc.stdin.write(b"go\n")
        proc.stdin.flush()


def _expect(proc: subprocess.Popen, start: str, deadline: float) -> str | None:
    """The text of the child's next `kz-profile` line if it starts with `start`; None on an error line, the
    child's exit, or the deadline. Other output (the candidate's prints) is skipped."""
    buffer = b""
    fd = proc.stdout.fileno()
    ready = select.poll()  # not select(): it fails on descriptors above 1023
    ready.register(fd, select.POLLIN)
    while True:
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            text = line.decode(errors="replace")
            if text.startswith(f"{PREFIX}-error"):
                return None
            if text.startswith(f"{PREFIX} "):
                body = text[len(PREFIX) + 1 :]
                return body if body.startswith(start) else None
        left = deadline - time.monotonic()
        if left <= 0 or len(buffer) > 1 << 20:
            return None
        if ready.poll(math.ceil(min(left, 1.0) * 1000)):
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            buffer += chunk


def _rows(answer: str | None) -> list[KernelTime] | None:
    if answer is None:
        return None
    try:
        rows = json.loads(answer)["kernels"]
        return [KernelTime(str(name)[:200], float(us) / 1000.0, int(calls)) for name, us, calls in rows][:50]
    except (ValueError, KeyError, TypeError):
        return None


def _gpu_visible() -> bool:
    import torch

    return torch.cuda.is_available()
