"""One physical core for whoever times on a GPU: the judge and both workers run on the same CPUs while they time
(`KZ_PIN_TIMING=1`, opt-in until the GPU gate has run it).

Why: the judge's clock check (judge/timing_checks.py `check_clock`) compares the two sides' host time a block, in two
processes. Where the scheduler puts each is chance: beside another verification's compile, on a busy core's SMT
sibling, or alone. A block of one timed call carries about 1.5-2 ms of host work (the hand-off, each call's copies,
the command and the reply), and on an H100 (2026-12-06, bench/verify.md) honest sum_dim candidates spent 0.1-0.5 ms
more of it a block than their references, per pair of processes and the same in a second timing in the same pair:
2 of 13 runs were corrected to 0.20-0.25x. The blocks run one at a time (ABBA), so both sides can share one core;
then neither side's host path gets a faster or busier core than the other's, and drift on that core reaches both.

What: `pinned(pids)` sets the CPU affinity of every thread of the judge's own process and of every process of the
workers' process groups (each worker is a session leader) to `timing_cpus()` inside the block, and gives each
thread its old affinity back after. Threads started inside the block keep the core. Per GPU a different core: the
k-th physical core from the top of the judge's allowed CPUs for the GPU of index k (`gpu_index`), as each GPU's
timing windows are serial (judge/lease.py) but different GPUs' run at once.

What it does not give: other processes still run on that core, at the smaller share priority.py leaves them, and
a candidate can move its own threads elsewhere (it gains nothing the clock would not see: its hidden GPU work still
shows in every block).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

PIN_ENV = "KZ_PIN_TIMING"


def pin_timing() -> bool:
    """Whether timing windows pin the judge and its workers to one core (`KZ_PIN_TIMING`: 1 on, 0 or unset off)."""
    raw = os.environ.get(PIN_ENV, "").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"{PIN_ENV} must be 0 or 1, got {raw!r}")
    return raw == "1"


def cpu_list(text: str) -> set[int]:
    """The CPUs of a kernel CPU list ("0-3,8,10-11")."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def cores(allowed: set[int], sys_cpu: Path = Path("/sys/devices/system/cpu")) -> list[set[int]]:
    """The physical cores among `allowed`, each as its CPUs (SMT siblings), highest first; a CPU whose topology
    cannot be read is a core of its own."""
    found: list[set[int]] = []
    for cpu in sorted(allowed, reverse=True):
        if any(cpu in core for core in found):
            continue
        try:
            siblings = cpu_list((sys_cpu / f"cpu{cpu}/topology/thread_siblings_list").read_text())
        except (OSError, ValueError):
            siblings = {cpu}
        found.append((siblings & allowed) or {cpu})
    return found


def gpu_index() -> int:
    """The host's index of the GPU this process times on: the first entry of CUDA_VISIBLE_DEVICES where it is a
    number, else 0 (a UUID there, or no variable: one GPU, or the caller's device 0)."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def timing_cpus(index: int | None = None) -> set[int]:
    """The CPUs of the core the GPU of `index` times on (`gpu_index()` by default): the index-th physical core from
    the top of this process's allowed CPUs, counted round where there are fewer cores than GPUs."""
    found = cores(os.sched_getaffinity(0))
    return found[(gpu_index() if index is None else index) % len(found)]


def group_members(group: int) -> list[int]:
    """The processes of process group `group` (from /proc; none where it is gone)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) == group:
                    members.append(int(entry.name))
    return members


def threads_of(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    return []


@contextlib.contextmanager
def pinned(pids: list[int | None], cpus: set[int] | None = None) -> Iterator[int]:
    """The judge's own threads and every thread of the process groups of `pids` on `cpus` (`timing_cpus()`) inside
    the block; yields how many threads took it (0: not asked for, or none could be moved)."""
    if not pin_timing():
        yield 0
        return
    cpus = cpus or timing_cpus()
    groups = set()
    for pid in pids:
        if pid:
            with contextlib.suppress(OSError):
                groups.add(os.getpgid(pid))
    procs = {os.getpid(), *(p for g in groups for p in group_members(g))}
    before: list[tuple[int, set[int]]] = []
    for tid in (t for p in sorted(procs) for t in threads_of(p)):
        try:
            old = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cpus)
        except OSError:  # gone, or not ours to move
            continue
        before.append((tid, old))
    try:
        yield len(before)
    finally:
        for tid, old in before:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, old)
