"""The runnable and numerical checks of admission, decided in the trusted parent from raw values.

    from kernelzero.proposer.checks import Rejected, runnable_checks, numerical_checks, precision_check
    try:
        runnable_checks(job, draws, outs, again, forward_ms)   # outs: per draw, the tensors the forward returned
        numerical_checks(job, draws, outs)
        precision_check(job, outs, outs64)
    except Rejected as exc:
        exc.stage, exc.reason, str(exc)

A proposed module is written by a policy rewarded for admitted modules, so its code runs only in the verifier's
reference process (children.py), which sends back JSON and raw tensor bytes. Every decision is made here, in
this process, which never imports the module: what the module's process could write or patch changes only the
values it returns, never a verdict. `failure_reason` names a reference-process failure with one of the closed
set of admission reasons.

1. runnable: the forward returned tensors for 3 input draws; the first draw run twice agrees within the
   Coder's tolerance (exact equality is too strict: GPU atomics break it); the eager forward time lies
   inside the window, when one is asked for;
2. numerical: outputs are finite; no integer or bool output of a module that uses a ranking op
   (`tie_prone`); no trivial answer passes (tasks/quality.py); the float32 outputs match a float64 copy of
   the model within a tenth of the Coder's tolerance on all 3 draws (`precision_check`).
"""

from __future__ import annotations

from typing import Any

import torch

from kernelzero.tasks.quality import degenerate_reasons, describe

MESSAGE_LIMIT = 600
DRAWS = 3


class Rejected(Exception):
    """A proposal failed a stage; `reason` is one of admit.REASONS."""

    def __init__(self, stage: str, reason: str, message: str):
        super().__init__(message[:MESSAGE_LIMIT])
        self.stage, self.reason = stage, reason


def failure_reason(message: str) -> str:
    """The admission reason for a reference-process failure (a `TaskBroken` message)."""
    if "(timeout)" in message:
        return "timeout"
    if "(oom)" in message or "out of memory" in message.lower() or "OutOfMemoryError" in message:
        return "oom"
    if "(crash)" in message:
        return "crash"
    if "not tensors" in message and "the reference forward" in message:
        return "bad_output"
    return "run_failed"


def check_inputs(draws: list[list[Any]]) -> None:
    """Each draw of `get_inputs()` holds at least one tensor."""
    for inputs in draws:
        if not any(isinstance(x, torch.Tensor) for x in inputs):
            raise Rejected(
                "runnable", "run_failed", f"get_inputs() must return a list of tensors, got {describe(inputs)}"
            )


def _worst(a: torch.Tensor, b: torch.Tensor) -> str:
    diff = (a.double() - b.double()).abs()
    return f"max abs diff {float(diff.max()):.3g} (|value| up to {float(b.double().abs().max()):.3g})"


def agree(a: list[torch.Tensor], b: list[torch.Tensor], tol: float) -> str:
    """'' when the outputs agree (float: allclose with atol = rtol = tol; others: equal), else what differs."""
    if len(a) != len(b):
        return f"{len(a)} and {len(b)} outputs"
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            return f"output {i}: shapes {list(x.shape)} and {list(y.shape)}"
        if x.is_floating_point() or y.is_floating_point():
            if not torch.allclose(x.double(), y.double(), atol=tol, rtol=tol, equal_nan=True):
                return f"output {i}: {_worst(x, y)}"
        elif not torch.equal(x, y):
            return f"output {i}: {int((x != y).sum())} of {x.numel()} elements differ"
    return ""


def runnable_checks(
    job: dict[str, Any], draws: list, outs: list[list[torch.Tensor]], again: list[torch.Tensor], forward_ms: float
) -> None:
    """Tensors came back for every draw, the repeat of draw 0 agrees, and the time lies inside the window."""
    check_inputs(draws)
    for out in [*outs, again]:
        if not out:
            raise Rejected("runnable", "bad_output", "the forward returned no tensors")
    differs = agree(outs[0], again, job["tol"])
    if differs:
        raise Rejected("runnable", "nondeterministic", f"two runs on the same inputs disagree: {differs}")
    window = job.get("window_us")
    if window:
        us = forward_ms * 1e3
        if us < window[0]:
            raise Rejected("runnable", "too_fast", f"eager forward {us:.1f} us, under the window's {window[0]:g} us")
        if us > window[1]:
            raise Rejected("runnable", "too_slow", f"eager forward {us:.0f} us, over the window's {window[1]:g} us")


def numerical_checks(job: dict[str, Any], draws: list, outs: list[list[torch.Tensor]]) -> None:
    """Finite outputs, no ranking-op indices, no trivial answer (the float64 comparison is `precision_check`)."""
    for out in outs:
        for i, o in enumerate(out):
            if o.is_floating_point() and not torch.isfinite(o).all():
                raise Rejected("numerical", "nonfinite", f"output {i} ({describe(o)}) holds NaN or Inf")
    if job["ranking"]:
        ints = [describe(o) for o in outs[0] if not o.is_floating_point()]
        if ints:
            raise Rejected(
                "numerical",
                "tie_prone",
                f"integer/bool output(s) {', '.join(ints)} from a ranking op: "
                "a correct kernel breaks ties differently and passes by luck",
            )
    reasons = degenerate_reasons(outs[0], outs[1], draws[0])
    if reasons:
        raise Rejected("numerical", "degenerate", "; ".join(reasons))


def precision_check(job: dict[str, Any], outs: list[list[torch.Tensor]], outs64: list[list[torch.Tensor]]) -> None:
    """The float32 outputs match the float64 model's within a tenth of the Coder's tolerance on every draw."""
    for k, (out, wide) in enumerate(zip(outs, outs64)):
        differs = agree(out, wide, job["tol"] / 10)
        if differs:
            raise Rejected(
                "numerical",
                "precision_sensitive",
                f"float32 and float64 disagree beyond {job['tol'] / 10:g} on draw {k}: {differs}",
            )
