"""The sandboxed child of admission: `python -m kernelzero.proposer.admit_child JOB.json RESULT.json`.

proposer/admit.py starts one such process per proposal through the verifier's sandbox (its own user, no
network, its own folder, killed past its deadline or memory cap) and reads RESULT.json back; this process
runs the proposed module's code, the parent never does. It runs the runnable and numerical stages:

1. runnable: the module loads (tasks/module.py: size overrides applied), `Model(*get_init_inputs())` builds
   under a fixed seed, the forward runs on 3 input draws and returns tensors; the first draw twice, and
   the two outputs agree within the Coder's tolerance (exact equality is too strict: GPU atomics break it);
   the eager forward time (median of 5 after 2 warm-up calls) lies inside the window, when one is asked for;
2. numerical: outputs are finite; no trivial answer passes (tasks/quality.py: zeros, a constant, the same
   answer for other inputs, an input returned); the float32 outputs match a float64 copy of the model
   within a tenth of the Coder's tolerance on all 3 draws; no integer or bool output of a module that uses a
   ranking op (top-k or argmax indices, sort orders: `tie_prone`; once the verifier can judge such outputs,
   this becomes a mark on the task instead of a rejection).

The result is one JSON object: {"ok", "reason", "stage", "message", "forward_ms", "input_shapes",
"output_shapes"}; a failure the child cannot report (a crash, a hang, memory) is the parent's to name.
"""

from __future__ import annotations

import copy
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from kernelzero.tasks.module import ContractError, load_reference
from kernelzero.tasks.quality import degenerate_reasons, describe, flatten_outputs

MESSAGE_LIMIT = 600
DRAWS = 3


class Rejected(Exception):
    """A proposal failed a stage; `reason` is one of admit.REASONS."""

    def __init__(self, stage: str, reason: str, message: str):
        super().__init__(message)
        self.stage, self.reason = stage, reason


def _seeded(seed: int, fn):
    torch.manual_seed(seed)
    return fn()


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _forward(model, inputs: list[Any]) -> list[torch.Tensor]:
    try:
        raw = model(*inputs)
    except torch.OutOfMemoryError as exc:
        raise Rejected("runnable", "oom", f"the forward ran out of device memory: {str(exc)[:200]}") from None
    except Exception as exc:
        raise Rejected("runnable", "run_failed", f"forward raised {type(exc).__name__}: {exc}") from None
    try:
        return flatten_outputs(raw)
    except TypeError as exc:
        raise Rejected("runnable", "bad_output", str(exc)) from None


def _worst(a: torch.Tensor, b: torch.Tensor) -> str:
    diff = (a.double() - b.double()).abs()
    return f"max abs diff {float(diff.max()):.3g} (|value| up to {float(b.double().abs().max()):.3g})"


def _agree(a: list[torch.Tensor], b: list[torch.Tensor], tol: float) -> str:
    """'' when the outputs agree (float: allclose with atol = rtol = tol; others: equal), else what differs."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            return f"output {i}: shapes {list(x.shape)} and {list(y.shape)}"
        if x.is_floating_point() or y.is_floating_point():
            if not torch.allclose(x.double(), y.double(), atol=tol, rtol=tol, equal_nan=True):
                return f"output {i}: {_worst(x, y)}"
        elif not torch.equal(x, y):
            return f"output {i}: {int((x != y).sum())} of {x.numel()} elements differ"
    return ""


def _time_ms(model, inputs: list[Any], device: str) -> float:
    for _ in range(2):
        model(*inputs)
    times = []
    for _ in range(5):
        _sync(device)
        start = time.perf_counter()
        model(*inputs)
        _sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def _build(job: dict[str, Any], workdir: Path):
    try:
        ref = load_reference(job["source"], job["sizes"], workdir / "proposal.py")
    except ContractError as exc:
        raise Rejected("runnable", "run_failed", f"{exc.kind}: {exc}") from None
    try:
        init_inputs = _seeded(job["seed"], ref.get_init_inputs)
        with torch.no_grad():
            model = _seeded(job["seed"], lambda: ref.model_cls(*init_inputs))
        model = model.eval().to(job["device"])
    except Exception as exc:
        raise Rejected("runnable", "run_failed", f"building the model raised {type(exc).__name__}: {exc}") from None
    draws = []
    for k in range(DRAWS):
        try:
            inputs = _seeded(job["seed"] + 1 + k, ref.get_inputs)
        except Exception as exc:
            raise Rejected("runnable", "run_failed", f"get_inputs() raised {type(exc).__name__}: {exc}") from None
        if not isinstance(inputs, (list, tuple)) or not any(isinstance(x, torch.Tensor) for x in inputs):
            raise Rejected(
                "runnable", "run_failed", f"get_inputs() must return a list of tensors, got {describe(inputs)}"
            )
        draws.append([x.to(job["device"]) if isinstance(x, torch.Tensor) else x for x in inputs])
    return model, draws


def _runnable(job: dict[str, Any], model, draws: list, result: dict[str, Any]) -> list[list[torch.Tensor]]:
    outs = [_forward(model, inputs) for inputs in draws]
    result["input_shapes"] = [describe(x) for x in draws[0]]
    result["output_shapes"] = [describe(o) for o in outs[0]]
    differs = _agree(outs[0], _forward(model, draws[0]), job["tol"])
    if differs:
        raise Rejected("runnable", "nondeterministic", f"two runs on the same inputs disagree: {differs}")
    result["forward_ms"] = _time_ms(model, draws[0], job["device"])
    window = job.get("window_us")
    if window:
        us = result["forward_ms"] * 1e3
        if us < window[0]:
            raise Rejected("runnable", "too_fast", f"eager forward {us:.1f} us, under the window's {window[0]:g} us")
        if us > window[1]:
            raise Rejected("runnable", "too_slow", f"eager forward {us:.0f} us, over the window's {window[1]:g} us")
    return outs


def _numerical(job: dict[str, Any], model, draws: list, outs: list[list[torch.Tensor]]) -> None:
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
    model64 = copy.deepcopy(model).double()
    for k, inputs in enumerate(draws):
        wide = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
        with torch.no_grad():
            ref = _forward(model64, wide)
        differs = _agree(outs[k], ref, job["tol"] / 10)
        if differs:
            raise Rejected(
                "numerical",
                "precision_sensitive",
                f"float32 and float64 disagree beyond {job['tol'] / 10:g} on draw {k}: {differs}",
            )


def run_job(job: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Both stages for one proposal; a dict with ok=True, or the first rejection."""
    result: dict[str, Any] = {"ok": True, "reason": "", "stage": "done", "message": ""}
    try:
        model, draws = _build(job, workdir)
        with torch.no_grad():
            outs = _runnable(job, model, draws, result)
            _numerical(job, model, draws, outs)
    except Rejected as exc:
        result.update(ok=False, reason=exc.reason, stage=exc.stage, message=str(exc)[:MESSAGE_LIMIT])
    return result


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    try:
        result = run_job(job, Path(argv[0]).parent)
    except BaseException as exc:  # anything else the module did (SystemExit from its code included)
        tail = traceback.format_exc()[-MESSAGE_LIMIT:]
        result = {"ok": False, "reason": "run_failed", "stage": "runnable", "message": f"{type(exc).__name__}: {tail}"}
    Path(argv[1]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
