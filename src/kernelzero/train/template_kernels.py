"""Known-good Triton kernels for the template Proposer's elementwise modules (the tiny Coder's warm start).

    kernel = template_kernel(write_module(("gelu", "silu"), 0))   # a ModelNew source, or None
    pairs = template_tasks(pool_rows, count=2)                    # [(Task, kernel)] for the warm start

The CPU co-evolution round (configs/tiny-cpu.yaml, CI) needs a Coder that solves some of the Proposer's first
proposals some of the time, so that p lies strictly between 0 and 1 and the Coder's phase has groups with
signal. Its tiny Coder cannot learn that from the miniature tasks alone: the Proposer's modules are written by
proposer/generator.py, in another shape. So the Coder's warm start also fits the template modules of the API
sets the Proposer is warm-started on, each with a fused Triton kernel written here, one kernel line per forward
line (the table KERNEL_LINES, keyed by API). Only chains of one-input elementwise steps are written (the tiny
configs' vocabulary); anything else gives None. tests/train checks that every kernel passes `kernelzero verify`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

from kernelzero.train.miniature import elementwise_solution
from kernelzero.types import Task

# API -> the kernel line of its template forward line (proposer/genops.py's OPS[api].forward with x)
KERNEL_LINES = {
    "relu": "x = tl.maximum(x, 0.0)",
    "sigmoid": "x = tl.sigmoid(x)",
    "tanh": "x = 2.0 * tl.sigmoid(2.0 * x) - 1.0",
    "exp": "x = tl.exp(x * 0.5)",
    "abs": "x = tl.abs(x) - 0.5",
    "gelu": "x = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))",
    "silu": "x = x * tl.sigmoid(x)",
    "softplus": "x = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x)))",
}


def _forward_lines() -> dict[str, str]:
    from kernelzero.proposer.genops import OPS

    return {ast.unparse(ast.parse(OPS[api].forward.format(x="x"))): line for api, line in KERNEL_LINES.items()}


def template_kernel(source: str) -> str | None:
    """A ModelNew computing `source`'s forward in one fused Triton kernel, when it is a chain of KERNEL_LINES
    steps on one input `x` returning `x`; else None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    forward = next((n for n in (model.body if model else []) if getattr(n, "name", "") == "forward"), None)
    if not isinstance(forward, ast.FunctionDef) or [a.arg for a in forward.args.args] != ["self", "x"]:
        return None
    *steps, last = forward.body
    if ast.unparse(last) != "return x" or not steps:
        return None
    table = _forward_lines()
    lines = [table.get(ast.unparse(s)) for s in steps]
    if any(line is None for line in lines):
        return None
    return elementwise_solution([line for line in lines if line], two=False)


def template_tasks(pool: Iterable[dict[str, Any]], count: int, variants: int = 1) -> list[tuple[Task, str]]:
    """(task, kernel) for the template modules the tiny Proposer's warm start fits (`generator.template_modules`:
    seeds 0..variants-1 of the first `count` API sets the writer writes, each module once), but those this module
    cannot write a kernel for. Seed 0's task is `template/<apis>`, seed k's `template/<apis>_k`."""
    from kernelzero.proposer.generator import template_modules

    out = []
    for apis, modules in template_modules(pool, count, variants):
        for seed, source in modules:
            kernel = template_kernel(source)
            if kernel:
                name = f"template/{'+'.join(apis)}" + (f"_{seed}" if seed else "")
                out.append((Task(name=name, source=source), kernel))
    return out
