"""Duplicate and near-duplicate modules, so the pool holds each computation once and no benchmark task.

    from kernelzero.proposer.dedup import exact_key, near_key, BenchmarkIndex
    exact_key(source)      # same syntax tree (formatting, comments, docstrings ignored)
    near_key(source)       # same computation up to names, sizes, constants, spellings and glue

Two keys per module:
- **exact**: a hash of the normalised syntax tree (`ast.dump` of the module without docstrings), so two
  sources differing only in layout, comments or docstrings share it.
- **near**: a hash of the `Model` forward's *API sequence*, the canonical torch APIs (catalog.py) in the
  order they run (arguments before the call, submodules resolved to their layer type, helper methods
  followed), glue left out (views, copies, arithmetic, tensor creation, dropout), together with the number
  of forward inputs. Two modules are near-duplicates when these match: they differ only in variable and
  class names, sizes and constants, how an API is spelled (`F.relu(x)`, `torch.relu(x)`, `x.relu()`,
  `self.act(x)` with `self.act = nn.ReLU()`) and the reshapes and scalar arithmetic between the APIs.
  A different API, another order or another number of inputs is a different module. This is deliberately
  coarse for benchmarks: a training task with the same chain of ops as a KernelBench problem is rejected
  even if its glue differs.

`BenchmarkIndex` holds both keys of every task of the benchmark suites the user names; by default
KernelBench Levels 1-3 from `../shared/data/kernelbench.jsonl` (relative to the repository root or the
current folder) when that file exists. The benchmark's code is read at run time and never stored.
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from kernelzero.proposer.catalog import ApiTable, FileScanner, api_table, canonical, qualname, torch_api

KERNELBENCH_FILE = Path("..") / "shared" / "data" / "kernelbench.jsonl"


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    node.body = body[1:] or [ast.Pass()]
    return tree


def exact_key(source: str) -> str:
    """Hash of the normalised syntax tree; raises SyntaxError for unparseable sources."""
    tree = _strip_docstrings(ast.parse(source))
    return hashlib.sha256(ast.dump(tree, annotate_fields=False).encode()).hexdigest()[:16]


class _Sequencer:
    """Walks a class's forward in evaluation order, recording the sampled APIs it calls."""

    def __init__(self, scanner: FileScanner, cls: ast.ClassDef, table: ApiTable):
        self.scanner, self.table = scanner, table
        self.methods = scanner.methods(cls)
        self.subs = scanner.submodules(cls, 0)
        self.seq: list[str] = []
        self.seen = {"forward"}

    def visit(self, node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            self.visit(child)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            self._add("matmul")
        if isinstance(node, ast.Call):
            self._call(node.func)

    def _add(self, api: str) -> None:
        if self.table.sampled(api):
            self.seq.append(api)

    def _call(self, func: ast.AST) -> None:
        q = qualname(func, self.scanner.imports)
        if q:
            found = torch_api(q, self.table)
            if found:
                self._add(found[0])
            return
        if not isinstance(func, ast.Attribute):
            return
        if isinstance(func.value, ast.Name) and func.value.id == "self":
            if func.attr in self.subs:
                for api, _ in self.subs[func.attr]:
                    self._add(api)
            elif func.attr in self.methods and func.attr not in self.seen:
                self.seen.add(func.attr)
                for stmt in self.methods[func.attr].body:
                    self.visit(stmt)
            return
        name = canonical(func.attr)
        if name in self.table.category:
            self._add(name)


def api_sequence(source: str, class_name: str = "Model", table: ApiTable | None = None) -> tuple[str, ...] | None:
    """The sampled APIs `class_name`'s forward calls, in evaluation order; None without such a forward."""
    table = table or api_table()
    tree = ast.parse(source)
    scanner = FileScanner(tree, "", table)
    cls = scanner.classes.get(class_name)
    forward = scanner.methods(cls).get("forward") if cls else None
    if forward is None:
        return None
    seq = _Sequencer(scanner, cls, table)
    for stmt in forward.body:
        seq.visit(stmt)
    return tuple(seq.seq)


def _forward_inputs(source: str, class_name: str = "Model") -> int:
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    args = item.args
                    return len(args.posonlyargs) + len(args.args) - 1 + (1 if args.vararg else 0)
    return 0


def near_key(source: str, table: ApiTable | None = None) -> str | None:
    """Hash of (API sequence, forward input count) of `Model`; None when there is no Model.forward."""
    seq = api_sequence(source, table=table)
    if seq is None:
        return None
    blob = json.dumps([list(seq), _forward_inputs(source)])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass
class BenchmarkIndex:
    """Exact and near keys of benchmark tasks, each mapped to the task's name."""

    exact: dict[str, str] = field(default_factory=dict)
    near: dict[str, str] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)  # what was indexed, for provenance and messages

    def add_suite(self, spec: str | Path) -> int:
        """Index every task of a suite (tasks.load_suite spec); return how many were indexed."""
        from kernelzero.tasks import load_suite

        suite = load_suite(spec)
        table = api_table()
        count = 0
        for task in suite.tasks:
            try:
                self.exact.setdefault(exact_key(task.source), task.name)
                key = near_key(task.source, table)
            except SyntaxError:
                continue
            if key is not None:
                self.near.setdefault(key, task.name)
            count += 1
        self.sources.append(f"{spec} ({count} tasks)")
        return count

    def match(self, exact: str | None, near: str | None) -> str | None:
        """The benchmark task a module duplicates ("exact copy of X" / "near-duplicate of X"), else None."""
        if exact and exact in self.exact:
            return f"an exact copy of benchmark task {self.exact[exact]}"
        if near and near in self.near:
            return f"a near-duplicate of benchmark task {self.near[near]} (same API sequence and inputs)"
        return None


def default_benchmark() -> Path | None:
    """`../shared/data/kernelbench.jsonl` relative to the repository root or the current folder, if present."""
    repo = Path(__file__).resolve().parents[3]
    for base in (repo, Path.cwd()):
        path = (base / KERNELBENCH_FILE).resolve()
        if path.is_file():
            return path
    return None
