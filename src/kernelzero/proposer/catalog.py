"""Which torch APIs a module's `forward` uses, read from the syntax tree (nothing is imported or run).

    from kernelzero.proposer.catalog import extract_modules, api_table
    for use in extract_modules(source, where="model.py"):
        print(use.name, use.apis)        # {"gelu": {"functional": 1}, "linear": {"module": 2}, ...}

Aliases resolve to one canonical name (the `torch.nn.functional` spelling where there is one), and the form
of each use is kept: `F.relu(x)` is ("relu", "functional"), `torch.relu(x)` ("relu", "torch"), `x.relu()`
("relu", "method"), `self.act(x)` with `self.act = nn.ReLU()` ("relu", "module"), `a @ b` ("matmul",
"operator"). In-place spellings (`x.relu_()`) count as the plain op. Submodules are followed: an attribute
set in `__init__` to an `nn` layer, an `nn.Sequential`/`ModuleList` of layers, or a class of the same file
contributes that class's APIs when `forward` calls it; so do helper methods of the class (`self._attn(...)`).

The canonical names, their categories and the `nn` classes that stand for each live in `apis.json`
(package data). A method call counts only when its name is a known API (so `cache.update(...)` is not one).
Glue (`GLUE`: views, copies, tensor creation, plain arithmetic, dropout) is recorded but never sampled and
never counts as an API beyond a sampled set.
"""

from __future__ import annotations

import ast
import functools
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from importlib import resources

GLUE = frozenset({"layout", "creation", "arithmetic", "dropout", "other"})
FORMS = ("functional", "torch", "method", "module", "operator")
_TORCH_NAMESPACES = ("torch.nn.functional.", "torch.special.", "torch.linalg.", "torch.")
_MAX_DEPTH = 4  # how deep submodules and helper methods are followed


@dataclass(frozen=True)
class ApiTable:
    """The contents of apis.json, indexed."""

    category: dict[str, str]  # canonical API name -> category
    modules: dict[str, str]  # nn.Module class name ("Conv2d") -> canonical API name ("conv2d")
    containers: frozenset[str]  # nn.Sequential, nn.ModuleList, nn.ModuleDict
    ranking: frozenset[str]  # APIs whose outputs include ranks or indices (tie-prone when returned)

    def category_of(self, name: str) -> str:
        return self.category.get(name, "other")

    def sampled(self, name: str) -> bool:
        """True for APIs a pool may sample (not glue)."""
        return self.category_of(name) not in GLUE


@functools.cache
def api_table() -> ApiTable:
    """The bundled table of canonical names and categories (apis.json)."""
    data = json.loads((resources.files("kernelzero.proposer") / "apis.json").read_text(encoding="utf-8"))
    category = {name: cat for cat, names in data["categories"].items() for name in names}
    return ApiTable(category, dict(data["modules"]), frozenset(data["containers"]), frozenset(data["ranking_outputs"]))


def canonical(name: str) -> str:
    """`relu_` -> `relu` (in-place spelling), other names unchanged."""
    return name[:-1] if name.endswith("_") and not name.startswith("_") and len(name) > 1 else name


@dataclass
class ModuleUse:
    """The APIs one nn.Module class's forward uses (directly or through its submodules)."""

    name: str  # class name
    where: str  # file or task it came from
    apis: dict[str, dict[str, int]] = field(default_factory=dict)  # api -> {form: count}

    def add(self, api: str, form: str, count: int = 1) -> None:
        forms = self.apis.setdefault(api, {})
        forms[form] = forms.get(form, 0) + count


def _imports(tree: ast.Module) -> dict[str, str]:
    """Local name -> qualified torch name for the file's torch imports (`F` -> `torch.nn.functional`)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "torch":
                    if alias.asname:
                        names[alias.asname] = alias.name
                    else:
                        names["torch"] = "torch"
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "torch":
                for alias in node.names:
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def qualname(node: ast.AST, imports: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return imports.get(node.id)
    if isinstance(node, ast.Attribute):
        base = qualname(node.value, imports)
        return f"{base}.{node.attr}" if base else None
    return None


def torch_api(qualname: str, table: ApiTable) -> tuple[str, str] | None:
    """(api, form) of a qualified callee such as `torch.nn.functional.gelu`, or None."""
    if qualname.startswith("torch.nn.") and not qualname.startswith("torch.nn.functional."):
        cls = qualname.rsplit(".", 1)[1]
        return (table.modules[cls], "module") if cls in table.modules else None
    for prefix in _TORCH_NAMESPACES:
        if qualname.startswith(prefix):
            rest = qualname[len(prefix) :]
            if "." in rest or not rest or rest[0].isupper():
                return None
            return canonical(rest), "functional" if prefix == "torch.nn.functional." else "torch"
    return None


class FileScanner:
    """Resolves the classes of one parsed file; results are memoised per class."""

    def __init__(self, tree: ast.Module, where: str, table: ApiTable):
        self.table, self.where = table, where
        self.imports = _imports(tree)
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        self.memo: dict[str, dict[str, dict[str, int]]] = {}

    def methods(self, cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
        return {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def _ctor(self, call: ast.AST, depth: int) -> list[tuple[str, str]] | str | None:
        """What `self.x = CALL` holds: [(api, form)] for nn layers (containers flattened), a local class name."""
        if not isinstance(call, ast.Call):
            return None
        q = qualname(call.func, self.imports)
        if q:
            cls = q.rsplit(".", 1)[-1]
            if cls in self.table.containers:
                inner: list[tuple[str, str]] = []
                for arg in call.args:
                    items = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
                    for item in items:
                        got = self._ctor(item, depth)
                        inner += got if isinstance(got, list) else self._class_apis(got, depth + 1)
                return inner
            found = torch_api(q, self.table)
            return [found] if found and found[1] == "module" else None
        if isinstance(call.func, ast.Name) and call.func.id in self.classes:
            return call.func.id
        return None

    def _class_apis(self, name: str | None, depth: int) -> list[tuple[str, str]]:
        if not name or name not in self.classes or depth > _MAX_DEPTH:
            return []
        apis = self.class_apis(name, depth)
        return [(api, "module") for api in apis]

    def submodules(self, cls: ast.ClassDef, depth: int) -> dict[str, list[tuple[str, str]]]:
        init = self.methods(cls).get("__init__")
        subs: dict[str, list[tuple[str, str]]] = {}
        for node in ast.walk(init) if init else ():
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    got = self._ctor(node.value, depth)
                    subs[target.attr] = got if isinstance(got, list) else self._class_apis(got, depth + 1)
        return subs

    def class_apis(self, name: str, depth: int = 0) -> dict[str, dict[str, int]]:
        """api -> {form: count} for the forward of class `name` of this file."""
        if name in self.memo:
            return self.memo[name]
        self.memo[name] = {}  # a cycle (a class holding itself) ends here
        cls = self.classes[name]
        methods = self.methods(cls)
        use = ModuleUse(name, self.where)
        if "forward" in methods:
            subs = self.submodules(cls, depth)
            self._scan(methods["forward"], methods, subs, use, depth, seen={"forward"})
        self.memo[name] = use.apis
        return use.apis

    def _scan(self, fn: ast.AST, methods: dict, subs: dict, use: ModuleUse, depth: int, seen: set[str]) -> None:
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                use.add("matmul", "operator")
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            q = qualname(func, self.imports)
            if q:
                found = torch_api(q, self.table)
                if found:
                    use.add(*found)
                continue
            if not isinstance(func, ast.Attribute):
                continue
            if isinstance(func.value, ast.Name) and func.value.id == "self":
                if func.attr in subs:
                    for api, form in subs[func.attr]:
                        use.add(api, form)
                elif func.attr in methods and func.attr not in seen and depth < _MAX_DEPTH:
                    seen.add(func.attr)
                    self._scan(methods[func.attr], methods, subs, use, depth + 1, seen)
                continue
            name = canonical(func.attr)
            if name in self.table.category:
                use.add(name, "method")


def extract_modules(source: str, where: str = "", table: ApiTable | None = None) -> list[ModuleUse]:
    """One ModuleUse per class with a `forward` in `source` (empty ones dropped); SyntaxError propagates."""
    table = table or api_table()
    tree = ast.parse(source)
    scanner = FileScanner(tree, where, table)
    out = []
    for name, cls in scanner.classes.items():
        if any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in cls.body):
            apis = scanner.class_apis(name)
            if apis:
                out.append(ModuleUse(name, where, {k: dict(v) for k, v in apis.items()}))
    return out


def forward_apis(source: str, class_name: str = "Model", table: ApiTable | None = None) -> dict[str, dict[str, int]]:
    """The APIs of one class's forward (KernelBench's `Model` by default); {} if it is absent."""
    table = table or api_table()
    scanner = FileScanner(ast.parse(source), "", table)
    return scanner.class_apis(class_name) if class_name in scanner.classes else {}


def summarise_uses(uses: list[ModuleUse], table: ApiTable | None = None) -> dict[str, dict]:
    """api -> {"category", "count" (modules using it), "forms" (uses per form)} over a corpus."""
    table = table or api_table()
    count: Counter = Counter()
    forms: dict[str, Counter] = defaultdict(Counter)
    for use in uses:
        for api, by_form in use.apis.items():
            count[api] += 1
            forms[api].update(by_form)
    return {
        api: {"category": table.category_of(api), "count": count[api], "forms": dict(forms[api])}
        for api in sorted(count)
    }
