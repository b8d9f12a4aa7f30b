"""The reference timed alone, before any candidate code runs: the yardstick of the baseline-sabotage check.

`take_solo_reference(judge)` builds the reference, draws its inputs (neither needs the GPU alone), then holds the GPU
alone (`lease.exclusive_gpu`) only to time it, with the same blocks as the interleaved timing (timing_stage.py). The
timing is cached per task, precision, profile, torch version and GPU in `baselines_dir` when given (`kernelzero eval
--baselines`, the GPU gate's KZ_GPU_TEST_BASELINES): timing the reference alone holds the whole GPU.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from kernelzero.tasks.hashing import task_hash
from kernelzero.types import Timing
from kernelzero.verify.judge import priority
from kernelzero.verify.judge.lease import exclusive_gpu, holding
from kernelzero.verify.judge.timing_stage import _bytes_of, _draw, _reference_block, plan_calls, prime_inputs
from kernelzero.verify.options import profile_of
from kernelzero.verify.sandbox import safe_fs
from kernelzero.verify.worker.timing import summarise

if TYPE_CHECKING:
    from kernelzero.verify.judge.judge import Judge


def _cache_path(judge: Judge) -> Path:
    return Path(judge.opts.baselines_dir) / (judge.device_name.replace(" ", "_").replace("/", "_") + ".json")


def _cache_key(judge: Judge) -> str:
    return f"{task_hash(judge.task)}|{judge.opts.precision}|solo|{judge.opts.profile}|torch {torch.__version__}|hold"


def cached_solo(judge: Judge) -> Timing | None:
    """The solo reference timing cached for this task and GPU in `baselines_dir`, if any."""
    if not judge.opts.baselines_dir:
        return None
    try:
        entry = json.loads(_cache_path(judge).read_text()).get(_cache_key(judge))
    except (OSError, ValueError):
        return None
    return Timing(**entry["timing"]) if entry else None


def solo_reference(judge: Judge, host_check: bool) -> Timing | None:
    """The reference timed alone (the caller holds the GPU alone, before any candidate code has run); cached per
    GPU in `baselines_dir`."""
    probe = _draw(judge, 1)[0]
    calls, per_block = plan_calls(judge, _bytes_of(probe), _bytes_of(judge.ref.expected(probe, judge.run_timeout())))
    times: list[float] = []
    while len(times) < judge.opts.timed_calls:
        warmup = judge.opts.warmup_calls if not times else 1
        sets = _draw(judge, warmup + min(per_block, judge.opts.timed_calls - len(times)))
        times += _reference_block(judge, sets, warmup, host_check)[0]
    timing = summarise(times)
    if judge.opts.baselines_dir and timing is not None:
        path = _cache_path(judge)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        data[_cache_key(judge)] = {"task": judge.task.name, "sizes": judge.task.sizes, "timing": asdict(timing)}
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(path)
    return timing


@contextlib.contextmanager
def cache_lock(judge: Judge) -> Iterator[None]:
    """Held while a judge looks for, times and writes a cached solo timing, so that judges starting together on one
    task time its reference once (in the H200 gate of 2026-12-02, 29 solo timings, each holding the whole GPU, for
    about a dozen tasks) and no write loses another's entry. A no-op without `baselines_dir`, or while this process
    holds a GPU lease (the stricter second verification): whoever holds the cache lock may be waiting for that GPU."""
    if not judge.opts.baselines_dir or holding():
        yield
        return
    path = _cache_path(judge).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = safe_fs.open_lock(path, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # and the lock with it


def take_solo_reference(judge: Judge) -> None:
    """Time the reference alone before any candidate code runs (or take the cached timing): the yardstick
    of the baseline-sabotage check (timing_stage.py)."""
    judge.solo_ref = cached_solo(judge)
    if judge.solo_ref is not None:
        return
    start = time.perf_counter()
    torch.zeros(1, device="cuda")
    judge.ref.build(judge.ref_path, judge.init_seed)  # no need to hold the GPU alone for that
    prime_inputs(judge)  # nor to draw the inputs
    with cache_lock(judge):
        judge.solo_ref = cached_solo(judge)  # timed by another judge while this one waited
        if judge.solo_ref is None:
            with exclusive_gpu() as waited, priority.first(priority.groups_of(judge.ref.worker.proc.pid)):
                held = time.perf_counter()  # solo_excl: the GPU held alone (scripts/gate_stages.py sums it)
                judge.solo_ref = solo_reference(judge, profile_of(judge.opts).host_check or judge.opts.confirming)
                judge.stage_s.update(solo_excl_wait=round(waited, 4), solo_excl=round(time.perf_counter() - held, 4))
    judge.timed("solo_reference", start)
