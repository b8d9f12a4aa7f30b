"""GPU memory as a leased resource across processes: `memory_lease(need)` before a verification allocates.

Why: a verification holds three processes on its GPU (judge, the task's reference, the candidate's worker), and at
bench sizes each can hold tens of GB. Processes that share no allocator (pool lanes, two pools, the HTTP service,
pytest workers, a profiled run) otherwise divide the GPU by luck: the loser gets CUDA out-of-memory, which used to
become the candidate's or the task's verdict. The timing lease (lease.py) says who may *time*; this one says how
much memory each verification may *hold*.

Record: one lease is a file `<LOCK_DIR>/<GPU uuid>.mem/<pid>-<token>` holding the leased bytes, flock-ed exclusively
by its holder for as long as the lease lasts. The holder's death releases the flock, so a lease whose file can be
locked by someone else is dead and is swept. A holder may also enter a base (`<pid>-<token>.base`: its processes'
CUDA contexts, which exist before it may allocate anything) at once, without waiting: every later lease counts it, so
processes that wait for memory are not forgotten (on the H200 on 2026-12-02, 16 test workers' waiting verifications
held tens of GB of contexts outside the budget, and the GPU ran out). The ledger is the folder; `<uuid>.memlock`
serialises reading and writing it, and `<uuid>.memturn` is a turnstile a waiter holds while it waits, so that a large
request is not starved by a stream of small ones. Leases are per GPU uuid and work between unrelated processes.

The budget (what all entries together may hold) is `budget_bytes` (the `gpu_mem_gb` option; by default 92% of the
GPU's memory). A request with no data lease beside it always gets its lease (cut to the budget), so none waits
forever. `alone=True` waits until no other data lease is left and takes what the bases leave (the retry after an
out-of-memory error another tenant may have caused: judge/faults.py). Leases are re-entrant within a process: an
inner lease (the stricter second verification of an implausible speedup runs inside the first) is counted in the
outer one. What is not protected: memory taken by programs that do not take these leases (a user's notebook, a
training job): they count only through the budget.

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
from kernelzero.verify.sandbox import safe_fs
from kernelzero.verify.worker.hold import FLUSH_BYTES

GIB = 1 << 30
CONTEXT_BYTES = 640 << 20  # one process's CUDA context and allocator slack (three processes per verification)
# Copies of one input set and of the outputs that a verification may hold at its peak, over its processes: the judge
# (pristine sets, expected and received outputs, the arenas it lends, `cuMemAlloc`ed outside PyTorch), the reference
# (a block's drawn sets and their export copy, outputs), the candidate (outputs and their export copy). Measured on
# the H200 on 2026-12-02 (`KZ_GPU_TRACE`, gpu_peak_gib_*), a 512 MiB-input task: judge 9.25 GiB reserved plus two
# arenas of about 2.5 GiB, candidate 2.5 GiB, reference 6.75 GiB before the pack_values fix (sandbox/values.py), so about
# 43 copies in all; 12 + 8 had let four such verifications overfill the GPU. Not yet measured after the fix.
INPUT_COPIES = 24
OUTPUT_COPIES = 16
DEFAULT_NEED = 16 * GIB  # when the footprint cannot be measured (a task whose forward has no meta kernels)
BUDGET_SHARE = 0.92  # of the GPU's memory, when the budget is not set
POLL_S = 0.05
# a verification's processes' CUDA contexts (judge, reference, candidate's worker), and the two workers' GPU holds'
# L2 flush buffers, held from their contexts on (worker/hold.py)
BASE_BYTES = 3 * CONTEXT_BYTES + 2 * FLUSH_BYTES
ALONE_PATIENCE_S = 60.0  # an alone lease waits this long for every other data lease to end, then takes what is left
_held: dict[str, dict] = {}  # uuid -> {"bytes"} of this process's lease
_kept: list[dict] = []  # entries kept until this process exits (memory_lease's `keep`)


def verification_need(footprint: dict | None, params_copies: int = 2, ref_fp64: bool = False) -> int:
    """The data bytes one verification may hold beyond its processes' CUDA contexts (BASE_BYTES), from the task's
    footprint (`{"params", "inputs", "outputs"}` in bytes, as the reference's `measure` command returns it), or
    DEFAULT_NEED when there is none. Inputs count INPUT_COPIES times (the judge's pristine sets, a timing block's
    warm-up, timed and audit sets, the IPC arenas of both sides), outputs OUTPUT_COPIES times; with `ref_fp64` the
    reference's float64 copy doubles the parameters and the outputs."""
    if not footprint:
        return DEFAULT_NEED
    wide = 2 if ref_fp64 else 1
    params = (params_copies + 2 * ref_fp64) * int(footprint.get("params", 0))
    return (
        params
        + INPUT_COPIES * int(footprint.get("inputs", 0))
        + wide * OUTPUT_COPIES * int(footprint.get("outputs", 0))
    )


def _folder(uuid: str) -> Path:
    """The ledger's folder: a real folder of root's or this user's (never one another user made, or a link: the
    sweep below unlinks entries nobody holds)."""
    LOCK_DIR.parent.mkdir(parents=True, exist_ok=True)
    safe_fs.shared_folder(LOCK_DIR)
    folder = LOCK_DIR / f"{uuid}.mem"
    safe_fs.shared_folder(folder, 0o755)  # entries are written by trusted judges only
    return folder


def _open_lock(name: str) -> int:
    """A lock file in LOCK_DIR (made on first use, as lease.py makes it: sticky and open to every user)."""
    LOCK_DIR.parent.mkdir(parents=True, exist_ok=True)
    safe_fs.shared_folder(LOCK_DIR)
    return safe_fs.open_lock(LOCK_DIR / name, 0o600 if os.geteuid() == 0 else 0o644)


def leased_bytes(uuid: str) -> tuple[int, int]:
    """(bytes held by live leases on this GPU, bases included; how many data leases); dead leases are swept. Call
    under the ledger lock."""
    total = count = 0
    for entry in _folder(uuid).iterdir():
        try:
            fd = safe_fs.open_regular(entry)
        except (FileNotFoundError, safe_fs.UnsafePath):
            continue  # released meanwhile, or a link or non-file: not an entry of ours (never followed, never unlinked)
        except OSError:  # another user's entry this process may not read: counted live, at the default size
            total += DEFAULT_NEED
            count += not entry.name.endswith(".base")
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # its holder lives
                try:
                    total += int(os.pread(fd, 32, 0).decode() or 0)
                except ValueError:
                    pass
                count += not entry.name.endswith(".base")
                continue
            entry.unlink(missing_ok=True)  # nobody holds it: its holder died
        finally:
            os.close(fd)
    return total, count


def _write_entry(uuid: str, nbytes: int, suffix: str) -> dict:
    """A new ledger entry of `nbytes`, flock-ed by this process (call under the ledger lock)."""
    path = _folder(uuid) / f"{os.getpid()}-{secrets.token_hex(6)}{suffix}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600 if os.geteuid() == 0 else 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.pwrite(fd, str(nbytes).encode(), 0)
    return {"fd": fd, "path": path, "bytes": nbytes}


def _under_ledger(uuid: str, take) -> dict | None:
    lock = _open_lock(f"{uuid}.memlock")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return take()
    finally:
        os.close(lock)


def _try_take(uuid: str, need: int, budget: int, alone: bool, impatient: bool) -> dict | None:
    """Take `need` data bytes if they fit in `budget` beside every live entry (alone: once no other data lease is
    left, all that the bases leave); the entry, or None. A request with no data lease beside it is never refused
    (it gets what the bases leave), so no request waits forever; nor does an `impatient` alone one (ALONE_PATIENCE_S
    passed): it takes what is left, so one retry cannot hold every other verification back for long."""

    def take() -> dict | None:
        held, count = leased_bytes(uuid)
        left = max(0, budget - held)
        if alone:
            return _write_entry(uuid, left, "") if count == 0 or (impatient and left > 0) else None
        if count and held + need > budget:
            return None
        return _write_entry(uuid, min(need, left), "")

    return _under_ledger(uuid, take)


def _release(entry: dict | None, keep: bool = False) -> None:
    """Give an entry back; `keep`: leave it flock-ed until this process exits (its memory goes only then)."""
    if entry is None:
        return
    if keep:
        _kept.append(entry)
        return
    entry["path"].unlink(missing_ok=True)
    os.close(entry["fd"])


@contextlib.contextmanager
def memory_lease(
    need: int, uuid: str, budget: int, alone: bool = False, base: int = 0, keep: bool = False
) -> Iterator[float]:
    """Hold `need` bytes of the GPU `uuid`'s memory budget (`alone`: all that the other processes' bases leave);
    yields the seconds waited. `base`: bytes this holder's processes hold already (their CUDA contexts), entered in
    the ledger at once without waiting, so that every lease after it counts them. `keep`: the entries stay until this
    process exits (a judge: its workers and its own CUDA memory go after its answer, not when the lease ends).
    Re-entrant: an inner lease (the stricter second verification inside the first) waits for nothing, but enters
    its own processes' need as a base, so others count them."""
    need = max(0, min(int(need), budget))
    outer = _held.get(uuid)
    if outer is not None:
        inner = _under_ledger(uuid, lambda: _write_entry(uuid, int(base) + need, ".base"))
        try:
            yield 0.0
        finally:
            _release(inner, keep)
        return
    start = time.perf_counter()
    base_entry = _under_ledger(uuid, lambda: _write_entry(uuid, int(base), ".base")) if base else None
    data = None
    try:
        turn = _open_lock(f"{uuid}.memturn")
        try:
            fcntl.flock(turn, fcntl.LOCK_EX)  # one waiter at a time: first come, first served
            while True:
                impatient = time.perf_counter() - start > ALONE_PATIENCE_S
                if (data := _try_take(uuid, need, budget, alone, impatient)) is not None:
                    break
                time.sleep(POLL_S)
        finally:
            os.close(turn)
        _held[uuid] = {"bytes": data["bytes"]}
        try:
            yield time.perf_counter() - start
        finally:
            _held.pop(uuid, None)
    finally:
        _release(data, keep)
        _release(base_entry, keep)


@contextlib.contextmanager
def standing_base(nbytes: int, uuid: str) -> Iterator[None]:
    """A base entry of `nbytes` on GPU `uuid` for as long as the block lasts, entered at once, never waited for: the
    CUDA contexts of processes that wait for work (a standby judge and its worker, judge/standby.py), which every
    lease taken meanwhile must count."""
    entry = _under_ledger(uuid, lambda: _write_entry(uuid, int(nbytes), ".base"))
    try:
        yield
    finally:
        _release(entry)


def budget_bytes(total_bytes: int, gpu_mem_gb: float | None) -> int:
    """The budget all leases on one GPU share: `gpu_mem_gb` when set, else BUDGET_SHARE of the GPU's memory."""
    if gpu_mem_gb:
        return int(gpu_mem_gb * GIB)
    return int(total_bytes * BUDGET_SHARE)


@contextlib.contextmanager
def judge_memory_lease(judge) -> Iterator[None]:
    """The memory lease of one verification on a GPU (on a CPU: none): the task's footprint is measured in the
    reference's sandbox first, then the lease is taken before the reference or the candidate allocates, and kept
    until the judge process exits (its workers and its own memory go after its answer). When it holds its lease (at
    once on a CPU) the judge touches `judge.lease_marker`: its caller's time budget counts from then
    (judge/run.py), so a wait for memory is never the candidate's time."""
    if judge.device != "cuda":
        _touch(judge.lease_marker)
        yield
        return
    footprint = judge.ref.footprint(judge.ref_path)
    if footprint is None:
        judge.notes.append(f"the task's footprint could not be measured: GPU memory leased {DEFAULT_NEED / GIB:.0f} GB")
    need = verification_need(footprint, ref_fp64=judge.opts.ref_fp64)
    lease = current_gpu_lease(need, judge.opts.gpu_mem_gb, judge.opts.gpu_alone, BASE_BYTES, keep=True)
    with lease as (waited, leased):
        import torch

        _touch(judge.lease_marker)
        free, total = torch.cuda.mem_get_info()
        judge.stage_s.update(gpu_mem_wait=round(waited, 4), gpu_mem_gib=round((BASE_BYTES + leased) / GIB, 3))
        judge.stage_s.update(gpu_need_gib=round((BASE_BYTES + need) / GIB, 3), gpu_total_gib=round(total / GIB, 3))
        if judge.opts.gpu_alone:  # no other verification holds data here now: the rest is other programs' (or bases)
            judge.stage_s["gpu_foreign_gib"] = round(max(0, total - free - BASE_BYTES) / GIB, 3)
        yield


def _touch(path: str | None) -> None:
    if path:
        with contextlib.suppress(OSError):
            Path(path).touch()


@contextlib.contextmanager
def current_gpu_lease(
    need: int, gpu_mem_gb: float | None, alone: bool = False, base: int = 0, keep: bool = False
) -> Iterator[tuple[float, int]]:
    """A memory lease on this process's current CUDA device (see memory_lease); yields (seconds waited, data bytes
    asked for: the budget when alone)."""
    import torch

    from kernelzero.verify.judge.lease import device_uuid

    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    budget = budget_bytes(total, gpu_mem_gb)
    with memory_lease(need, device_uuid(), budget, alone=alone, base=base, keep=keep) as waited:
        yield waited, budget if alone else min(need, budget)


def foreign_starved(stage_s: dict) -> bool:
    """Alone on the GPU, other programs (no lease of ours) hold so much that this verification's need did not fit."""
    foreign = stage_s.get("gpu_foreign_gib")
    return foreign is not None and foreign + stage_s.get("gpu_need_gib", 0.0) > stage_s.get("gpu_total_gib", 0.0)


def release_kept() -> None:
    """Give back every entry kept until this process exits: a serving judge between requests (judge/turns.py), once
    the workers that held the memory are closed and its own cache is emptied."""
    while _kept:
        _release(_kept.pop())
