"""Run a task's source as a module, with size overrides, and pull out its contract.

Only child processes call this (the contract check, the verifier's trusted judge): it executes the
task's code. The source is written to a real file first so tracebacks show its lines, and Triton or
`inspect` can read it back.
"""

from __future__ import annotations

import ast
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelzero.tasks.sizes import apply_sizes

DOWNLOAD_MARKERS = ("from_pretrained", "AutoModel", "AutoConfig", "hf_hub_download")


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
