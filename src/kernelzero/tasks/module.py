"""Run a task's source as a module, with size overrides, and pull out its contract.

Only child processes call this (the contract check, the verifier's trusted judge): it executes the
task's code. The source is written to a real file first so tracebacks show its lines, and Triton or
`inspect` can read it back.

Tie-prone outputs: a task whose output holds indices chosen by comparing scores (top-k, argmax, sort) marks
it with a module global read without running the module (`tie_prone_of`, the loaders put it in
`Task.tie_prone`), e.g. `TIE_PRONE = {2: "output 0 dim -1"}`: output 2 indexes the scores in the reference's
output 0 along its last dim (or `input N`: the N-th input). The verifier then judges that output by the
reference's scores at the indices it holds (verify/judge/compare.py), so near-ties may go either way.
"""

from __future__ import annotations

import ast
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelzero.tasks.sizes import apply_sizes

DOWNLOAD_MARKERS = ("from_pretrained", "AutoModel", "AutoConfig", "hf_hub_download")


TIE_PRONE = "TIE_PRONE"  # the module global marking tie-prone outputs
_TIE_SPEC = re.compile(r"^(input|output) (\d+) dim (-?\d+)$")


@dataclass(frozen=True)
class TieSpec:
    """Where the scores a tie-prone index output selects from are."""

    source: str  # "output": one of the reference's outputs; "input": one of the inputs
    index: int  # which output or input
    dim: int  # the dimension the indices run along


def parse_tie_spec(text: str) -> TieSpec:
    """`"output 0 dim -1"` -> TieSpec("output", 0, -1); ValueError saying the form otherwise."""
    match = _TIE_SPEC.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"tie-prone spec {text!r}: expected 'output N dim D' or 'input N dim D'")
    return TieSpec(match.group(1), int(match.group(2)), int(match.group(3)))


def tie_prone_of(source: str) -> dict[str, str]:
    """The module's `TIE_PRONE = {OUTPUT: SPEC, ...}` literal as `Task.tie_prone` ({"2": "output 0 dim -1"}),
    read without running the module; {} without one (or when the source does not parse). ValueError when the
    value is not such a literal."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    found = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == TIE_PRONE for t in node.targets)
    ]
    if not found:
        return {}
    try:
        value = ast.literal_eval(found[-1])
    except ValueError:
        raise ValueError(f"{TIE_PRONE} must be a literal dict {{output index: spec}}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{TIE_PRONE} must be a dict {{output index: spec}}, got {type(value).__name__}")
    out = {}
    for key, text in value.items():
        if not isinstance(key, int) or isinstance(key, bool) or key < 0:
            raise ValueError(f"{TIE_PRONE}: keys are output indices (0, 1, ...), got {key!r}")
        spec = parse_tie_spec(text)
        if spec.source == "output" and spec.index == key:
            raise ValueError(f"{TIE_PRONE}: output {key} cannot select from its own values")
        out[str(key)] = text
    return out


class ContractError(Exception):
    """The module breaks the KernelBench contract; `kind` is one of check.ERROR_KINDS."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass
class Reference:
    """The three names a task module must define."""

    model_cls: type
    get_inputs: Callable[[], Any]
    get_init_inputs: Callable[[], Any]
    module: types.ModuleType


def needs_download(source: str) -> bool:
    """True for modules that load pretrained models at run time (KernelBench Level 4)."""
    return any(marker in source for marker in DOWNLOAD_MARKERS)


def exec_module(source: str, sizes: dict[str, int], path: Path, name: str = "kz_task") -> types.ModuleType:
    """Execute `source` (with `sizes` applied) as a fresh module stored at `path`."""
    path.write_text(source)
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ContractError("syntax_error", f"line {exc.lineno}: {exc.msg}") from None
    code = compile(apply_sizes(tree, sizes), str(path), "exec")
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except Exception as exc:  # the module's own top-level code failed
        raise ContractError("import_error", f"{type(exc).__name__}: {exc}") from exc
    return module


def load_reference(source: str, sizes: dict[str, int], path: Path) -> Reference:
    """Execute a task module and return its contract, or raise ContractError."""
    if needs_download(source):
        raise ContractError(
            "needs_download",
            "this module loads a pretrained model at run time (KernelBench Level 4 style); "
            "kernelzero does not download models: skip it or provide a local copy",
        )
    module = exec_module(source, sizes, path)
    names = {"Model": "missing_model", "get_inputs": "missing_get_inputs", "get_init_inputs": "missing_get_init_inputs"}
    for attr, kind in names.items():
        if not hasattr(module, attr):
            raise ContractError(kind, f"the module defines no `{attr}`")
    model_cls = module.Model
    if not isinstance(model_cls, type):
        raise ContractError("missing_model", "`Model` is not a class")
    for attr in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, attr)):
            raise ContractError(names[attr], f"`{attr}` is not callable")
    return Reference(model_cls, module.get_inputs, module.get_init_inputs, module)
