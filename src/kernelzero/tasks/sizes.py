"""Size globals of a task module: find them, override them, scale them.

KernelBench modules keep their sizes in module-level assignments (`batch_size = 128`,
`N = 2048 * 2`, `height = width = 128`, `bias_shape = (out_channels, 1, 1)`). Overrides are applied
by rewriting those assignments in the module's syntax tree before it runs, so globals computed from
other globals (`bias_shape`) follow the new values. Finding the current values uses a tiny evaluator
of integer arithmetic over earlier globals: the caller's process never executes task code.

`--scale F` multiplies every integer size global of 16 or more by F and leaves small values (axes,
kernel sizes, strides) alone. Three rules keep shrunk problems valid: a power of two stays a power of
two (so group and head counts keep dividing channel counts), a multiple of 8 stays one, and no value
drops below 16 (spatial sizes stay larger than kernels). Equal values scale to equal values, and the
integers inside tuple globals (`input_shape = (32768,)`) scale too, so problems whose shapes rely on
two globals being equal stay consistent.
"""

from __future__ import annotations

import ast
import math
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


def _pairs(stmt: ast.stmt) -> list[tuple[str, ast.expr]]:
    """(name, value expression) pairs a top-level assignment makes, unpacking `a, b = 1, 2`."""
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
        return [(stmt.target.id, stmt.value)]
    if not isinstance(stmt, ast.Assign):
        return []
    out: list[tuple[str, ast.expr]] = []
    for target in stmt.targets:
        if isinstance(target, ast.Name):
            out.append((target.id, stmt.value))
        elif (
            isinstance(target, ast.Tuple)
            and isinstance(stmt.value, ast.Tuple)
            and len(target.elts) == len(stmt.value.elts)
        ):
            out += [(t.id, v) for t, v in zip(target.elts, stmt.value.elts) if isinstance(t, ast.Name)]
    return out


def _globals(source: str) -> dict[str, int | tuple]:
    env: dict[str, int | tuple] = {}
    for stmt in ast.parse(source).body:
        for name, expr in _pairs(stmt):
            ints = {k: v for k, v in env.items() if isinstance(v, int)}
            value: int | tuple | None = _eval_int(expr, ints)
            if value is None and isinstance(expr, ast.Tuple):
                items = [_eval_int(e, ints) for e in expr.elts]
                value = tuple(items) if items and all(i is not None for i in items) else None
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
    return env


def size_globals(source: str) -> dict[str, int]:
    """Module-level integer globals and their values, in order of assignment.

    >>> size_globals("N = 2048 * 2\\nh, w = 8, 9\\nshape = (N, 1)\\n")
    {'N': 4096, 'h': 8, 'w': 9}
    """
    return {k: v for k, v in _globals(source).items() if isinstance(v, int)}


def scale_value(value: int, factor: float) -> int:
    """One size scaled by the module's rules (see the module docstring)."""
    if value < SCALE_MIN_VALUE:
        return value
    target = value * factor
    if value & (value - 1) == 0:
        new = 2 ** round(math.log2(max(target, 1)))
    elif value % 8 == 0:
        new = round(target / 8) * 8
    else:
        new = round(target)
    return min(value, max(SCALE_MIN_VALUE, new))


def scaled_sizes(source: str, factor: float) -> dict[str, int | tuple]:
    """Overrides that shrink every size global >= 16 by `factor` (0 < factor <= 1)."""
    if not 0 < factor <= 1:
        raise SizeError(f"scale must be in (0, 1], got {factor}")
    out: dict[str, int | tuple] = {}
    for name, value in _globals(source).items():
        new = tuple(scale_value(v, factor) for v in value) if isinstance(value, tuple) else scale_value(value, factor)
        if new != value:
            out[name] = new
    return out


def check_overrides(source: str, sizes: dict[str, int]) -> None:
    """Raise SizeError if an override names no module-level integer global."""
    known = _globals(source)
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
        pairs = _pairs(stmt)
        if not any(name in sizes for name, _ in pairs):
            body.append(stmt)
            continue
        for name, value in pairs:
            if name in sizes:
                value = _literal(sizes[name])
            new = ast.Assign(targets=[ast.Name(name, ast.Store())], value=value)
            body.append(ast.copy_location(new, stmt))
    tree.body = body
    return ast.fix_missing_locations(tree)


def _literal(value) -> ast.expr:
    if isinstance(value, (list, tuple)):
        return ast.Tuple([ast.Constant(v) for v in value], ast.Load())
    return ast.Constant(value)


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
