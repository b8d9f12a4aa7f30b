"""Math functions Helion's generated kernels call through `libdevice`, for Triton's CPU interpreter.

Helion (through Inductor's lowering) turns `torch.erf`, `torch.tanh`, `torch.sqrt`, `torch.rsqrt`, `torch.log1p`,
`torch.isnan` ... inside `hl.tile` loops into calls of `triton.language.extra.libdevice`. On a GPU, Triton binds
that module to CUDA's libdevice when it compiles; in the interpreter (`TRITON_INTERPRET=1`) it stays a module of
stubs that return None, so the first arithmetic on the result fails. `install()` replaces the stubs with the
same function written in `tl` operations the interpreter runs (`tl.math.erf`, `tl.exp2`, `tl.where` ...).

Only for the interpreter: the GPU and the sm_90 compile check use the real libdevice. The formulas are exact
rewrites except `log1p`/`expm1` (log(1 + x), exp(x) - 1: an absolute error near float32's epsilon for tiny x,
far under the verifier's tolerances). Called from `hook.py` when the candidate imports Helion in an interpreted
worker; a Triton candidate that calls libdevice without Helion is not affected.
"""

from __future__ import annotations

import triton.language as tl


def _same(name: str):
    """libdevice.`name` as `tl.math.name` (looked up at call time: the interpreter patches `tl.math`)."""

    def fn(x):
        return getattr(tl.math, name)(x)

    fn.__name__ = name
    return fn


def tanh(x):
    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)  # exp overflows to inf for large x: 1 - 0 = 1


def log1p(x):
    return tl.log(1.0 + x)


def expm1(x):
    return tl.exp(x) - 1.0


def isnan(x):
    return x != x


def isinf(x):
    return tl.abs(x) == float("inf")


REPLACEMENTS = {
    **{name: _same(name) for name in ("erf", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos")},
    **{name: _same(name) for name in ("floor", "ceil", "abs")},
    "fabs": _same("abs"),
    "tanh": tanh,
    "log1p": log1p,
    "expm1": expm1,
    "isnan": isnan,
    "isinf": isinf,
}


def install() -> list[str]:
    """Replace the interpreter-facing libdevice stubs (process-wide); the names replaced."""
    from triton.language.extra import libdevice

    for name, fn in REPLACEMENTS.items():
        setattr(libdevice, name, fn)
    return sorted(REPLACEMENTS)
