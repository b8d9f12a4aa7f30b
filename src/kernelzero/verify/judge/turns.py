"""The rules of a serving judge's turns (judge/serving.py), torch-free where the caller needs them.

- `serves()`: how many requests one standby judge serves, `KZ_STANDBY_SERVES` (default SERVES). The caller's
  `Standby` (judge/standby.py) passes it to the judges it starts, so both sides count alike.
- `reference_key(request)`: the task and the options a reference process was built for. A judge keeps its reference
  process for a next request with the same key only (`keep_reference`).
- `may_go_on(payload)`: whether a judge may serve another request after this answer. Only after a verdict that
  says nothing went wrong with a process, the machine or the verifier: a crash, timeout, oom, tampering, an
  infrastructure error, a broken task, a retry alone or an error of the verifier's ends the judge, as does a GPU
  that no longer synchronises (serving.py checks that).
- `between_requests(kept)`: what a verdict reads of the judge's own process state, reset: the health probes' log,
  the IPC and CPU seconds, the GPU memory peak and cache, the memory leases kept until "exit" (the workers that
  held them are closed by then), and a kept reference's counters.
"""

from __future__ import annotations

import hashlib
import json
import os

SERVES = 8  # requests per standby judge; gated on the H200 at 92a41dc (bench/service.md, sixteenth session)
SERVES_ENV = "KZ_STANDBY_SERVES"
GO_ON = frozenset(
    {
        "correct",
        "compiled",
        "format_error",
        "compile_error",
        "runtime_error",
        "shape_mismatch",
        "dtype_mismatch",
        "nan_or_inf",
        "mismatch",
        "input_mutated",
        "static_violation",
        "no_kernel",
        "torch_compute",
        "bad_output",
        "unconfirmed_speedup",
    }
)  # every other status (crash, timeout, oom, tampered, infra_error, task_broken) ends the judge


def serves() -> int:
    """Requests one standby judge serves (`KZ_STANDBY_SERVES`, at least 1)."""
    raw = os.environ.get(SERVES_ENV, "").strip()
    if not raw:
        return SERVES
    try:
        count = int(raw)
    except ValueError:
        raise ValueError(f"{SERVES_ENV} must be a whole number of requests, got {raw!r}") from None
    if count < 1:
        raise ValueError(f"{SERVES_ENV} must be at least 1, got {count}")
    return count


def reference_key(request: dict) -> str:
    """The task and options of a request (as verify() writes it): one key per reference process a judge may keep."""
    kept = {"task": request["task"], "options": request["options"]}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:32]


def may_go_on(payload: dict) -> bool:
    """Whether a judge may serve another request after answering `payload` (see the module docstring)."""
    verdict = payload.get("verdict")
    return isinstance(verdict, dict) and verdict.get("status") in GO_ON


def between_requests(kept=()) -> None:
    """Reset what a verdict reads of this judge's own state before its next request (`kept`: the kept workers)."""
    import torch

    from kernelzero.verify.judge import lease, memory, usage

    lease.probe_log.clear()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    memory.release_kept()
    usage.new_request(kept)
