"""GPU memory as a leased resource across processes: `memory_lease(need)` before a verification allocates.

Why: a verification holds three processes on its GPU (judge, the task's reference, the candidate's worker), and at
bench sizes each can hold tens of GB. Processes that share no allocator (pool lanes, two pools, the HTTP service,
pytest workers, a profiled run) otherwise divide the GPU by luck: the loser gets CUDA out-of-memory, which used to
become the candidate's or the task's verdict. The timing lease (lease.py) says who may *time*; this one says how
much memory each verification may *hold*.

Record: one lease is a file `<LOCK_DIR>/<GPU uuid>.mem/<pid>-<token>` holding the leased bytes, flock-ed exclusively
by its holder for as long as the lease lasts. The holder's death releases the flock, so a lease whose file can be
locked by someone else is dead and is swept. The ledger is the folder; `<uuid>.memlock` serialises reading and
writing it, and `<uuid>.memturn` is a turnstile a waiter holds while it waits, so that a large request is not starved
by a stream of small ones. Leases are per GPU uuid and work between unrelated processes (same lock folder).

The budget (what all leases together may hold) is `budget_bytes` (the `gpu_mem_gb` option; by default 92% of the
GPU's memory). A lease larger than the budget is cut to the budget: it then waits until it is alone on the GPU.
`alone=True` asks for exactly that (the retry after an out-of-memory error another tenant may have caused:
judge/faults.py). Leases are re-entrant within a process: an inner lease (the stricter second verification of an
implausible speedup runs inside the first) is counted in the outer one. What is not protected: memory taken by
programs that do not take these leases (a user's notebook, a training job): they count only through the budget.

The need of one verification (`verification_need`) is estimated from the task's footprint, measured in the
reference's sandbox on the meta device (parameters, one input set, outputs; no GPU memory is touched), times the
copies a verification holds, plus the processes' CUDA contexts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

from kernelzero.verify.judge.lease import LOCK_DIR

GIB = 1 << 30
CONTEXT_BYTES = 640 << 20  # one process's CUDA context and allocator slack (three processes per verification)
COPIES = 6  # of (inputs + outputs) a verification holds at its peak: reference, candidate, judge, temporaries
DEFAULT_NEED = 16 * GIB  # when the footprint cannot be measured (a task whose forward has no meta kernels)
BUDGET_SHARE = 0.92  # of the GPU's memory, when the budget is not set
POLL_S = 0.05
_held: dict[str, dict] = {}  # uuid -> {"fd", "path", "bytes", "depth"} of this process's lease


def verification_need(footprint: dict | None, params_copies: int = 2) -> int:
    """Bytes one verification may hold, from the task's footprint (`{"params", "inputs", "outputs"}` in bytes, as the
    reference's `measure` command returns it), or DEFAULT_NEED when there is none."""
    if not footprint:
        return DEFAULT_NEED
    data = int(footprint.get("inputs", 0)) + int(footprint.get("outputs", 0))
    return 3 * CONTEXT_BYTES + params_copies * int(footprint.get("params", 0)) + COPIES * data


def _folder(uuid: str) -> Path:
    folder = LOCK_DIR / f"{uuid}.mem"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _open_lock(name: str) -> int:
    """A lock file in LOCK_DIR (made on first use, as lease.py makes it: sticky and open to every user)."""
    if not LOCK_DIR.is_dir():
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            LOCK_DIR.chmod(0o1777)
    return os.open(LOCK_DIR / name, os.O_RDWR | os.O_CREAT, 0o600 if os.geteuid() == 0 else 0o644)


def leased_bytes(uuid: str) -> tuple[int, int]:
    """(bytes held by live leases on this GPU, how many); dead leases are swept. Call under the ledger lock."""
    total = count = 0
    for entry in _folder(uuid).iterdir():
        try:
            fd = os.open(entry, os.O_RDWR)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # its holder lives
                try:
                    total += int(os.pread(fd, 32, 0).decode() or 0)
                except ValueError:
                    pass
                count += 1
                continue
            entry.unlink(missing_ok=True)  # nobody holds it: its holder died
        finally:
            os.close(fd)
    return total, count


def _try_take(uuid: str, need: int, budget: int) -> dict | None:
    """Take `need` bytes if they fit in `budget` beside the live leases; the lease record, or None."""
    lock = _open_lock(f"{uuid}.memlock")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        held, count = leased_bytes(uuid)
        if count and held + need > budget:
            return None
        path = _folder(uuid) / f"{os.getpid()}-{secrets.token_hex(6)}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600 if os.geteuid() == 0 else 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, str(need).encode(), 0)
        return {"fd": fd, "path": path, "bytes": need, "depth": 1}
    finally:
        os.close(lock)


@contextlib.contextmanager
def memory_lease(need: int, uuid: str, budget: int, alone: bool = False) -> Iterator[float]:
    """Hold `need` bytes of the GPU `uuid`'s memory budget (`alone`: all of it); yields the seconds waited."""
    need = budget if alone else max(0, min(int(need), budget))
    held = _held.get(uuid)
    if held is not None:  # re-entrant: counted in the outer lease
        held["depth"] += 1
        try:
            yield 0.0
        finally:
            held["depth"] -= 1
        return
    start = time.perf_counter()
    turn = _open_lock(f"{uuid}.memturn")
    try:
        fcntl.flock(turn, fcntl.LOCK_EX)  # one waiter at a time: first come, first served
        while (held := _try_take(uuid, need, budget)) is None:
            time.sleep(POLL_S)
    finally:
        os.close(turn)
    _held[uuid] = held
    try:
        yield time.perf_counter() - start
    finally:
        _held.pop(uuid, None)
        held["path"].unlink(missing_ok=True)
        os.close(held["fd"])


def budget_bytes(total_bytes: int, gpu_mem_gb: float | None) -> int:
    """The budget all leases on one GPU share: `gpu_mem_gb` when set, else BUDGET_SHARE of the GPU's memory."""
    if gpu_mem_gb:
        return int(gpu_mem_gb * GIB)
    return int(total_bytes * BUDGET_SHARE)


@contextlib.contextmanager
def judge_memory_lease(judge) -> Iterator[None]:
    """The memory lease of one verification on a GPU (nothing on a CPU): the task's footprint is measured in the
    reference's sandbox first, then the lease is taken before the reference or the candidate allocates."""
    if judge.device != "cuda":
        yield
        return
    footprint = judge.ref.footprint(judge.ref_path)
    if footprint is None:
        judge.notes.append(f"the task's footprint could not be measured: GPU memory leased {DEFAULT_NEED / GIB:.0f} GB")
    need = verification_need(footprint)
    with current_gpu_lease(need, judge.opts.gpu_mem_gb, judge.opts.gpu_alone) as (waited, leased):
        import torch

        free, total = torch.cuda.mem_get_info()
        judge.stage_s.update(gpu_mem_wait=round(waited, 4), gpu_mem_gib=round(leased / GIB, 3))
        judge.stage_s.update(gpu_need_gib=round(need / GIB, 3), gpu_total_gib=round(total / GIB, 3))
        if judge.opts.gpu_alone:  # no other verification holds this GPU now: what is taken is other programs'
            judge.stage_s["gpu_foreign_gib"] = round(max(0, total - free - 3 * CONTEXT_BYTES) / GIB, 3)
        yield


def foreign_starved(stage_s: dict) -> bool:
    """Alone on the GPU, other programs (no lease of ours) hold so much that this verification's need did not fit."""
    foreign = stage_s.get("gpu_foreign_gib")
    return foreign is not None and foreign + stage_s.get("gpu_need_gib", 0.0) > stage_s.get("gpu_total_gib", 0.0)


@contextlib.contextmanager
def current_gpu_lease(need: int, gpu_mem_gb: float | None, alone: bool = False) -> Iterator[tuple[float, int]]:
    """A memory lease on this process's current CUDA device; yields (seconds waited, bytes leased)."""
    import torch

    from kernelzero.verify.judge.lease import _device_uuid

    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    budget = budget_bytes(total, gpu_mem_gb)
    with memory_lease(need, _device_uuid(), budget, alone=alone) as waited:
        yield waited, budget if alone else min(need, budget)
