"""Static checks of a candidate: a first, explained filter before anything runs.

Each rule is a reason, a pattern and a test (tests/verify/test_static.py). Static checks are
advisory in the sense that a determined candidate can hide from any pattern; the runtime checks in
the worker and the judge's comparison are the real defence. They exist because they are cheap, they
explain themselves (the Coder learns which construct is not allowed), and they stop the common
tricks before a sample spends GPU time.

Python rules work on the syntax tree, so spacing and aliases (`import gc as g`) do not hide names.
CUDA/C++ rules run on the source after its own macros are expanded (`cpp -P` with includes
removed), so `#define` and token pasting (`cuda##StreamCreate`) cannot hide a name.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass

from kernelzero.types import Backend
from kernelzero.verify.backends import backend_module, get_backend

FORBIDDEN_MODULES = {
    "gc": "inspects the harness's objects",
    "inspect": "walks frames of the harness",
    "ctypes": "calls native code directly",
    "cffi": "calls native code directly",
    "threading": "runs work outside the timed call",
    "_thread": "runs work outside the timed call",
    "multiprocessing": "runs work outside the sandboxed call",
    "concurrent": "runs work outside the timed call",
    "subprocess": "starts processes",
    "socket": "opens network connections",
    "signal": "handles signals",
    "atexit": "runs code at exit",
    "importlib": "loads modules dynamically",
    "builtins": "replaces builtins",
    "pickle": "deserialises objects",
    "marshal": "loads code objects",
    "mmap": "maps memory",
    "resource": "changes process limits",
    "faulthandler": "handles crashes",
    "sys": None,
}
FORBIDDEN_CALLS = {
    "eval": "runs code built at run time",
    "exec": "runs code built at run time",
    "compile": "builds code at run time",
    "__import__": "imports modules dynamically",
    "globals": "reaches the module namespace",
    "setattr": "patches attributes by name",
    "delattr": "removes attributes by name",
    "vars": "reaches objects' namespaces",
    "breakpoint": "starts a debugger",
}
FORBIDDEN_ATTRS = {
    "_getframe": "walks frames",
    "f_back": "walks frames",
    "f_locals": "reads another frame's variables",
    "f_globals": "reads another frame's variables",
    "__subclasses__": "walks the class hierarchy",
    "__globals__": "reads a function's module namespace",
    "__code__": "rewrites code objects",
    "__builtins__": "reaches builtins",
    "modules": None,
    "_exit": "exits the process early",
    "system": None,
    "fork": "starts processes",
    "_fork": "runs work on torch's inter-op threads, outside the timed call",
    "kill": "signals processes",
    "write": None,
    "settrace": "traces the harness",
    "setprofile": "traces the harness",
    "__dict__": "patches by namespace",
    "set_flush_denormal": "flips global numeric flags",
}
PATCHABLE_ROOTS = {"torch", "time", "triton", "tl", "F", "nn", "os", "sys", "math", "np", "numpy"}
OS_FORBIDDEN = {"_exit", "system", "fork", "kill", "write", "execv", "execve", "popen", "spawnv", "dup2", "setsid"}
TORCH_COMPUTE_HINT = re.compile(r"^(torch|F|nn\.functional|torch\.nn\.functional)\.")
CPP_RULES = [
    (
        re.compile(
            r"\bstd\s*::\s*(thread|async|jthread)\b|\bpthread_create\b|\bat\s*::\s*(launch|intraop_launch)\b"
            r"|\bThreadPool\b|\bcudaLaunchHostFunc\b|\bcudaStreamAddCallback\b"
        ),
        "starts a native thread",
    ),
    (
        re.compile(r"\bcudaStreamCreate\w*|\bgetStreamFromPool\b|\bcudaStreamPerThread\b|\bcudaStreamLegacy\b"),
        "uses its own CUDA stream",
    ),
    (re.compile(r"\b(system|popen|fork|execv\w*|dlopen|dlsym|ptrace|mprotect)\s*\("), "calls into the OS"),
    (re.compile(r"\b(exit|_exit|abort|quick_exit)\s*\("), "exits the process"),
    (re.compile(r"\bf?open\s*\(|\bstd\s*::\s*ofstream\b"), "opens files"),
    (re.compile(r"\bcudaEvent(Record|ElapsedTime|Synchronize)\b"), "touches timing events"),
    (
        re.compile(r"\bcudaDeviceSetLimit\b|\bcudaCtxResetPersistingL2Cache\b|accessPolicyWindow"),
        "changes device settings",
    ),
]


_PARSE = threading.Lock()  # CPython 3.11 keeps the AST constructor's recursion depth per interpreter, not per
# thread: two threads parsing at once raised "SystemError: AST constructor recursion depth mismatch" (issue 27)


def parse(source: str) -> ast.Module:
    """`ast.parse`, one thread of this process at a time. SyntaxError also for code nested too deeply to build a
    tree of (a `1+1+...` of 60,000 terms makes ast.parse raise RecursionError): it is not valid Python for us."""
    with _PARSE:
        try:
            return ast.parse(source)
        except (RecursionError, MemoryError):
            raise SyntaxError("the code is nested too deeply to parse", ("<source>", 1, 1, "")) from None


@dataclass(frozen=True)
class Violation:
    """One static finding."""

    rule: str  # short rule id, e.g. "forbidden-import"
    line: int  # 1-based line in the candidate (0 for CUDA sources)
    message: str  # what was found and why it is not allowed


def dotted(node: ast.AST) -> str:
    """`a.b.c` for a name or attribute chain, else ''."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[Violation] = []
        self.aliases: dict[str, str] = {}  # local name -> module

    def add(self, node: ast.AST, rule: str, message: str) -> None:
        self.found.append(Violation(rule, getattr(node, "lineno", 0), message))

    def _module(self, node: ast.AST, name: str) -> None:
        root = name.split(".")[0]
        reason = FORBIDDEN_MODULES.get(root)
        if root in FORBIDDEN_MODULES and reason:
            self.add(node, "forbidden-import", f"imports {name}: {reason}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(node, alias.name)
            self.aliases[alias.asname or alias.name.split(".")[0]] = alias.name
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._module(node, module)
        if module in ("os", "sys"):
            for alias in node.names:
                if alias.name in OS_FORBIDDEN or alias.name in ("modules", "_getframe", "settrace"):
                    self.add(node, "forbidden-import", f"imports {module}.{alias.name}")
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = dotted(node.func)
        if name in FORBIDDEN_CALLS:
            self.add(node, "dynamic-code", f"calls {name}(): {FORBIDDEN_CALLS[name]}")
        if name == "open" and any(
            isinstance(a, ast.Constant) and isinstance(a.value, str) and set(a.value) & set("wax+")
            for a in node.args[1:2] + [k.value for k in node.keywords if k.arg == "mode"]
        ):
            self.add(node, "file-write", "opens a file for writing (files can shadow modules or results)")
        if name.endswith((".write_text", ".write_bytes")):
            self.add(node, "file-write", f"writes a file ({name})")
        if name in ("Model", "kz_task.Model") or name.endswith(".Model"):
            self.add(node, "reference-use", "instantiates the reference `Model`")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        base = dotted(node.value)
        module = self.aliases.get(base.split(".")[0], base)
        if node.attr in FORBIDDEN_ATTRS:
            reason = FORBIDDEN_ATTRS[node.attr]
            if reason:
                self.add(node, "introspection", f"uses .{node.attr}: {reason}")
            elif node.attr == "modules" and module.startswith("sys"):
                self.add(node, "introspection", "touches sys.modules")
            elif module.split(".")[0] == "os" and node.attr in OS_FORBIDDEN:
                self.add(node, "process-control", f"calls os.{node.attr}")
        elif module.split(".")[0] == "os" and node.attr in OS_FORBIDDEN:
            self.add(node, "process-control", f"calls os.{node.attr}")
        if module.split(".")[0] == "sys" and node.attr in ("_getframe", "settrace", "setprofile", "modules", "exit"):
            self.add(node, "introspection", f"uses sys.{node.attr}")
        self.generic_visit(node)

    def _assign_targets(self, node: ast.AST, targets: list[ast.expr]) -> None:
        for target in targets:
            if isinstance(target, ast.Attribute):
                root = dotted(target).split(".")[0]
                if root in PATCHABLE_ROOTS or self.aliases.get(root, "").split(".")[0] in PATCHABLE_ROOTS:
                    self.add(node, "monkeypatch", f"assigns {dotted(target)}: patches a library the harness uses")

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assign_targets(node, node.targets)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._assign_targets(node, [node.target])
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            if dotted(base).split(".")[-1] == "Model":
                self.add(node, "reference-use", f"class {node.name} subclasses the reference `Model`")
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        for handler in node.handlers:
            calls = [
                dotted(n.func)
                for n in ast.walk(ast.Module(body=handler.body, type_ignores=[]))
                if isinstance(n, ast.Call)
            ]
            fallback = [
                c for c in calls if TORCH_COMPUTE_HINT.match(c) and not c.startswith(("torch.empty", "torch.zeros"))
            ]
            if fallback:
                self.add(handler, "fallback", f"falls back to PyTorch ({fallback[0]}) when a kernel fails")
        self.generic_visit(node)


def check_python(source: str, tree: ast.Module | None = None) -> list[Violation]:
    """Violations in a candidate's Python source (empty when clean or unparsable); `tree`: its syntax tree, when the
    caller parsed it already."""
    try:
        tree = tree or parse(source)
    except SyntaxError:
        return []
    visitor = _Visitor()
    visitor.visit(tree)
    return visitor.found


def _expand_macros(source: str) -> str:
    """The source with its own macros expanded (includes dropped), or the source as is without cpp."""
    cpp = shutil.which("cpp")
    if not cpp:
        return source
    body = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#include"))
    try:
        out = subprocess.run(
            [cpp, "-P", "-undef", "-w", "-xc++", "-"], input=body, capture_output=True, text=True, timeout=20
        )
    except (subprocess.TimeoutExpired, OSError):
        return source
    return out.stdout if out.returncode == 0 else source


def check_cpp(sources: list[str]) -> list[Violation]:
    """Violations in CUDA / C++ sources, after macro expansion (and before, for what cpp drops)."""
    found = []
    for source in sources:
        text = _expand_macros(source) + "\n" + source
        for pattern, reason in CPP_RULES:
            match = pattern.search(text)
            if match:
                found.append(Violation("native", 0, f"CUDA/C++ source {reason} ({match.group(0).strip()})"))
    return found


def string_literals(source: str) -> list[str]:
    """String constants of a Python source long enough to hold C++ code (load_inline sources)."""
    try:
        tree = parse(source)
    except SyntaxError:
        return []
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and len(n.value) > 40
        and ("{" in n.value or "#" in n.value)
    ]


def has_kernel_construct(source: str, backend: Backend | str) -> bool:
    """Does the syntax tree (not a comment or a string) hold the backend's kernel construct?

    Each backend says what its construct is (`backends/<name>/static.py`, `has_kernel(tree)`).
    """
    record = get_backend(backend) if isinstance(backend, str) else backend
    try:
        tree = parse(source)
    except SyntaxError:
        return True  # the format check reports it
    return backend_module(record, "static").has_kernel(tree)


def check_candidate(source: str, backend: Backend | str) -> list[Violation]:
    """All static violations of a candidate; also requires the backend's kernel construct.

    The native-code rules run on every candidate's long string literals, whatever its backend: a Triton
    candidate can carry C++ too.
    """
    record = get_backend(backend) if isinstance(backend, str) else backend
    found = check_python(source) + check_cpp(string_literals(source))
    if not has_kernel_construct(source, record):
        found.append(Violation("no-kernel", 0, record.kernel_hint))
    own_rules = getattr(backend_module(record, "static"), "violations", None)  # optional: the language's own rules
    if own_rules is not None:
        try:
            found += own_rules(parse(source))
        except SyntaxError:
            pass  # the format check reports it
    return found
