"""The package's structure, kept by tests: one-way edges between layers, no import circles, a worker that loads
little of kernelzero, and small modules and functions (docs/architecture.md describes the picture).

Every import of a kernelzero module counts, at module level or inside a function; imports under
`if TYPE_CHECKING:` do not (they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "kernelzero"

# Lower layers never import higher ones; packages of one layer do not import each other.
LAYERS = [
    ("kernelzero", "kernelzero.types", "kernelzero.extract"),
    ("kernelzero.tasks",),
    ("kernelzero.verify", "kernelzero.coder", "kernelzero.metrics", "kernelzero.rewards"),
    ("kernelzero.proposer", "kernelzero.service"),
    ("kernelzero.report",),  # reads run folders; evaluation prints its tables at the end of a run
    ("kernelzero.env",),  # the multi-turn environment: evaluation and optimize step through it
    ("kernelzero.evaluation", "kernelzero.optimize"),
    ("kernelzero.train",),
    ("kernelzero.cli",),
    ("kernelzero.__main__",),
]
# What the candidate's worker may import from kernelzero (besides the packages' own __init__ files).
WORKER_ALLOWED = (  # channel_auth: the worker tags its replies with the judge's key
    "kernelzero.verify.worker",
    "kernelzero.verify.sandbox.channel",
    "kernelzero.verify.sandbox.channel_auth",
    "kernelzero.verify.sandbox.values",
    "kernelzero.verify.sandbox.cuda_ipc",
)
WORKER_RECORDS = ("kernelzero.types",)
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
LONG_REASON = "Long because"  # a longer function says why in its docstring, starting with these words


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "suites" not in p.parts}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The kernelzero modules `name` imports (resolved to modules where `from X import Y` names one)."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("kernelzero"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if not base.startswith("kernelzero"):
                continue
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    found.discard(name)
    return found


def layer_of(module: str) -> tuple[int, str]:
    best = (-1, "")
    for index, packages in enumerate(LAYERS):
        for package in packages:
            if (module == package or module.startswith(package + ".")) and len(package) > len(best[1]):
                best = (index, package)
    if best[0] < 0:
        raise AssertionError(f"{module} belongs to no layer: add its package to LAYERS and docs/architecture.md")
    return best


def graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    assert cycles(graph()) == []


def test_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_edges_run_down_the_layers():
    wrong = []
    for module, targets in graph().items():
        here, package = layer_of(module)
        for target in targets:
            there, other = layer_of(target)
            if other != package and there >= here and not package.startswith(other + "."):
                wrong.append(f"{module} -> {target}")
    assert wrong == [], "imports against the layer order (see docs/architecture.md):\n" + "\n".join(sorted(wrong))


def test_layer_check_catches_an_upward_edge():
    assert layer_of("kernelzero.verify.judge.judge")[0] < layer_of("kernelzero.service.pool")[0]
    assert layer_of("kernelzero.types")[0] == 0


def test_worker_side_imports_only_its_own_part():
    edges = graph()
    allowed = WORKER_ALLOWED + WORKER_RECORDS
    wrong = [
        f"{module} -> {target}"
        for module, targets in edges.items()
        if module.startswith("kernelzero.verify.worker")
        for target in targets
        if not any(target == a or target.startswith(a + ".") for a in allowed)
    ]
    assert wrong == []


def test_worker_process_loads_little_of_kernelzero():
    import subprocess
    import sys

    code = "import sys, kernelzero.verify.worker.worker; print(sorted(m for m in sys.modules if m.startswith('kernelzero')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=SRC)
    loaded = ast.literal_eval(out.stdout.strip())
    packages = {"kernelzero", "kernelzero.verify", "kernelzero.verify.sandbox"}
    extra = [m for m in loaded if m not in packages and not m.startswith(WORKER_ALLOWED + WORKER_RECORDS)]
    assert extra == []


def test_modules_are_small():
    big = {
        name: n for name, path in all_modules().items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert big == {}


@pytest.mark.parametrize("name", sorted(all_modules()))
def test_long_functions_say_why(name):
    tree = ast.parse(all_modules()[name].read_text())
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
        and LONG_REASON not in (ast.get_docstring(node) or "")
    ]
    assert long == []
