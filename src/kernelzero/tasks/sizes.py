"""Size globals of a task module: find them, override them, scale them.

KernelBench modules keep their sizes in module-level assignments (`batch_size = 128`,
`N = 2048 * 2`, `height = width = 128`, `bias_shape = (out_channels, 1, 1)`). Overrides are applied
by rewriting those assignments in the module's syntax tree before it runs, so globals computed from
other globals (`bias_shape`) follow the new values. Finding the current values uses a tiny evaluator
of integer arithmetic over earlier globals: the caller's process never executes task code.

`--scale F` multiplies every integer size global of 16 or more by F (rounded, at least 1; a value
that was a multiple of 8 stays one where it can, since head counts and group counts often divide it)
and leaves small values (axes, kernel sizes, strides) alone.
"""

from __future__ import annotations

import ast
import operator

SCALE_MIN_VALUE = 16  # globals below this are axes, kernel sizes, strides: never scaled

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


class SizeError(ValueError):
    """An override names no size global, or a scale factor is out of range."""


def _eval_int(node: ast.expr, env: dict[str, int]) -> int | None:
    """The integer value of a constant arithmetic expression over known globals, else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _eval_int(node.operand, env)
        return None if value is None else -value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval_int(node.left, env), _eval_int(node.right, env)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Pow) and (right < 0 or right > 64):
            return None
        try:
            return _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            return None
    return None


def size_globals(source: str) -> dict[str, int]:
    """Module-level integer globals and their values, in order of assignment.

    >>> size_globals("N = 2048 * 2\\nh = w = 8\\nshape = (N, 1)\\n")
    {'N': 4096, 'h': 8, 'w': 8}
    """
    env: dict[str, int] = {}
    for stmt in ast.parse(source).body:
        if isinstance(stmt, ast.Assign):
            value = _eval_int(stmt.value, env)
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    if value is None:
                        env.pop(target.id, None)
                    else:
                        env[target.id] = value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            value = _eval_int(stmt.value, env)
            if value is not None:
                env[stmt.target.id] = value
    return env


def scaled_sizes(source: str, factor: float) -> dict[str, int]:
    """Overrides that shrink every size global >= 16 by `factor` (0 < factor <= 1)."""
    if not 0 < factor <= 1:
        raise SizeError(f"scale must be in (0, 1], got {factor}")
    out: dict[str, int] = {}
    for name, value in size_globals(source).items():
        if value < SCALE_MIN_VALUE:
            continue
        new = max(1, round(value * factor))
        if value % 8 == 0 and new >= 8:
            new = max(8, round(new / 8) * 8)
        if new != value:
            out[name] = new
    return out


def check_overrides(source: str, sizes: dict[str, int]) -> None:
    """Raise SizeError if an override names no module-level integer global."""
    known = size_globals(source)
    unknown = sorted(set(sizes) - set(known))
    if unknown:
        raise SizeError(f"no size global named {', '.join(unknown)}; size globals are: {', '.join(known) or '(none)'}")


def apply_sizes(tree: ast.Module, sizes: dict[str, int]) -> ast.Module:
    """Rewrite top-level assignments to the names in `sizes` (in place; returns the tree).

    `a = b = 128` with an override for `a` becomes `a = 64; b = 128`, each on the original line.
    """
    if not sizes:
        return tree
    body: list[ast.stmt] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in sizes for t in stmt.targets
        ):
            for target in stmt.targets:
                value: ast.expr = stmt.value
                if isinstance(target, ast.Name) and target.id in sizes:
                    value = ast.Constant(sizes[target.id])
                new = ast.Assign(targets=[target], value=value)
                body.append(ast.copy_location(new, stmt))
        else:
            body.append(stmt)
    tree.body = body
    return ast.fix_missing_locations(tree)


def parse_sizes(items: list[str]) -> dict[str, int]:
    """Parse `name=value` strings from the command line."""
    out: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SizeError(f"size override must look like name=value, got {item!r}")
        try:
            out[name.strip()] = int(value)
        except ValueError:
            raise SizeError(f"size {name.strip()!r} must be an integer, got {value!r}") from None
    return out
