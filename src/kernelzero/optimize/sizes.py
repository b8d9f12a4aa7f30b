"""Size variants of a task: its sizes halved and doubled, so a kernel that only works at one size is caught.

    variants, notes = size_variants(task)      # [("half", Task), ("double", Task)] where the module has sizes

A kernel can be correct at the size it was tested at and wrong elsewhere: a hard-coded element count, a grid
computed for one shape, a missing mask on the tail block. `kernelzero optimize` re-verifies its finalists at the
task's own sizes and at these variants, and never picks a kernel that fails any of them.

Which globals change: the module-level integer globals assigned a constant (`batch = 128`, `N = 2048 * 2`,
`shape = (32768,)`) of 16 or more (smaller ones are axes, kernel sizes, strides, head counts); globals computed
from other globals (`hidden = 4 * dim`) follow their inputs. Halving follows `tasks.sizes.scale_value` (a power of
two stays one, a multiple of 8 stays one, nothing drops below 16); doubling keeps both properties too. A variant
that changes nothing (every size already at 16: no half) is left out, and a note says why. Whether the module *allows* a
variant (a shape constraint, memory) is for the contract check to say (`optimize.run`), not this module.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from kernelzero.tasks import size_globals
from kernelzero.tasks.sizes import SCALE_MIN_VALUE, scale_value
from kernelzero.types import Task

VARIANTS = ("half", "double")


def _has_name(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) for n in ast.walk(node))


def root_sizes(task: Task) -> dict[str, int | tuple[int, ...]]:
    """The size globals set by constants (see the module docstring), with the task's overrides applied."""
    values = {**size_globals(task.source), **task.sizes}
    roots: dict[str, int | tuple[int, ...]] = {}
    for stmt in ast.parse(task.source).body:
        if not isinstance(stmt, ast.Assign):
            continue
        for target in stmt.targets:
            pairs = []
            if isinstance(target, ast.Name):
                pairs = [(target.id, stmt.value)]
            elif isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple):
                pairs = [(t.id, v) for t, v in zip(target.elts, stmt.value.elts) if isinstance(t, ast.Name)]
            for name, value in pairs:
                roots.pop(name, None)  # a later assignment decides
                if _has_name(value):
                    continue
                if name in task.sizes:
                    roots[name] = task.sizes[name]
                elif name in values:
                    roots[name] = values[name]
                elif isinstance(value, ast.Tuple):
                    try:
                        items = ast.literal_eval(value)
                    except ValueError:
                        continue
                    if all(type(i) is int for i in items):
                        roots[name] = tuple(items)
    return roots


def _double(value: int) -> int:
    return value * 2 if value >= SCALE_MIN_VALUE else value


def _scaled(value: int | tuple[int, ...], how: str) -> int | tuple[int, ...]:
    one = _double if how == "double" else (lambda v: scale_value(v, 0.5))
    return tuple(one(v) for v in value) if isinstance(value, tuple) else one(value)


def size_variants(task: Task) -> tuple[list[tuple[str, Task]], list[str]]:
    """([(name, task at those sizes)] for "half" and "double" where they change something, notes on the rest)."""
    roots = root_sizes(task)
    if not any(
        v >= SCALE_MIN_VALUE for value in roots.values() for v in (value if isinstance(value, tuple) else [value])
    ):
        return [], [f"the module has no size global of {SCALE_MIN_VALUE} or more: verified at its own sizes only"]
    variants, notes = [], []
    for how in VARIANTS:
        changed = {k: _scaled(v, how) for k, v in roots.items()}
        changed = {k: v for k, v in changed.items() if v != roots[k]}
        if not changed:  # only halving can change nothing: every size global is at the floor
            notes.append(f"{how}: every size global is at the floor of {SCALE_MIN_VALUE}; nothing to halve")
            continue
        variants.append((how, replace(task, name=f"{task.name}@{how}", sizes={**task.sizes, **changed})))
    return variants, notes


def describe_sizes(task: Task) -> str:
    """`rows=256, cols=512`: the task's root sizes, for reports."""
    return ", ".join(f"{k}={v}" for k, v in root_sizes(task).items()) or "(no size globals)"
