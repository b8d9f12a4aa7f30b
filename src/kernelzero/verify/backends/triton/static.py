"""Triton's kernel construct, for the static check (`verify/static.py`)."""

from __future__ import annotations

import ast

from kernelzero.verify.static import dotted

DECORATORS = ("jit", "autotune", "heuristics")


def has_kernel(tree: ast.AST) -> bool:
    """A function decorated with `jit`, `autotune` or `heuristics` (any alias: `@tl_jit`, `@triton.jit(...)`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if dotted(target).split(".")[-1] in DECORATORS:
                    return True
    return False
