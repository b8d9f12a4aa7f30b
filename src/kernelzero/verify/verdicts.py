"""Verdicts decided before (or without) a judge process: the format check, static checks, the CUDA compile
check without a GPU, and the pools' runner failures. The judge builds its own (`judge/judge.py`); both go through
`feedback_for` so every verdict carries the text a Coder can act on.

Two kinds are not the candidate's verdict (`types.SKIPPED_STATUSES`; rewards and metrics leave them out):
`infra_verdict` (status `infra_error`: the verification could not be carried out) and `broken_task_verdict`
(status `task_broken`: the task's own reference fails). `fault_verdict` turns an exception that `verify()` raised
for one sample into one of the two, so that no batch API has to raise because one sample failed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import traceback
from dataclasses import replace

from kernelzero.tasks.hashing import task_hash
from kernelzero.types import Task, Verdict
from kernelzero.verify.feedback import feedback_for
from kernelzero.verify.options import VerifyOptions, tolerances


def candidate_hash(source: str) -> str:
    """The short hash of a candidate's source that every verdict carries."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def early_verdict(
    task: Task, source: str, backend: str, opts: VerifyOptions, status: str, stage: str, message: str, **extra
) -> Verdict:
    """A verdict for `source` decided outside the judge (`extra`: more Verdict fields)."""
    atol, rtol = tolerances(opts, task.atol, task.rtol)
    verdict = Verdict(
        status=status,
        task=task.name,
        task_hash=task_hash(task),
        candidate_hash=candidate_hash(source),
        backend=backend,
        profile=opts.profile,
        device=extra.pop("device", "cpu"),
        stage=stage,
        message=message,
        atol=atol,
        rtol=rtol,
        precision=opts.precision,
        **extra,
    )
    return replace(verdict, feedback=feedback_for(verdict))


BROKEN_TASK = "the task itself is broken"  # how every `task_broken` message starts
# how the messages of verify()'s ValueError for a broken task start (judge/reference.py, judge/task_source.py)
BROKEN_TASK_PREFIXES = (BROKEN_TASK, "the task's reference process failed")
FAULT_MESSAGE_LIMIT = 500  # characters of a fault verdict's message


def _bounded(text: str, limit: int = FAULT_MESSAGE_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def infra_verdict(
    task: Task, source: str, backend: str, opts: VerifyOptions, stage: str, message: str, **extra
) -> Verdict:
    """An `infra_error` verdict: the verification of `source` could not be carried out, for a reason outside the
    candidate and the task. `stage` says what failed: "gpu_memory", "judge", "gpu_health", "runner" or
    "exception"; `message` is bounded to FAULT_MESSAGE_LIMIT characters."""
    return early_verdict(task, source, backend, opts, "infra_error", stage, _bounded(message), **extra)


def broken_task_verdict(task: Task, source: str, backend: str, opts: VerifyOptions, message: str, **extra) -> Verdict:
    """A `task_broken` verdict (stage "reference"): the task's own reference code fails; no candidate was judged.
    The message starts with BROKEN_TASK."""
    if not message.startswith(BROKEN_TASK):
        message = f"{BROKEN_TASK}: {message}"
    return early_verdict(task, source, backend, opts, "task_broken", "reference", _bounded(message), **extra)


def fault_verdict(task: Task, source: str, backend: str, opts: VerifyOptions, exc: BaseException) -> Verdict:
    """The verdict of one sample whose verification raised `exc`.

    A ValueError whose text starts with one of BROKEN_TASK_PREFIXES (what `verify()` raises for a broken task) gives
    `task_broken`; anything else `infra_error` at stage "exception", naming the exception's type (its traceback's
    tail in `error_log`).
    """
    text = str(exc)
    if isinstance(exc, ValueError) and text.startswith(BROKEN_TASK_PREFIXES):
        return broken_task_verdict(task, source, backend, opts, text)
    message = f"the verifier raised {type(exc).__name__}: {text}"
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-2000:]
    return infra_verdict(task, source, backend, opts, "exception", message, error_log=tail)


def versions() -> dict[str, str]:
    """The versions a verdict records, and the verdict store keys on: python, torch, and each kernel language's
    library that is installed (triton, helion)."""
    out = {"python": platform.python_version(), "torch": _torch_version()}
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        pass
    try:
        out["helion"] = importlib.metadata.version("helion")  # read from its metadata: importing it is slow
    except importlib.metadata.PackageNotFoundError:
        pass
    return out


def _torch_version() -> str:
    import torch

    return torch.__version__
