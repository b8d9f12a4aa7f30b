"""Is a task's reference output informative enough that trivial answers fail?

A task on which "return zeros", "return a constant", "return the input" or "return the same tensor
for every input" passes the verifier's tolerance teaches a Coder nothing and rewards cheats. These
checks run on the reference outputs for two independent input draws. Used by the contract check
(`kernelzero tasks check --strict`) and by the Proposer's admission checks.
"""

from __future__ import annotations

from typing import Any

import torch

DEGENERACY_TOL = 1e-2  # atol = rtol used by KernelBench's original protocol and the KernelZero paper


def flatten_outputs(out: Any) -> list[torch.Tensor]:
    """The output tensors of a forward, in order (a tensor, or a tuple/list of them)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and out and all(isinstance(o, torch.Tensor) for o in out):
        return list(out)
    raise TypeError(f"forward must return a tensor or a tuple of tensors, got {describe(out)}")


def describe(value: Any) -> str:
    """A short description of a value: `float32[4, 8]`, `int`, `tuple(float32[2], str)`."""
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(describe(v) for v in value[:6])
        return f"{type(value).__name__}({inner}{', ...' if len(value) > 6 else ''})"
    return type(value).__name__


def _close(a: torch.Tensor, b: torch.Tensor | float, tol: float) -> bool:
    a64 = a.detach().to(torch.float64)
    b64 = b.detach().to(torch.float64) if isinstance(b, torch.Tensor) else torch.full_like(a64, b)
    return bool(torch.allclose(a64, b64, atol=tol, rtol=tol))


def degenerate_reasons(
    outputs: list[torch.Tensor],
    other_outputs: list[torch.Tensor],
    inputs: list[Any],
    tol: float = DEGENERACY_TOL,
) -> list[str]:
    """Reasons a trivial answer would pass on this task (empty list: none found).

    `outputs` and `other_outputs` are the reference outputs for two independent input draws;
    `inputs` are the inputs that produced `outputs`.
    """
    reasons: list[str] = []
    for i, (out, other) in enumerate(zip(outputs, other_outputs)):
        tag = f"output {i}: " if len(outputs) > 1 else ""
        if not out.is_floating_point():
            continue  # integer / bool outputs are compared exactly; no tolerance to hide in
        if _close(out, 0.0, tol):
            reasons.append(f"{tag}all-zeros passes")
        elif out.numel() > 1 and _close(out, float(out.double().mean()), tol):
            reasons.append(f"{tag}a constant passes")
        if out.shape == other.shape and _close(out, other, tol):
            reasons.append(f"{tag}the same answer passes for other inputs")
        for j, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and x.shape == out.shape and x.is_floating_point() and _close(out, x, tol):
                reasons.append(f"{tag}returning input {j} passes")
    return reasons
