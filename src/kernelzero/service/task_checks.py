"""The static checks a client's task code passes before the service takes it (POST /v1/verify answers 422).

    task_problem(source)    # "" when the task's code passes, else what is wrong, with line numbers (cached)
    tie_problem(tie_prone)  # "" when Task.tie_prone is well formed ({"2": "output 0 dim -1"}), else why not

A task's code is as untrusted as a candidate's. It runs only in the verifier's sandbox, in the reference role
(verify/judge/reference.py: its own uid, PID, mount and network namespaces); nothing of it is imported or run in
the server's process. These checks come first, at the door, so most hostile task code never reaches a judge:

- the task contract by syntax: a top-level `class Model` and functions `get_inputs` and `get_init_inputs`;
- no model downloads (`tasks.module.needs_download`);
- the candidate's Python rules (`verify.static.check_python`): no process, network, signal, native-code or
  dynamic-code modules and calls, no file writes, no introspection of the harness, no patching of libraries.

None of the 306 tasks of kz-basic (56) and KernelBench levels 1-3 (250) breaks them. Static checks can be evaded (a
determined task hides a name behind `getattr`); the sandbox is the defence, these are the explained first
filter. Parsing is the only thing done with the code here (`verify.static.parse`: one thread at a time, code
nested too deeply to parse refused as not valid Python).
"""

from __future__ import annotations

import ast
import functools

from kernelzero.tasks.module import needs_download, parse_tie_spec
from kernelzero.verify.static import check_python, parse

CONTRACT = {"Model": ast.ClassDef, "get_inputs": ast.FunctionDef, "get_init_inputs": ast.FunctionDef}


@functools.lru_cache(maxsize=1024)  # clients send one task with many candidates: checked once
def task_problem(source: str) -> str:
    """'' when the task's code passes the checks (see the module docstring), else the first findings. Costs a
    parse and a walk of the tree: 3 s for 256 KB of code (MAX_SOURCE_CHARS) on the 2-core test machine under a
    load of 11; the cache keeps that to once per distinct task."""
    try:
        tree = parse(source)
    except SyntaxError as exc:
        return f"not valid Python: line {exc.lineno}: {exc.msg}"
    defined = {node.name: type(node) for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    missing = [f"`{name}`" for name, kind in CONTRACT.items() if defined.get(name) is not kind]
    if missing:
        return f"the task defines no top-level {', '.join(missing)} (a task is a KernelBench-style module)"
    if needs_download(source):
        return "the task loads a pretrained model at run time; the service downloads nothing"
    found = check_python(source, tree)
    if not found:
        return ""
    more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
    return "refused by the static checks: " + "; ".join(f"line {v.line}: {v.message}" for v in found[:3]) + more


def tie_problem(tie_prone: dict[str, str]) -> str:
    """'' when every entry of `Task.tie_prone` is `"OUTPUT": "output N dim D" | "input N dim D"` (tasks/module.py),
    not selecting from its own output; else what is wrong (the judge would only fail on it later)."""
    for key, text in tie_prone.items():
        if not (key.isascii() and key.isdigit()):
            return f"key {key[:20]!r} is not an output index (0, 1, ...)"
        try:
            spec = parse_tie_spec(text)
        except ValueError as exc:
            return str(exc)
        if spec.source == "output" and spec.index == int(key):
            return f"output {key} cannot select from its own values"
    return ""
