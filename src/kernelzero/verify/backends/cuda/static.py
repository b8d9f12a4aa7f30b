"""CUDA's kernel construct, for the static check (`verify/static.py`)."""

from __future__ import annotations

import ast

from kernelzero.verify.static import dotted


def has_kernel(tree: ast.AST) -> bool:
    """A call of `load_inline` or `load` (any alias) or an import from `torch.utils.cpp_extension`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] in ("load_inline", "load"):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("cpp_extension"):
            return True
    return False
