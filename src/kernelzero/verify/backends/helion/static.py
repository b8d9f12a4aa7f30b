"""Helion's kernel construct and its fallback rules, for the static check (`verify/static.py`).

In Helion the kernel language is PyTorch itself: torch ops inside a device loop (`for tile in hl.tile(...)`,
`hl.grid(...)`) of an `@helion.kernel` function are compiled into the generated Triton kernel. The same ops
anywhere else run as plain PyTorch, so a candidate "falls back" when it computes with PyTorch

- in `ModelNew.forward`, or a helper forward reaches, outside any Helion kernel (`torch.matmul(a, b)`, `a @ b`,
  `F.gelu(x)`, or a PyTorch module such as `self.linear(x)`);
- in the host code of a Helion kernel, outside its device loops (Helion runs that code as eager PyTorch).

Allocation, shape and dtype functions (`torch.empty`, `torch.zeros_like`, `torch.arange` ...) are allowed
everywhere. Tensor methods (`x.sum()`) cannot be told from other methods on the syntax tree; the worker's op
recorder sees them at run time (strict policy). Further rules: a Helion kernel must be reachable from
`ModelNew.forward` (else `no_kernel`); no autotuning during verification (`autotune_effort` other than "none", a
list of more than one config, calls of `.autotune(...)`); no ref mode (`ref_mode=`, `RefMode`: the kernel body as
eager PyTorch); no Helion or Triton settings through the environment (`"HELION_..."`, `"TRITON_..."` strings).
"""

from __future__ import annotations

import ast

from kernelzero.verify.static import Violation, dotted

KERNEL_DECORATORS = ("helion.kernel", "helion.jit", "helion.runtime.kernel")
DEVICE_LOOPS = ("tile", "grid")  # hl.tile(...), hl.grid(...): the body is the kernel
ALLOWED_TORCH = frozenset(
    """
empty empty_like empty_strided zeros zeros_like ones ones_like full full_like arange tensor as_tensor
finfo iinfo Size device dtype is_tensor is_floating_point broadcast_shapes result_type promote_types
""".split()
)
TORCH_ROOTS = ("torch", "F", "nn")
NN_NOT_COMPUTE = ("Parameter", "ParameterList", "ParameterDict", "ModuleList", "ModuleDict", "Buffer")
SETTING_PREFIXES = ("HELION_", "TRITON_")
AUTOTUNE = "autotunes: verification runs one config (give `config=helion.Config(...)`, or none for Helion's default)"
REF_MODE = "runs the kernel in Helion's ref mode (its body as eager PyTorch, no kernel)"
SETTINGS = "Helion and Triton settings are the verifier's"


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> what it stands for, from the module's imports (`import helion as h` -> h: helion)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _resolve(name: str, aliases: dict[str, str]) -> str:
    root, _, rest = name.partition(".")
    base = aliases.get(root, root)
    return f"{base}.{rest}" if rest else base


def _is_kernel(fn: ast.FunctionDef, aliases: dict[str, str]) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if _resolve(dotted(target), aliases) in KERNEL_DECORATORS:
            return True
    return False


def kernels(tree: ast.AST) -> dict[str, ast.FunctionDef]:
    """The `@helion.kernel` functions of a module (any alias: `@hk.kernel(...)`, `from helion import kernel`)."""
    aliases = _aliases(tree)
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _is_kernel(n, aliases)}


def has_kernel(tree: ast.AST) -> bool:
    """At least one `@helion.kernel` function."""
    return bool(kernels(tree))


def _reachable(tree: ast.Module, cls: ast.ClassDef) -> list[ast.FunctionDef]:
    """`forward` and every module function or `self.` method it reaches by name (Helion kernels excluded)."""
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    todo, seen = [methods["forward"]], []
    while todo:
        fn = todo.pop()
        if fn in seen:
            continue
        seen.append(fn)
        for node in ast.walk(fn):
            name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else ""
            if name in functions:
                todo.append(functions[name])
            elif name.startswith("self.") and name[5:] in methods:
                todo.append(methods[name[5:]])
    return seen


def _torch_modules(cls: ast.ClassDef, aliases: dict[str, str]) -> set[str]:
    """`self.X` attributes that `__init__` sets to a PyTorch module (`nn.Linear(...)`), parameters excluded."""
    found = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            called = _resolve(dotted(node.value.func), aliases)
            if called.startswith("torch.nn.") and called.split(".")[-1] not in NN_NOT_COMPUTE:
                found |= {dotted(t) for t in node.targets if dotted(t).startswith("self.")}
    return found


def _compute_calls(nodes: list[ast.AST], aliases: dict[str, str], modules: set[str]) -> list[tuple[int, str]]:
    """(line, what) for each PyTorch compute call or `@` among `nodes` (and everything under them)."""
    found = []
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                found.append((node.lineno, "the @ operator (a PyTorch matmul)"))
            if not isinstance(node, ast.Call):
                continue
            name = dotted(node.func)
            full = _resolve(name, aliases)
            if name in modules:
                found.append((node.lineno, f"the PyTorch module {name}"))
            elif full.startswith("torch.") and full.split(".")[-1] not in ALLOWED_TORCH:
                if not full.startswith(("torch.cuda.", "torch.nn.Parameter", "torch.Size")):
                    found.append((node.lineno, name))
    return found


def _host_code(fn: ast.FunctionDef, aliases: dict[str, str]) -> list[ast.AST]:
    """The parts of a Helion kernel outside its device loops (`for ... in hl.tile(...)` / `hl.grid(...)`)."""
    host: list[ast.AST] = []

    def visit(body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.For) and isinstance(stmt.iter, ast.Call):
                called = _resolve(dotted(stmt.iter.func), aliases)
                if called.startswith("helion.language.") and called.split(".")[-1] in DEVICE_LOOPS:
                    continue  # the device loop: the kernel language
            if isinstance(stmt, (ast.If, ast.While)):
                host.append(stmt.test)
            elif isinstance(stmt, ast.For):
                host.append(stmt.iter)
            elif isinstance(stmt, ast.With):
                host.extend(item.context_expr for item in stmt.items)
            else:
                host.append(stmt)
                continue
            visit(stmt.body)
            visit(stmt.orelse if not isinstance(stmt, ast.With) else [])

    visit(fn.body)
    return host


def _setting_rules(tree: ast.AST) -> list[Violation]:
    """Autotuning, ref mode and settings through the environment."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                value = kw.value.value if isinstance(kw.value, ast.Constant) else None
                if kw.arg == "autotune_effort" and value != "none":
                    found.append(Violation("autotune", node.lineno, AUTOTUNE))
                elif kw.arg == "configs" and not (
                    isinstance(kw.value, (ast.List, ast.Tuple)) and len(kw.value.elts) <= 1
                ):
                    found.append(Violation("autotune", node.lineno, AUTOTUNE))
                elif kw.arg == "ref_mode":
                    found.append(Violation("fallback", node.lineno, REF_MODE))
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("autotune", "autotune_multi", "set_config"):
                found.append(Violation("autotune", node.lineno, AUTOTUNE))
        elif isinstance(node, ast.Attribute) and node.attr == "RefMode":
            found.append(Violation("fallback", node.lineno, REF_MODE))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(SETTING_PREFIXES):
            found.append(Violation("settings", node.lineno, f"names the setting {node.value[:40]!r}: {SETTINGS}"))
    return found


def violations(tree: ast.Module) -> list[Violation]:
    """Helion's own rules (the module docstring): fallbacks, an unreachable kernel, autotuning, ref mode."""
    aliases = _aliases(tree)
    found = _setting_rules(tree)
    own = kernels(tree)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    methods = {n.name for n in classes[0].body if isinstance(n, ast.FunctionDef)} if classes else set()
    if not own or "forward" not in methods:
        return found  # no kernel at all: the no-kernel check says so; no ModelNew: the worker does
    cls = classes[0]
    reached = _reachable(tree, cls)
    names = {n.id for fn in reached for n in ast.walk(fn) if isinstance(n, ast.Name)}
    names |= {dotted(n) for fn in reached for n in ast.walk(fn) if isinstance(n, ast.Attribute)}
    if not names & set(own):
        found.append(
            Violation(
                "no-kernel", 0, f"ModelNew.forward reaches none of its @helion.kernel functions ({', '.join(own)})"
            )
        )
    modules = _torch_modules(cls, aliases)
    for line, what in _compute_calls([fn for fn in reached if fn.name not in own], aliases, modules):
        found.append(Violation("fallback", line, f"forward computes with PyTorch ({what}) outside a Helion kernel"))
    for kernel in own.values():
        for line, what in _compute_calls(_host_code(kernel, aliases), aliases, set()):
            found.append(
                Violation("fallback", line, f"{kernel.name} computes with PyTorch ({what}) outside its hl.tile loops")
            )
    return list({(v.rule, v.line): v for v in found}.values())  # one finding per rule and line
