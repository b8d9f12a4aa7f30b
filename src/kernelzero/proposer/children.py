"""Run proposed modules in the verifier's reference processes, several proposals side by side.

    from kernelzero.proposer.children import run_proposals
    for key, result in run_proposals(jobs, parallel=2, timeout_s=120):   # jobs: (key, job) pairs (admit._job)
        ...   # result: {"ok", "reason", "stage", "message", "forward_ms", "seconds", ...}

A proposal's code runs only in `kernelzero.verify.judge.reference.Reference`'s process: the verifier's sandbox (a
uid of its own, its own PID, mount and empty network namespaces, no core dumps, killed with its parent:
verify/sandbox/box.py), which imports the module, constructs `Model` under the seed, draws inputs and runs the forward, and
sends back JSON and raw tensor bytes that are never unpickled. The checks themselves (checks.py) run here, in
the trusted parent, on those values: nothing the module writes or patches in its own process (a forged result
file, replaced functions) reaches a decision.

Per proposal: one float32 reference process for the runnable stage and the numerical checks; a second one
with a float64 copy of the model (`ref_fp64`) only when those pass, for the precision check on the same inputs.
A process past the deadline (`timeout_s` per proposal, start-up included) or its resident-memory cap
(`mem_gb`) is killed (`timeout`, `oom`); one that dies is a `crash`.

Threads and processes: `Reference.start` applies the sandbox in a Python preexec function, which is only safe
from the main thread, so this generator starts every process itself; the blocking conversation with them and
the checks run in a thread pool of `parallel` threads.

The eager forward time is the parent's clock around one `expected` call (median of 5 after 2 warm-up calls) less
the round trip of an empty command measured before the module was imported: it includes sending the inputs and
receiving the outputs, so it overstates small kernels on large tensors; the window applies it on a GPU only
unless asked. The Frontier Reward's success rate comes from the verifier's judge, not from here.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelzero.proposer.checks import (
    DRAWS,
    MESSAGE_LIMIT,
    Rejected,
    failure_reason,
    numerical_checks,
    precision_check,
    runnable_checks,
)
from kernelzero.tasks.quality import describe
from kernelzero.types import Task
from kernelzero.verify import options_for
from kernelzero.verify.judge.reference import Reference
from kernelzero.verify.judge.task_source import TaskBroken
from kernelzero.verify.sandbox.process import SandboxPlan, plan_for

TIMED_CALLS = 5
WARMUP_CALLS = 2


def sandbox_plan() -> SandboxPlan:
    """The sandbox plan the reference processes use (checked once per process; call before starting threads):
    `SandboxUnavailable` where it cannot be set up, before any proposal runs."""
    return plan_for(options_for())


@dataclass
class _Proposal:
    key: Any
    job: dict[str, Any]
    folder: Path
    deadline: float
    started: float
    refs: list[Reference] = field(default_factory=list)  # every process started for it, closed at the end
    draws: list = field(default_factory=list)
    outs: list = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=lambda: {"ok": True, "reason": "", "stage": "done", "message": ""})

    def left(self) -> float:
        return max(1.0, self.deadline - time.monotonic())


def _start(p: _Proposal, fp64: bool) -> Reference:
    """Start a reference process for `p` (main thread only); its build deadline is what is left of p's."""
    job = p.job
    opts = options_for(
        job.get("profile", "default"),
        device=job["device"],
        ref_fp64=fp64,
        host_mem_gb=job["mem_gb"],
        build_timeout_s=p.left(),
    )
    task = Task(name=str(p.key), source=job["source"], sizes=dict(job["sizes"]))
    folder = p.folder / ("fp64" if fp64 else "fp32")
    ref, started = Reference.start(task, opts, "cuda" if job["device"].startswith("cuda") else "cpu", folder)
    ref.cand_path = started.cand_path
    p.refs.append(ref)
    return ref


def _build(ref: Reference, p: _Proposal) -> None:
    ref.opts = replace(ref.opts, build_timeout_s=p.left())
    ref.build(ref.cand_path, p.job["seed"])


def _round_trip_ms(ref: Reference, p: _Proposal) -> float:
    """An empty command's round trip, measured before the module is imported (nothing of it runs yet)."""
    times = []
    for _ in range(TIMED_CALLS):
        start = time.perf_counter()
        ref.input_sets([], p.left())
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def _forward_ms(ref: Reference, inputs: list, p: _Proposal, baseline_ms: float) -> float:
    for _ in range(WARMUP_CALLS):
        ref.expected(inputs, p.left())
    times = []
    for _ in range(TIMED_CALLS):
        start = time.perf_counter()
        ref.expected(inputs, p.left())
        times.append((time.perf_counter() - start) * 1e3)
    return max(0.0, sorted(times)[len(times) // 2] - baseline_ms)


def _first_phase(p: _Proposal, ref: Reference) -> bool:
    """The runnable stage and the numerical checks but precision; True when the float64 run comes next."""
    seed = p.job["seed"]
    baseline = _round_trip_ms(ref, p)
    _build(ref, p)
    p.draws = ref.input_sets([seed + 1 + k for k in range(DRAWS)], p.left())
    p.result["input_shapes"] = [describe(x) for x in p.draws[0]]
    p.outs = [ref.expected(inputs, p.left()) for inputs in p.draws]
    p.result["output_shapes"] = [describe(o) for o in p.outs[0]]
    again = ref.expected(p.draws[0], p.left())
    forward_ms = _forward_ms(ref, p.draws[0], p, baseline)
    p.result["forward_ms"] = round(forward_ms, 4)
    runnable_checks(p.job, p.draws, p.outs, again, forward_ms)
    numerical_checks(p.job, p.draws, p.outs)
    return True


def _second_phase(p: _Proposal, ref64: Reference) -> bool:
    """The precision check: the float64 copy of the model on the same inputs."""
    _build(ref64, p)
    outs64 = [ref64.expected(inputs, p.left()) for inputs in p.draws]
    precision_check(p.job, p.outs, outs64)
    return False


def _guarded(p: _Proposal, phase, ref: Reference) -> bool:
    """Run a phase in a pool thread; a failure becomes p's result. True when another phase follows."""
    try:
        return phase(p, ref)
    except Rejected as exc:
        p.result.update(ok=False, reason=exc.reason, stage=exc.stage, message=str(exc))
    except TaskBroken as exc:
        message = str(exc)
        p.result.update(ok=False, reason=failure_reason(message), stage="runnable", message=message[:MESSAGE_LIMIT])
    finally:
        ref.close()
    return False


def _begin(key: Any, job: dict[str, Any], root: Path, index: int, timeout_s: float) -> _Proposal:
    now = time.monotonic()
    p = _Proposal(key, job, root / f"job-{index}", now + timeout_s, now)
    p.folder.mkdir()
    p.folder.chmod(0o711)
    return p


def _submit(pool: ThreadPoolExecutor, running: dict[Future, _Proposal], p: _Proposal, fp64: bool) -> None:
    try:
        ref = _start(p, fp64)
    except TaskBroken as exc:  # the sized source cannot be written (it loads a model, say)
        p.result.update(ok=False, reason="run_failed", stage="runnable", message=str(exc)[:MESSAGE_LIMIT])
        future: Future = Future()
        future.set_result(False)
        running[future] = p
        return
    running[pool.submit(_guarded, p, _second_phase if fp64 else _first_phase, ref)] = p


def run_proposals(
    jobs: Iterable[tuple[Any, dict[str, Any]]], parallel: int, timeout_s: float
) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Check every (key, job) in reference processes, `parallel` proposals at a time; yield (key, result) as each
    is decided. A job: {"source", "sizes", "device", "seed", "tol", "window_us", "ranking", "mem_gb", "profile"}.

    Each result gets "seconds" (the proposal's wall time). Processes still running when the caller stops
    iterating are killed.
    """
    sandbox_plan()  # SandboxUnavailable before any proposal runs, where the sandbox cannot be set up
    pending = iter(jobs)
    running: dict[Future, _Proposal] = {}
    root = Path(tempfile.mkdtemp(prefix="kz-admit-"))
    root.chmod(0o711)  # the sandbox user must reach its own folder inside
    pool = ThreadPoolExecutor(max(1, parallel), thread_name_prefix="kz-admit")
    index, exhausted = 0, False
    try:
        while running or not exhausted:
            while not exhausted and len(running) < max(1, parallel):
                item = next(pending, None)
                if item is None:
                    exhausted = True
                    break
                _submit(pool, running, _begin(item[0], item[1], root, index, timeout_s), fp64=False)
                index += 1
            if not running:
                continue
            done, _ = wait(list(running), timeout=1.0, return_when=FIRST_COMPLETED)
            for future in done:
                p = running.pop(future)
                if future.result():
                    _submit(pool, running, p, fp64=True)
                    continue
                p.result["seconds"] = round(time.monotonic() - p.started, 3)
                shutil.rmtree(p.folder, ignore_errors=True)
                yield p.key, p.result
    finally:
        for p in running.values():
            for ref in p.refs:
                ref.worker.kill()
        pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(root, ignore_errors=True)
