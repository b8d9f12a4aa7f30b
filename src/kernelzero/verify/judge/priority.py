"""CPU priority for whoever holds the GPU alone: the judge and its two workers while they time.

Why: the exclusive GPU window (lease.exclusive_gpu) is the one serial resource of a GPU host; every other
verification waits while one times. Inside it the judge draws input sets, moves tensors, compares outputs and
exchanges a round trip per block with both workers, all on the CPU. On a loaded host (the H200 gate, 2026-12-03:
load average near 40 on 16 cores, mostly other samples' imports and compiles) those steps ran at a fraction of a
core, so a timing of 0.05 s a side held the GPU for a median 3 s, and the sum of these windows was a floor under the
gate's wall time. The same contention is host noise in the timed calls themselves (launch paths, synchronise
latency), which the sabotage and clock checks must tell from a cheat.

What: `first(groups)` sets the nice value of every process of each process group (the judge's own, each worker's:
each is a session leader, sandbox/zygote.py and worker_process.py) to HOLD_NICE for the block, and back to what it
was after. Linux applies a process group's nice value to every thread of every member. Needs CAP_SYS_NICE (the
verifier runs as root where it sandboxes); elsewhere it changes nothing and says so (`applied` is False).

What it does not give: a candidate at this priority can only spend the CPU of its own timed window, which its
timeout bounds, and the value is taken back when the window ends (a process it started meanwhile, in its own PID
namespace, dies with the sample).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

HOLD_NICE = -10  # about ten times the CPU share of a process at nice 0 under contention


@contextlib.contextmanager
def first(groups: list[int]) -> Iterator[bool]:
    """Nice HOLD_NICE for the process groups `groups` inside the block; yields whether any took it."""
    changed: list[tuple[int, int]] = []
    for group in dict.fromkeys(g for g in groups if g and g > 0):
        try:
            before = os.getpriority(os.PRIO_PGRP, group)
            os.setpriority(os.PRIO_PGRP, group, HOLD_NICE)
        except (OSError, PermissionError):  # no CAP_SYS_NICE, or the group is gone
            continue
        changed.append((group, before))
    try:
        yield bool(changed)
    finally:
        for group, before in changed:
            with contextlib.suppress(OSError, PermissionError):
                os.setpriority(os.PRIO_PGRP, group, max(before, 0))


def groups_of(*pids: int | None) -> list[int]:
    """The process groups of `pids` (the judge's own first): those still alive."""
    found = []
    for pid in (0, *pids):
        if pid is None:
            continue
        with contextlib.suppress(OSError):
            found.append(os.getpgid(pid))
    return found
