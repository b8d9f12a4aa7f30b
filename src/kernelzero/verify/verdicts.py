"""Verdicts decided before (or without) a judge process: the format check, static checks, the CUDA compile
check without a GPU, and the pools' runner failures. The judge builds its own (`judge/judge.py`); both go through
`feedback_for` so every verdict carries the text a Coder can act on.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
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
