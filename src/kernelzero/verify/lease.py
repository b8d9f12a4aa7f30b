"""One sample on a GPU at a time, across processes: `with gpu_lease(): ...` in the judge.

The judge holds its GPU's lease from building the reference to the last timed call, so no two
samples ever run, let alone get timed, on one GPU at once, whoever started them (the pool's runners,
another `kernelzero eval`, the service). Process start-up, imports and the candidate's builds happen
before the lease is taken, so GPUs do not wait on compilers. The lease is an exclusive `flock` on
`/tmp/kernelzero-gpu-locks/<GPU uuid>.lock`; it is released when the judge exits, however it exits.
As root the file is private to root, so a sandboxed candidate (another user) cannot take it. The
lease is re-entrant within a process (the stricter second verification of an implausible speedup
runs inside the first's lease).

Health: a judge whose sample crashed on the GPU (an illegal memory access breaks that process's CUDA
context) marks the GPU suspect before it lets go of the lease; whoever takes the lease next first runs
the health probe (service/probe.py) in a fresh process, and gets `GpuUnhealthy` if it fails. So no
sample runs on a GPU after a crash until a probe has passed, whoever starts it. GPUs are never reset.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

LOCK_DIR = Path(os.environ.get("KZ_GPU_LOCK_DIR", "/tmp/kernelzero-gpu-locks"))
_held: dict[str, int] = {}
probe_log: list[tuple[bool, float, str]] = []  # this process's probes: (ok, seconds, message)


class GpuUnhealthy(RuntimeError):
    """The GPU failed its health probe after an earlier crash."""


def suspect_path(uuid: str) -> Path:
    return LOCK_DIR / f"{uuid}.suspect"


def mark_suspect(uuid: str | None = None) -> None:
    """Call while holding the lease: the next holder probes the GPU first."""
    suspect_path(uuid or _device_uuid()).touch()


def _probe_if_suspect(uuid: str) -> None:
    marker = suspect_path(uuid)
    if not marker.exists():
        return
    from kernelzero.service.probe import probe_gpu

    result = probe_gpu(None, device="cuda-held")
    probe_log.append((result.ok, result.seconds, result.message))
    if not result.ok:
        raise GpuUnhealthy(result.message)
    marker.unlink(missing_ok=True)


def lock_path(uuid: str) -> Path:
    return LOCK_DIR / f"{uuid}.lock"


def _device_uuid() -> str:
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return str(getattr(props, "uuid", "")) or f"{props.name}-{torch.cuda.current_device()}".replace(" ", "_")


@contextlib.contextmanager
def gpu_lease(uuid: str | None = None) -> Iterator[float]:
    """Hold the current GPU's lease; yields the seconds spent waiting for it."""
    uuid = uuid or _device_uuid()
    if _held.get(uuid):
        _held[uuid] += 1
        try:
            yield 0.0
        finally:
            _held[uuid] -= 1
        return
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        LOCK_DIR.chmod(0o1777)
    fd = os.open(lock_path(uuid), os.O_RDWR | os.O_CREAT, 0o600 if os.geteuid() == 0 else 0o644)
    try:
        start = time.perf_counter()
        fcntl.flock(fd, fcntl.LOCK_EX)
        _held[uuid] = 1
        try:
            waited = time.perf_counter() - start
            _probe_if_suspect(uuid)
            yield waited
        finally:
            _held.pop(uuid, None)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
