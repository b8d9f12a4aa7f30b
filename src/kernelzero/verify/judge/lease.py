"""Who may use a GPU when, across processes: `gpu_lease(shared=True)`, then `exclusive_gpu()` to time.

A sample's correctness checks (reference, candidate load, trials, Triton's JIT compile on the first
call) may share a GPU with other samples' checks: they measure nothing. Timing may not: from the
first warm-up call to the last timed call of candidate and reference, the judge holds the GPU
exclusively, so no sample is ever timed while another runs on its GPU, whoever started them (the
pool's runners, another `kernelzero eval`, the service). Process start-up, imports and the candidate's
builds happen before any lease is taken, so GPUs do not wait on compilers.

Mechanism: a readers-writer `flock` on `/tmp/kernelzero-gpu-locks/<GPU uuid>.lock` (shared for
checks, exclusive for timing) behind a turnstile lock `<uuid>.turn` that every taker passes and a
writer holds until it has the GPU, so a waiting timer is never starved by a stream of checkers. A
judge going from checks to timing first lets go of its shared hold (two judges upgrading at once
would otherwise deadlock). Between its steps (correctness trials) a checker steps aside for a waiting timer
(`let_writers_in`), so a timer never waits for a checker's whole sequence of steps. Locks are released when the judge exits, however it exits. As root the
files are private to root, so a sandboxed candidate (another user) cannot take them. Leases are
re-entrant within a process (the stricter second verification of an implausible speedup runs inside
the first's timing).

Health: a judge whose sample crashed on the GPU (an illegal memory access breaks that process's CUDA
context) marks the GPU suspect before it lets go; whoever takes the lease next first waits for the GPU
to be free, runs the health probe (verify/judge/probe.py) in a fresh process, and gets `GpuUnhealthy` if it
fails. GPUs are never reset. The probe's process is started ahead, before the taker passes the turnstile (one taker
at a time: the `<uuid>.probing` lock), so that only its checks hold the GPU alone, not its start and CUDA context.
Like the probe made after the lease, its context stands outside the memory ledger: one per GPU at a time, within the
headroom the ledger's budget leaves (memory.BUDGET_SHARE).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from kernelzero.verify.judge.probe import StartedProbe, probe_gpu, start_probe
from kernelzero.verify.sandbox import safe_fs

LOCK_DIR = Path(os.environ.get("KZ_GPU_LOCK_DIR", "/tmp/kernelzero-gpu-locks"))
_held: dict[str, dict] = {}  # uuid -> {"fd", "turn", "mode", "depth"} of this process's lease
probe_log: list[tuple[bool, float, str]] = []  # this process's probes: (ok, seconds, message)


class GpuUnhealthy(RuntimeError):
    """The GPU failed its health probe after an earlier crash."""


def suspect_path(uuid: str) -> Path:
    return LOCK_DIR / f"{uuid}.suspect"


def mark_suspect(uuid: str | None = None) -> None:
    """Call while holding the lease: the next holder probes the GPU first."""
    os.close(_open(suspect_path(uuid or device_uuid())))  # its existence is the mark


PROBE_ON = "cuda"  # where the health probe checks ("cpu": how CI runs the mechanism without a GPU)


def _probe_if_suspect(uuid: str, ahead: StartedProbe | None = None) -> None:
    marker = suspect_path(uuid)
    if not marker.exists():
        return
    if ahead is not None:
        result = ahead.run()
        said = result.message or f"its process and CUDA context started ahead, in {ahead.ready_s:.1f} s"
    else:
        result = probe_gpu(None, device="cuda-held" if PROBE_ON == "cuda" else PROBE_ON)
        said = result.message
    probe_log.append((result.ok, result.seconds, said))
    if result.busy:  # no memory for the probe at this moment: nothing known of the GPU's health; the mark stays, so
        return  # the next holder probes again (the H200 gate, 2026-12-03: five samples `infra_error` this way)
    if not result.ok:
        raise GpuUnhealthy(result.message)
    marker.unlink(missing_ok=True)


def probe_note() -> str:
    """A verdict's note on this process's last health probe."""
    ok, took, said = probe_log[-1]
    if ok:
        return f"the GPU passed a health probe after an earlier crash ({took:.1f} s{'; ' + said if said else ''})"
    return f"the GPU's health probe after an earlier crash was inconclusive ({said[:200]})"


def lock_path(uuid: str) -> Path:
    return LOCK_DIR / f"{uuid}.lock"


def device_uuid() -> str:
    """The current GPU's uuid, as the leases and the memory ledger name it."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return str(getattr(props, "uuid", "")) or f"{props.name}-{torch.cuda.current_device()}".replace(" ", "_")


def turn_path(uuid: str) -> Path:
    return LOCK_DIR / f"{uuid}.turn"


def _open(path: Path) -> int:
    """A lock file in LOCK_DIR, which every user's judges share (sticky, open to all): neither the folder nor the
    file is taken through a link, or when another user made it first (safe_fs.shared_folder, open_lock)."""
    LOCK_DIR.parent.mkdir(parents=True, exist_ok=True)
    safe_fs.shared_folder(LOCK_DIR)
    return safe_fs.open_lock(path, 0o600 if os.geteuid() == 0 else 0o644)


def _take(held: dict, uuid: str, mode: int) -> None:
    """Pass the turnstile and take the lock in `mode`; probe first (exclusively) if the GPU is suspect, with a probe
    started before the turnstile where this taker could claim one (`probe_ahead`)."""
    ahead = probe_ahead(uuid)
    try:
        fcntl.flock(held["turn"], fcntl.LOCK_EX)
        try:
            if suspect_path(uuid).exists():
                fcntl.flock(held["fd"], fcntl.LOCK_EX)
                _probe_if_suspect(uuid, ahead[0] if ahead else None)
            fcntl.flock(held["fd"], mode)
        finally:
            fcntl.flock(held["turn"], fcntl.LOCK_UN)
    finally:
        if ahead is not None:
            ahead[0].dismiss()
            os.close(ahead[1])


def probe_ahead(uuid: str) -> tuple[StartedProbe, int] | None:
    """When the GPU is suspect and no other taker is starting one: a health probe started now, before the turnstile,
    with the `<uuid>.probing` lock that says so (closed by the caller); else None (the probe, if still needed once
    the lease is held, starts then)."""
    if not suspect_path(uuid).exists():
        return None
    claim = _open(LOCK_DIR / f"{uuid}.probing")
    try:
        fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(claim)
        return None
    started = start_probe(None, PROBE_ON)
    if started is None:
        os.close(claim)
        return None
    return started, claim


@contextlib.contextmanager
def gpu_lease(uuid: str | None = None, shared: bool = False) -> Iterator[float]:
    """Hold the current GPU's lease (shared: beside other checkers; else alone); yields the seconds waited."""
    uuid = uuid or device_uuid()
    held = _held.get(uuid)
    if held is not None:
        if not shared and held["mode"] == "shared":
            raise RuntimeError("already holding the shared lease: use exclusive_gpu() to time")
        held["depth"] += 1
        try:
            yield 0.0
        finally:
            held["depth"] -= 1
        return
    held = {
        "fd": _open(lock_path(uuid)),
        "turn": _open(turn_path(uuid)),
        "mode": "shared" if shared else "exclusive",
        "depth": 1,
    }
    try:
        start = time.perf_counter()
        try:
            _take(held, uuid, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        except GpuUnhealthy:
            fcntl.flock(held["fd"], fcntl.LOCK_UN)
            raise
        _held[uuid] = held
        try:
            yield time.perf_counter() - start
        finally:
            _held.pop(uuid, None)
            fcntl.flock(held["fd"], fcntl.LOCK_UN)
    finally:
        os.close(held["fd"])
        os.close(held["turn"])


def holding() -> bool:
    """Whether this process holds a GPU lease (of any GPU, in any mode)."""
    return bool(_held)


def let_writers_in(uuid: str | None = None) -> float:
    """Between two steps of a shared lease: if a timer waits at the turnstile, let go of the shared hold and take
    it again behind the timer; the seconds that took (0 when nobody waited, or outside a shared lease).

    A checker that held its shared lease for all its steps kept every timer, and behind the turnstile every other
    checker, waiting for its slowest step sequence: on the H200 gate (2026-12-02) one verification's five correctness
    trials on 512 MiB input sets held 11 timers and the GPU idle for over a minute. With this between steps a timer
    waits one step at most."""
    uuid = uuid or device_uuid()
    held = _held.get(uuid)
    if held is None or held["mode"] != "shared":
        return 0.0
    try:
        fcntl.flock(held["turn"], fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # a timer holds the turnstile (or a checker is passing it): step aside
        start = time.perf_counter()
        fcntl.flock(held["fd"], fcntl.LOCK_UN)
        _take(held, uuid, fcntl.LOCK_SH)
        return time.perf_counter() - start
    fcntl.flock(held["turn"], fcntl.LOCK_UN)
    return 0.0


@contextlib.contextmanager
def exclusive_gpu(uuid: str | None = None) -> Iterator[float]:
    """The GPU alone (for timing), from inside a shared lease or without one; yields the seconds waited.

    From a shared lease the hold is given up first, then retaken exclusively; it stays exclusive until
    the outer lease ends.
    """
    uuid = uuid or device_uuid()
    held = _held.get(uuid)
    if held is None:
        with gpu_lease(uuid) as waited:
            yield waited
        return
    if held["mode"] == "exclusive":
        yield 0.0
        return
    start = time.perf_counter()
    fcntl.flock(held["fd"], fcntl.LOCK_UN)
    _take(held, uuid, fcntl.LOCK_EX)
    held["mode"] = "exclusive"
    yield time.perf_counter() - start
