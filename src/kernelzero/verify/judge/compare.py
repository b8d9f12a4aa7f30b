"""Compare candidate outputs with the reference's, in the trusted judge process.

`compare(expected, got, atol, rtol)` returns None when every output matches, else a `Failure`
with the status (shape_mismatch, dtype_mismatch, nan_or_inf, mismatch) and the worst element.
The test is `|got - expected| <= atol + rtol * |expected|` elementwise (the reference's magnitude,
not the candidate's, scales the relative term, so a candidate cannot widen its own tolerance by
returning large values); NaN or Inf in the candidate where the reference is finite fails.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernelzero.tasks.quality import describe
from kernelzero.types import Mismatch


@dataclass(frozen=True)
class Failure:
    """Why outputs do not match."""

    status: str  # shape_mismatch, dtype_mismatch, nan_or_inf, mismatch, input_mutated
    message: str  # one line
    mismatch: Mismatch | None = None


def _worst(exp: torch.Tensor, got: torch.Tensor, atol: float, rtol: float, trial: int, k: int) -> Mismatch:
    e, g = exp.double(), got.double()
    err = (g - e).abs()
    rel = err / (e.abs() + 1e-12)
    bad = err > atol + rtol * e.abs()
    bad |= torch.isnan(g) & ~torch.isnan(e)
    score = torch.where(torch.isfinite(err), err - (atol + rtol * e.abs()), torch.full_like(err, float("inf")))
    flat = int(torch.argmax(score.reshape(-1))) if score.numel() else 0
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), e.shape)) if e.dim() else ()
    return Mismatch(
        trial=trial,
        output=k,
        index=index,
        expected=float(e.reshape(-1)[flat]) if e.numel() else 0.0,
        got=float(g.reshape(-1)[flat]) if g.numel() else 0.0,
        max_abs_err=float(torch.nan_to_num(err, nan=float("inf")).max()) if err.numel() else 0.0,
        max_rel_err=float(torch.nan_to_num(rel, nan=float("inf")).max()) if rel.numel() else 0.0,
        bad_fraction=float(bad.double().mean()) if bad.numel() else 0.0,
    )


def compare(
    expected: list[torch.Tensor], got: list[torch.Tensor], atol: float, rtol: float, trial: int = 0
) -> Failure | None:
    """None if `got` matches `expected`; else the first failing output's Failure."""
    if len(got) != len(expected):
        return Failure("shape_mismatch", f"expected {len(expected)} output(s), got {len(got)}")
    for k, (exp, out) in enumerate(zip(expected, got)):
        tag = f"output {k}: " if len(expected) > 1 else ""
        if out.shape != exp.shape:
            return Failure("shape_mismatch", f"{tag}expected shape {list(exp.shape)}, got {list(out.shape)}")
        if out.dtype != exp.dtype:
            return Failure("dtype_mismatch", f"{tag}expected {describe(exp)}, got {describe(out)}")
        if not exp.is_floating_point() and not exp.is_complex():
            if not torch.equal(out, exp):
                m = _worst(exp, out, 0.0, 0.0, trial, k)
                return Failure("mismatch", f"{tag}{_share(m)} of elements differ (exact match required)", m)
            continue
        exp_finite = torch.isfinite(exp)
        if not bool(torch.isfinite(out)[exp_finite].all()):
            m = _worst(exp, out, atol, rtol, trial, k)
            return Failure("nan_or_inf", f"{tag}NaN or Inf where the reference is finite (first at {list(m.index)})", m)
        ok = torch.isclose(out.double(), exp.double(), atol=atol, rtol=rtol, equal_nan=True)
        if not bool(ok.all()):
            m = _worst(exp, out, atol, rtol, trial, k)
            return Failure(
                "mismatch",
                f"{tag}{_share(m)} of elements outside atol={atol:g} rtol={rtol:g}; "
                f"worst at {list(m.index)}: expected {m.expected:.6g}, got {m.got:.6g}",
                m,
            )
    return None


def _share(m: Mismatch) -> str:
    return f"{m.bad_fraction:.2%}"


def same_inputs(before: list, after: list) -> str:
    """'' if every tensor input is bitwise unchanged, else which input changed."""
    for i, (a, b) in enumerate(zip(before, after)):
        if isinstance(a, torch.Tensor) and not torch.equal(a, b.to(a.device)):
            return f"input {i} ({describe(a)}) was modified by the candidate"
    return ""
