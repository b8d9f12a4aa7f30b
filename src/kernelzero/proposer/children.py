"""Run admission children side by side in the verifier's sandbox, from the main thread.

    from kernelzero.proposer.children import run_children
    for key, result in run_children(jobs, parallel=2, timeout_s=120, mem_bytes=16 << 30):
        ...   # result: the child's JSON, or {"ok": False, "reason": "timeout" | "oom" | "crash", ...}

Each job gets a fresh folder under one temporary folder (removed at the end), laid out by
`verify.sandbox.prepare_workdir`, and one process started with `verify.sandbox.popen_sandboxed`: a new
session, no core dumps, killed with its parent, and, where this machine allows it (the verifier runs as
root), its own empty network namespace and the unprivileged user `nobody`. This loop is the child's
watchdog: past the deadline or the resident-memory cap (VmRSS read from /proc, as the verifier's worker
watchdog does) the child's whole process group is killed. `popen_sandboxed` applies its limits in a Python
preexec function, so it is only called from this (the main) thread: the loop polls instead of waiting in
threads.

Not protected: the result file is written by the process that ran the proposal, so a proposal that writes
it itself could forge its own admission. The Frontier Reward's success rate comes from the verifier's
judge, not from here; admission only filters.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelzero.verify.sandbox import SandboxPlan, plan_sandbox, popen_sandboxed, prepare_workdir

POLL_S = 0.02
STDERR_TAIL = 600


@dataclass
class _Running:
    key: Any
    proc: subprocess.Popen
    workdir: Path
    deadline: float
    started: float


def sandbox_plan() -> SandboxPlan:
    """The sandbox plan admission uses (decided once per process; call before starting threads)."""
    return plan_sandbox(user="nobody", isolate_network=True)


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _start(key: Any, job: dict[str, Any], root: Path, index: int, plan: SandboxPlan, timeout_s: float) -> _Running:
    workdir = root / f"job-{index}"
    env = prepare_workdir(workdir, plan)
    job_path, result_path = workdir / "job.json", workdir / "result.json"
    job_path.write_text(json.dumps(job))
    if plan.uid is not None:
        os.chown(job_path, plan.uid, plan.gid)
    stderr = open(workdir / "stderr.txt", "wb")
    argv = [sys.executable, "-m", "kernelzero.proposer.admit_child", str(job_path), str(result_path)]
    try:
        proc = popen_sandboxed(argv, workdir, plan, env, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr)
    finally:
        stderr.close()
    now = time.monotonic()
    return _Running(key, proc, workdir, now + timeout_s, now)


def _finish(run: _Running, status: int) -> dict[str, Any]:
    try:
        result = json.loads((run.workdir / "result.json").read_text())
        if isinstance(result, dict) and "ok" in result:
            return result
    except (OSError, ValueError):
        pass
    tail = (run.workdir / "stderr.txt").read_bytes()[-STDERR_TAIL:].decode(errors="replace").strip()
    how = f"killed by {signal.Signals(-status).name}" if status < 0 else f"ended (exit code {status})"
    return {
        "ok": False,
        "reason": "crash",
        "stage": "runnable",
        "message": f"the child was {how} without a result" + (f": {tail}" if tail else ""),
    }


def _check(run: _Running, mem_bytes: int, timeout_s: float) -> dict[str, Any] | None:
    """The result of a finished or killed child, or None while it runs."""
    status = run.proc.poll()
    if status is not None:
        _kill(run.proc)  # whatever the child left behind in its process group goes with it
        return _finish(run, status)
    rss = _rss(run.proc.pid)
    if rss > mem_bytes:
        _kill(run.proc)
        return {
            "ok": False,
            "reason": "oom",
            "stage": "runnable",
            "message": f"host memory {rss / 2**30:.1f} GiB over the cap of {mem_bytes / 2**30:.1f} GiB",
        }
    if time.monotonic() > run.deadline:
        _kill(run.proc)
        return {"ok": False, "reason": "timeout", "stage": "runnable", "message": f"no result within {timeout_s:g} s"}
    return None


def run_children(
    jobs: Iterable[tuple[Any, dict[str, Any]]],
    parallel: int,
    timeout_s: float,
    mem_bytes: int,
    plan: SandboxPlan | None = None,
) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Run every (key, job) in its own sandboxed child, `parallel` at a time; yield (key, result) as they end.

    Each result gets "seconds" (the child's wall time). Children still running when the caller stops
    iterating are killed.
    """
    plan = plan or sandbox_plan()
    pending = iter(jobs)
    running: list[_Running] = []
    root = Path(tempfile.mkdtemp(prefix="kz-admit-"))
    root.chmod(0o711)  # the sandbox user must reach its own folder inside
    index = 0
    try:
        exhausted = False
        while running or not exhausted:
            while not exhausted and len(running) < max(1, parallel):
                item = next(pending, None)
                if item is None:
                    exhausted = True
                    break
                running.append(_start(item[0], item[1], root, index, plan, timeout_s))
                index += 1
            for run in list(running):
                result = _check(run, mem_bytes, timeout_s)
                if result is None:
                    continue
                running.remove(run)
                result["seconds"] = round(time.monotonic() - run.started, 3)
                shutil.rmtree(run.workdir, ignore_errors=True)
                yield run.key, result
            time.sleep(POLL_S)
    finally:
        for run in running:
            _kill(run.proc)
        shutil.rmtree(root, ignore_errors=True)
