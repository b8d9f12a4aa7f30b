"""Correctness-gated timing: the candidate's timed calls, the reference's timings, speedups.

Only correct candidates reach this stage. The judge sends several input sets and a call order it
drew from a secret generator; the worker times each call (see `timing.py`) and returns the last
output of every input set, which the judge checks like a correctness trial, so a candidate that
computes only when it believes it is being checked still fails. The reference is timed the same
way in the judge's process (before or after the candidate, never at the same time); its timings
are cached per (task hash, sizes, GPU name, torch version) in `baselines_dir/<gpu>.json`, a file
meant to be kept in the repository (`bench/baselines/`) so per-GPU baselines are shared.
"""

from __future__ import annotations

import json
import os
import random
import secrets
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from kernelzero.tasks.hashing import task_hash
from kernelzero.types import Timing, Verdict
from kernelzero.verify.judge.anticheat import policy_result
from kernelzero.verify.judge.compare import compare
from kernelzero.verify.options import profile_of
from kernelzero.verify.worker.timing import summarise, time_calls

if TYPE_CHECKING:
    from kernelzero.verify.judge.judge import Judge
    from kernelzero.verify.sandbox.worker_process import WorkerProcess


def _cache_path(directory: str, gpu: str) -> Path:
    return Path(directory) / (gpu.replace(" ", "_").replace("/", "_") + ".json")


def _cache_key(judge: Judge, kind: str) -> str:
    return f"{task_hash(judge.task)}|{judge.opts.precision}|{kind}|{judge.opts.profile}|torch {torch.__version__}"


def cached_baseline(judge: Judge, kind: str) -> Timing | None:
    if not judge.opts.baselines_dir:
        return None
    path = _cache_path(judge.opts.baselines_dir, judge.device_name)
    try:
        entry = json.loads(path.read_text()).get(_cache_key(judge, kind))
    except (OSError, ValueError):
        return None
    return Timing(**entry["timing"]) if entry else None


def store_baseline(judge: Judge, kind: str, timing: Timing) -> None:
    if not judge.opts.baselines_dir:
        return
    path = _cache_path(judge.opts.baselines_dir, judge.device_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[_cache_key(judge, kind)] = {"task": judge.task.name, "sizes": judge.task.sizes, "timing": asdict(timing)}
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)


def _time_reference(judge: Judge, fn, sets: list[list], order: list[int], host_check: bool) -> Timing | None:
    def call(i: int) -> None:
        with torch.no_grad():
            fn(*sets[i])

    return summarise(time_calls(call, order, judge.opts.warmup_calls, judge.device, host_check))


def reference_timings(judge: Judge, sets: list[list], order: list[int], host_check: bool) -> tuple:
    eager = cached_baseline(judge, "eager")
    if eager is None:
        eager = _time_reference(judge, judge.ref.model, sets, order, host_check)
        store_baseline(judge, "eager", eager)
    compiled = None
    if judge.opts.compile_baseline:
        compiled = cached_baseline(judge, "compile")
        if compiled is None:
            torch._dynamo.reset()
            compiled = _time_reference(judge, torch.compile(judge.ref.model), sets, order, host_check)
            store_baseline(judge, "compile", compiled)
    return eager, compiled


def _check_timed_outputs(judge: Judge, expected: list, tensors: list, n: int) -> Verdict | None:
    """The verdict of the first wrong output among the checked timed calls (one per input set), else None."""
    for k in range(len(expected)):
        failure = compare(expected[k], judge.on_device(tensors[k * n : (k + 1) * n]), judge.atol, judge.rtol, -1)
        if failure is not None:
            return judge.verdict(
                failure.status,
                "timing",
                f"an output of a timed call was wrong: {failure.message}",
                mismatch=failure.mismatch,
            )
    return None


def timed_comparison(judge: Judge, worker: WorkerProcess) -> Verdict:
    """Time the candidate on rotating input sets, check their outputs, time the reference."""
    import time

    judge.fields["stage_hint"] = "timing"
    start = time.perf_counter()
    sets = [judge.ref.inputs(judge.seed + 1000 + k) for k in range(judge.opts.input_sets)]
    expected = [judge.ref.expected(s) for s in sets]
    rng = random.Random(secrets.randbits(64))
    order = [k % len(sets) for k in range(judge.opts.timed_calls)]
    rng.shuffle(order)
    host_check = profile_of(judge.opts).host_check or judge.opts.confirming
    worker.send(
        {"cmd": "time", "input_sets": sets, "order": order, "warmup": judge.opts.warmup_calls, "host_check": host_check}
    )
    reply, tensors = worker.receive(judge.run_timeout() * 4, "timing")
    judge.timed("timing", start)
    if not reply["ok"]:
        return judge.failed(reply)
    if reply.get("tampered"):
        return judge.verdict("tampered", "timing", f"the harness was tampered with ({reply['tampered']})")
    if reply.get("calls_without_kernel"):
        return judge.verdict(
            "no_kernel",
            "timing",
            f"{reply['calls_without_kernel']} timed call(s) launched none of "
            "the candidate's kernels (a cached or replayed result)",
        )
    wrong = _check_timed_outputs(judge, expected, tensors, reply["n_out"])
    if wrong is not None:
        return wrong
    timing = summarise(reply["times_ms"])
    start = time.perf_counter()
    eager, compiled = reference_timings(judge, sets, order, host_check)
    judge.timed("reference_timing", start)
    stat = f"{profile_of(judge.opts).statistic}_ms"
    ratio = lambda ref: (
        getattr(ref, stat) / getattr(timing, stat) if ref and timing and getattr(timing, stat) > 0 else None
    )  # noqa: E731
    speedup = ratio(eager)
    if speedup is not None and speedup > judge.opts.speedup_cap and not judge.opts.confirming:
        rejected = judge.confirm_speedup(speedup)
        if rejected is not None:
            return rejected
    status, message, per = policy_result(judge, "correct", "")
    return judge.verdict(
        status,
        "done",
        message,
        timing=timing,
        ref_eager=eager,
        ref_compile=compiled,
        speedup_eager=speedup,
        speedup_compile=ratio(compiled),
        policy_status=per,
    )
